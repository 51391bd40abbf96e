// The scalar instructions inline PTX uses around the big ones (PTX ISA, "Instructions"): mov,
// setp, selp, cvt (f32/f64 <-> f16/bf16/integers, every rounding mode), integer and float
// arithmetic, logic and shifts, bra, ld/st of shared and global memory, mapa, elect, shfl.sync,
// vote.sync, activemask, bar.sync 0, fences (nothing to do: one host thread runs a cluster),
// nanosleep and trap.
#include "../../include/arbiter_emulator/float16_types.hpp"
#include "../shared_memory.hpp"
#include "machine.hpp"

#include <cfenv>
#include <cmath>
#include <cstring>

namespace arbiter::emu::ptx {
namespace {

uint64_t mask(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }

int64_t sign_extend(uint64_t v, int bits) {
  if (bits >= 64) return static_cast<int64_t>(v);
  const uint64_t sign = 1ull << (bits - 1);
  return static_cast<int64_t>((v & mask(bits)) ^ sign) - static_cast<int64_t>(sign);
}

// The last part of the opcode that is a type: "b32", "u64", "f32", "pred", ...
std::string last_type(const Instruction& in) {
  for (size_t k = in.parts.size(); k-- > 1;)
    if (type_bits(in.parts[k]) > 0) return in.parts[k];
  return "";
}

bool is_float(const std::string& t) { return t == "f32" || t == "f64" || t == "f16" || t == "bf16"; }
bool is_signed(const std::string& t) { return !t.empty() && t[0] == 's'; }

double read_number(Machine& m, const Operand& o, const std::string& type) {
  if (type == "f32") return m.read_f32(o);
  if (type == "f64") return m.read_f64(o);
  if (type == "f16") return arbiter_emulated_cuda::float16_detail::half_bits_to_float(static_cast<uint16_t>(m.read(o, 16)));
  if (type == "bf16")
    return arbiter_emulated_cuda::float16_detail::bfloat16_bits_to_float(static_cast<uint16_t>(m.read(o, 16)));
  const int bits = type_bits(type);
  return is_signed(type) ? static_cast<double>(sign_extend(m.read(o, bits), bits)) : static_cast<double>(m.read(o, bits));
}

// ---- mov, setp, selp ---------------------------------------------------------------------------
void mov(Machine& m, const Instruction& in) {
  if (in.operands.size() != 2) m.unsupported(in);
  const int bits = std::max(type_bits(last_type(in)), 1);
  const Operand& d = in.operands[0];
  const Operand& a = in.operands[1];
  if (a.kind == Operand::Kind::vector) {  // mov.b64 d, {lo, hi}: packs
    const std::vector<Operand> parts = m.elements(a);
    const int each = bits / static_cast<int>(parts.size());
    uint64_t v = 0;
    for (size_t k = 0; k < parts.size(); ++k) v |= m.read(parts[k], each) << (each * static_cast<int>(k));
    return m.write(d, v, bits);
  }
  if (d.kind == Operand::Kind::vector) {  // mov.b64 {lo, hi}, a: unpacks
    const std::vector<Operand> parts = m.elements(d);
    const int each = bits / static_cast<int>(parts.size());
    const uint64_t v = m.read(a, bits);
    for (size_t k = 0; k < parts.size(); ++k) m.write(parts[k], v >> (each * static_cast<int>(k)), each);
    return;
  }
  m.write(d, m.read(a, bits), bits);
}

bool compare(const std::string& op, double a, double b, bool unordered_ok) {
  if (std::isnan(a) || std::isnan(b)) return unordered_ok || op == "ne" || op == "neu" || op == "nan";
  if (op == "eq" || op == "equ") return a == b;
  if (op == "ne" || op == "neu") return a != b;
  if (op == "lt" || op == "lo" || op == "ltu") return a < b;
  if (op == "le" || op == "ls" || op == "leu") return a <= b;
  if (op == "gt" || op == "hi" || op == "gtu") return a > b;
  if (op == "ge" || op == "hs" || op == "geu") return a >= b;
  if (op == "num") return true;
  if (op == "nan") return false;
  return false;
}

void setp(Machine& m, const Instruction& in) {
  if (in.parts.size() < 3 || in.operands.size() < 3) m.unsupported(in);
  const std::string& op = in.parts[1];
  const std::string type = last_type(in);
  const int bits = type_bits(type);
  bool r = false;
  if (is_float(type)) {
    const bool unordered = op.size() == 3 && op.back() == 'u';
    r = compare(op, read_number(m, in.operands[1], type), read_number(m, in.operands[2], type), unordered);
  } else {
    const uint64_t a = m.read(in.operands[1], bits), b = m.read(in.operands[2], bits);
    if (op == "eq") r = a == b;
    else if (op == "ne") r = a != b;
    else if (op == "lo") r = a < b;
    else if (op == "ls") r = a <= b;
    else if (op == "hi") r = a > b;
    else if (op == "hs") r = a >= b;
    else {
      const bool s = is_signed(type) || type[0] == 'b';
      const int64_t x = s ? sign_extend(a, bits) : static_cast<int64_t>(a), y = s ? sign_extend(b, bits) : static_cast<int64_t>(b);
      if (op == "lt") r = s ? x < y : a < b;
      else if (op == "le") r = s ? x <= y : a <= b;
      else if (op == "gt") r = s ? x > y : a > b;
      else if (op == "ge") r = s ? x >= y : a >= b;
      else m.unsupported(in);
    }
  }
  if (in.operands.size() == 4) {  // setp.op.and/or/xor.type p, a, b, c
    const bool c = m.read_pred(in.operands[3]);
    if (in.has("and")) r = r && c;
    else if (in.has("or")) r = r || c;
    else if (in.has("xor")) r = r != c;
  }
  const Operand& p = in.operands[0];
  if (p.kind == Operand::Kind::pair) {  // p|q: q the negation
    m.write_pred(p.elements[0], r);
    m.write_pred(p.elements[1], !r);
  } else {
    m.write_pred(p, r);
  }
}

void selp(Machine& m, const Instruction& in) {
  if (in.operands.size() != 4) m.unsupported(in);
  const int bits = type_bits(last_type(in));
  const bool p = m.read_pred(in.operands[3]);
  m.write(in.operands[0], m.read(in.operands[p ? 1 : 2], bits), bits);
}

// ---- cvt -----------------------------------------------------------------------------------------
// Rounds x (exact in double) to the integer or float type `to` with the given rounding mode.
uint64_t convert(double x, const std::string& to, const std::string& rounding, bool saturate) {
  using namespace arbiter_emulated_cuda::float16_detail;
  const int bits = type_bits(to);
  if (to == "f16" || to == "bf16") {
    // Directed modes: nudge to the neighbour toward the mode's direction when x is inexact.
    uint16_t h = to == "f16" ? double_to_half_bits(x) : double_to_bfloat16_bits(x);
    if (rounding != "rn" && !std::isnan(x)) {
      const double back = to == "f16" ? half_bits_to_float(h) : bfloat16_bits_to_float(h);
      auto step = [&](bool up) {  // the next representable value up or down
        const bool negative = (h & 0x8000u) != 0;
        if ((h & 0x7fffu) == 0) return static_cast<uint16_t>(up ? 0x0001 : 0x8001);
        return static_cast<uint16_t>(up != negative ? h + 1 : h - 1);
      };
      if (rounding == "rz" && std::fabs(back) > std::fabs(x)) h = step(x < 0);
      if (rounding == "rm" && back > x) h = step(false);
      if (rounding == "rp" && back < x) h = step(true);
    }
    return h;
  }
  if (to == "f32") {
    float f = static_cast<float>(x);  // round to nearest
    if (rounding == "rz" && std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
    if (rounding == "rm" && static_cast<double>(f) > x) f = std::nextafter(f, -INFINITY);
    if (rounding == "rp" && static_cast<double>(f) < x) f = std::nextafter(f, INFINITY);
    if (saturate) f = std::isnan(f) ? 0.0f : std::fmin(std::fmax(f, 0.0f), 1.0f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  }
  if (to == "f64") {
    uint64_t u;
    std::memcpy(&u, &x, 8);
    return u;
  }
  // To an integer: rni/rzi/rmi/rpi (rounding "rn" etc. from a float source), clamped (PTX
  // saturates float-to-integer conversions), NaN to 0.
  double r = x;
  if (rounding == "rni" || rounding == "rn") r = std::nearbyint(x);
  else if (rounding == "rmi" || rounding == "rm") r = std::floor(x);
  else if (rounding == "rpi" || rounding == "rp") r = std::ceil(x);
  else r = std::trunc(x);
  if (std::isnan(r)) return 0;
  if (to[0] == 's') {
    const double lo = -std::ldexp(1.0, bits - 1), hi = std::ldexp(1.0, bits - 1) - 1;
    return static_cast<uint64_t>(static_cast<int64_t>(std::fmin(std::fmax(r, lo), hi))) & mask(bits);
  }
  const double hi = std::ldexp(1.0, bits) - 1;
  return static_cast<uint64_t>(std::fmin(std::fmax(r, 0.0), hi)) & mask(bits);
}

void cvt(Machine& m, const Instruction& in) {
  // cvt[.rnd][.ftz][.sat].dtype.atype d, a   and   cvt.rn[.relu].{f16x2,bf16x2}.f32 d, a, b
  std::string rounding = "", to, from;
  bool saturate = false, relu = false;
  for (size_t k = 1; k < in.parts.size(); ++k) {
    const std::string& p = in.parts[k];
    if (p == "rn" || p == "rz" || p == "rm" || p == "rp" || p == "rni" || p == "rzi" || p == "rmi" || p == "rpi") rounding = p;
    else if (p == "sat") saturate = true;
    else if (p == "relu") relu = true;
    else if (p == "ftz") continue;
    else if (to.empty()) to = p;
    else from = p;
  }
  if (to == "f16x2" || to == "bf16x2") {
    if (in.operands.size() != 3 || from != "f32") m.unsupported(in);
    const std::string half = to == "f16x2" ? "f16" : "bf16";
    double hi = m.read_f32(in.operands[1]), lo = m.read_f32(in.operands[2]);  // d = {a: upper, b: lower}
    if (relu) {
      hi = std::isnan(hi) ? hi : std::fmax(hi, 0.0);
      lo = std::isnan(lo) ? lo : std::fmax(lo, 0.0);
    }
    const uint64_t v = (convert(hi, half, rounding.empty() ? "rn" : rounding, false) << 16) |
                       convert(lo, half, rounding.empty() ? "rn" : rounding, false);
    return m.write(in.operands[0], v, 32);
  }
  if (in.operands.size() != 2 || type_bits(to) == 0 || type_bits(from) == 0) m.unsupported(in);
  double x = read_number(m, in.operands[1], from);
  if (relu && !std::isnan(x)) x = std::fmax(x, 0.0);
  if (rounding.empty()) rounding = is_float(to) && is_float(from) ? "rn" : is_float(from) ? "rzi" : "rn";
  uint64_t v;
  if (!is_float(to) && !is_float(from)) {  // integer to integer: truncate or extend
    v = is_signed(from) ? static_cast<uint64_t>(sign_extend(m.read(in.operands[1], type_bits(from)), type_bits(from)))
                        : m.read(in.operands[1], type_bits(from));
    if (saturate) m.unsupported(in);
  } else {
    v = convert(x, to, rounding, saturate);
  }
  m.write(in.operands[0], v, std::max(type_bits(to), 16));
}

// ---- arithmetic and logic ---------------------------------------------------------------------------
void arithmetic(Machine& m, const Instruction& in) {
  const std::string& op = in.parts[0];
  const std::string type = last_type(in);
  const int bits = type_bits(type);
  if (bits == 0 || in.operands.empty()) m.unsupported(in);
  const Operand& d = in.operands[0];
  auto arg = [&](size_t k) -> const Operand& {
    if (k >= in.operands.size()) m.unsupported(in);
    return in.operands[k];
  };
  if (is_float(type)) {
    if (type != "f32" && type != "f64") m.unsupported(in);
    const bool f32 = type == "f32";
    auto get = [&](size_t k) { return f32 ? static_cast<double>(m.read_f32(arg(k))) : m.read_f64(arg(k)); };
    auto put = [&](double v) { f32 ? m.write_f32(d, static_cast<float>(v)) : m.write_f64(d, v); };
    auto fput = [&](float v32, double v64) { f32 ? m.write_f32(d, v32) : m.write_f64(d, v64); };
    if (op == "add") return fput(m.read_f32(arg(1)) + m.read_f32(arg(2)), get(1) + get(2));
    if (op == "sub") return fput(m.read_f32(arg(1)) - m.read_f32(arg(2)), get(1) - get(2));
    if (op == "mul") return fput(m.read_f32(arg(1)) * m.read_f32(arg(2)), get(1) * get(2));
    if (op == "fma" || op == "mad")
      return fput(std::fma(m.read_f32(arg(1)), m.read_f32(arg(2)), m.read_f32(arg(3))), std::fma(get(1), get(2), get(3)));
    if (op == "div") return fput(m.read_f32(arg(1)) / m.read_f32(arg(2)), get(1) / get(2));
    if (op == "min") return put(std::fmin(get(1), get(2)));
    if (op == "max") return put(std::fmax(get(1), get(2)));
    if (op == "neg") return put(-get(1));
    if (op == "abs") return put(std::fabs(get(1)));
    if (op == "sqrt") return fput(std::sqrt(m.read_f32(arg(1))), std::sqrt(get(1)));
    if (op == "rsqrt") return fput(1.0f / std::sqrt(m.read_f32(arg(1))), 1.0 / std::sqrt(get(1)));
    if (op == "rcp") return fput(1.0f / m.read_f32(arg(1)), 1.0 / get(1));
    if (op == "ex2") return fput(std::exp2(m.read_f32(arg(1))), std::exp2(get(1)));
    if (op == "lg2") return fput(std::log2(m.read_f32(arg(1))), std::log2(get(1)));
    m.unsupported(in);
  }
  const bool s = is_signed(type);
  auto u = [&](size_t k) { return m.read(arg(k), bits); };
  auto i = [&](size_t k) { return sign_extend(m.read(arg(k), bits), bits); };
  uint64_t r = 0;
  if (op == "add") r = u(1) + u(2);
  else if (op == "sub") r = u(1) - u(2);
  else if (op == "mul") {
    const bool wide = in.has("wide"), hi = in.has("hi");
    if (wide) return m.write(d, s ? static_cast<uint64_t>(i(1) * i(2)) : u(1) * u(2), 2 * bits);
    if (hi) {
      const unsigned __int128 p = s ? static_cast<unsigned __int128>(static_cast<__int128>(i(1)) * i(2))
                                    : static_cast<unsigned __int128>(u(1)) * u(2);
      r = static_cast<uint64_t>(p >> bits);
    } else {
      r = u(1) * u(2);
    }
  } else if (op == "mad") {
    if (in.has("hi") || in.has("wide")) m.unsupported(in);
    r = u(1) * u(2) + u(3);
  } else if (op == "min") r = s ? static_cast<uint64_t>(std::min(i(1), i(2))) : std::min(u(1), u(2));
  else if (op == "max") r = s ? static_cast<uint64_t>(std::max(i(1), i(2))) : std::max(u(1), u(2));
  else if (op == "and") r = u(1) & u(2);
  else if (op == "or") r = u(1) | u(2);
  else if (op == "xor") r = u(1) ^ u(2);
  else if (op == "not") r = ~u(1);
  else if (op == "neg") r = static_cast<uint64_t>(-i(1));
  else if (op == "abs") r = static_cast<uint64_t>(std::llabs(i(1)));
  else if (op == "shl") r = m.read(arg(2), 32) >= static_cast<uint64_t>(bits) ? 0 : u(1) << m.read(arg(2), 32);
  else if (op == "shr") {
    const uint64_t n = std::min<uint64_t>(m.read(arg(2), 32), static_cast<uint64_t>(bits));
    r = s ? static_cast<uint64_t>(i(1) >> std::min<uint64_t>(n, static_cast<uint64_t>(bits - 1))) : (n >= 64 ? 0 : u(1) >> n);
  } else if (op == "popc") return m.write(d, static_cast<uint64_t>(__builtin_popcountll(u(1))), 32);
  else if (op == "clz") return m.write(d, static_cast<uint64_t>(u(1) == 0 ? bits : __builtin_clzll(u(1)) - (64 - bits)), 32);
  else if (op == "brev") {
    const uint64_t v = u(1);
    for (int k = 0; k < bits; ++k) r |= ((v >> k) & 1) << (bits - 1 - k);
  } else m.unsupported(in);
  m.write(d, r, bits);
}

// ---- control ---------------------------------------------------------------------------------------
void bra(Machine& m, const Instruction& in) {
  if (in.operands.size() != 1 || in.operands[0].kind != Operand::Kind::label) m.unsupported(in);
  m.next = static_cast<size_t>(in.operands[0].index);
}

void nothing(Machine&, const Instruction&) {}

void trap_instruction(Machine& m, const Instruction& in) { m.fail(kErrorLaunchFailure, "the kernel trapped", in); }

void nanosleep_instruction(Machine& m, const Instruction&) { spin("nanosleep", m.where()); }

// ---- memory ------------------------------------------------------------------------------------------
// ld/st of the shared (32-bit address) or global/generic (64-bit address) space, scalars and
// .v2/.v4 vectors.
void load_store(Machine& m, const Instruction& in) {
  const bool load = in.parts[0] == "ld";
  const std::string type = last_type(in);
  const int bits = type_bits(type);
  int lanes = 1;
  if (in.has("v2")) lanes = 2;
  if (in.has("v4")) lanes = 4;
  if (bits == 0 || in.operands.size() != 2) m.unsupported(in);
  bool shared = false, cluster = false;
  for (const std::string& p : in.parts) {
    if (p == "shared" || p == "shared::cta") shared = true;
    if (p == "shared::cluster") shared = cluster = true;
  }
  const Operand& address_operand = in.operands[load ? 1 : 0];
  const Operand& data = in.operands[load ? 0 : 1];
  const uint32_t bytes = static_cast<uint32_t>(bits / 8 * lanes);
  const uint64_t a = m.address(address_operand);
  if (a % (bits / 8 * lanes) != 0) m.fail(kErrorMisalignedAddress, "a misaligned address", in);
  unsigned char* p = shared ? shared_bytes(static_cast<uint32_t>(a), bytes, in.opcode.c_str(), m.where())
                            : reinterpret_cast<unsigned char*>(a);
  (void)cluster;
  const std::vector<Operand> values = m.elements(data);
  if (static_cast<int>(values.size()) != lanes) m.unsupported(in);
  for (int k = 0; k < lanes; ++k) {
    uint64_t v = 0;
    if (load) {
      std::memcpy(&v, p + k * (bits / 8), static_cast<size_t>(bits / 8));
      if (is_signed(type)) v = static_cast<uint64_t>(sign_extend(v, bits));
      m.write(values[static_cast<size_t>(k)], v, std::max(bits, 16));
    } else {
      v = m.read(values[static_cast<size_t>(k)], bits);
      std::memcpy(p + k * (bits / 8), &v, static_cast<size_t>(bits / 8));
    }
  }
}

// mapa.shared::cluster.u32 d, a, rank: the address of the same offset in block `rank`.
void mapa(Machine& m, const Instruction& in) {
  if (in.operands.size() != 3 || !in.has("shared::cluster")) m.unsupported(in);
  const uint32_t a = static_cast<uint32_t>(m.read(in.operands[1], 32)) & ((1u << kClusterWindowShift) - 1);
  const uint32_t rank = static_cast<uint32_t>(m.read(in.operands[2], 32));
  if (rank >= m.thread().block->cluster->blocks.size()) m.fail(kErrorIllegalAddress, "mapa to a rank past the cluster", in);
  m.write(in.operands[0], ((rank + 1) << kClusterWindowShift) | a, 32);
}

// elect.sync d|p, membermask: the lowest lane of the mask is elected.
void elect(Machine& m, const Instruction& in) {
  if (in.operands.size() != 2) m.unsupported(in);
  const unsigned mask_bits = static_cast<unsigned>(m.read(in.operands[1], 32));
  const unsigned lanes = ballot(mask_bits, 1, m.where());
  const unsigned leader = lanes == 0 ? 0 : static_cast<unsigned>(__builtin_ctz(lanes));
  const Operand& d = in.operands[0];
  const bool me = m.thread().lane == leader;
  if (d.kind == Operand::Kind::pair) {
    m.write(d.elements[0], leader, 32);
    m.write_pred(d.elements[1], me);
  } else {
    m.write_pred(d, me);
  }
}

// shfl.sync.{idx,up,down,bfly}.b32 d[|p], a, b, c, membermask
void shfl(Machine& m, const Instruction& in) {
  if (in.operands.size() != 5 || in.parts.size() < 4) m.unsupported(in);
  const std::string& mode = in.parts[2];
  const uint32_t a = static_cast<uint32_t>(m.read(in.operands[1], 32));
  const int b = static_cast<int>(m.read(in.operands[2], 32));
  const uint32_t c = static_cast<uint32_t>(m.read(in.operands[3], 32));
  const unsigned membermask = static_cast<unsigned>(m.read(in.operands[4], 32));
  // c packs the segment mask (bits 8-12) and the clamp (bits 0-4): width = 32 - segmask lanes.
  const int width = 32 - static_cast<int>((c >> 8) & 0x1f);
  const Shuffle kind = mode == "idx" ? Shuffle::index : mode == "up" ? Shuffle::up : mode == "down" ? Shuffle::down : Shuffle::xor_;
  const uint32_t r = shuffle(kind, membermask, a, b, width > 0 ? width : 32, m.where());
  const Operand& d = in.operands[0];
  if (d.kind == Operand::Kind::pair) {
    m.write(d.elements[0], r, 32);
    m.write_pred(d.elements[1], true);
  } else {
    m.write(d, r, 32);
  }
}

// vote.sync.{ballot.b32,all.pred,any.pred,uni.pred} d, p, membermask
void vote(Machine& m, const Instruction& in) {
  if (in.operands.size() != 3 || in.parts.size() < 3) m.unsupported(in);
  const unsigned membermask = static_cast<unsigned>(m.read(in.operands[2], 32));
  const bool p = m.read_pred(in.operands[1]);
  const std::string& mode = in.parts[2];
  const unsigned yes = ballot(membermask, p, m.where());
  if (mode == "ballot") return m.write(in.operands[0], yes, 32);
  if (mode == "all") return m.write_pred(in.operands[0], yes == membermask);
  if (mode == "any") return m.write_pred(in.operands[0], yes != 0);
  if (mode == "uni") return m.write_pred(in.operands[0], yes == 0 || yes == membermask);
  m.unsupported(in);
}

void activemask_instruction(Machine& m, const Instruction& in) { m.write(in.operands.at(0), activemask(), 32); }

// bar.sync 0 / barrier.sync 0 (and .aligned): __syncthreads. Named barriers with counts are not emulated.
void bar(Machine& m, const Instruction& in) {
  if (in.parts[0] == "barrier" && in.has("cluster")) {
    if (in.has("wait")) return cluster_sync(m.where());
    if (in.has("arrive")) return;  // the wait does the meeting
    m.unsupported(in);
  }
  if (in.operands.empty() || in.operands.size() > 1 || m.read(in.operands[0], 32) != 0 || in.has("arrive") || in.has("red"))
    m.unsupported(in);
  syncthreads(m.where());
}

const bool registered = [] {
  register_family("mov", mov);
  register_family("setp", setp);
  register_family("selp", selp);
  register_family("cvt", cvt);
  for (const char* op : {"add", "sub", "mul", "mad", "fma", "div", "min", "max", "and", "or", "xor", "not", "neg", "abs",
                         "shl", "shr", "popc", "clz", "brev", "sqrt", "rsqrt", "rcp", "ex2", "lg2"})
    register_family(op, arithmetic);
  register_family("bra", bra);
  register_family("fence", nothing);
  register_family("membar", nothing);
  register_family("prefetch", nothing);
  register_family("prefetchu", nothing);
  register_family("griddepcontrol", nothing);
  register_family("trap", trap_instruction);
  register_family("nanosleep", nanosleep_instruction);
  register_family("ld", load_store);
  register_family("st", load_store);
  register_family("mapa", mapa);
  register_family("elect", elect);
  register_family("shfl", shfl);
  register_family("vote", vote);
  register_family("activemask", activemask_instruction);
  register_family("bar", bar);
  register_family("barrier", bar);
  return true;
}();

}  // namespace
}  // namespace arbiter::emu::ptx
