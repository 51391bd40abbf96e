#include "machine.hpp"
#include "../fork_safe_mutex.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

namespace arbiter::emu::ptx {
namespace {

std::map<std::string, Handler>& families() {
  static auto* m = new std::map<std::string, Handler>;
  return *m;
}

uint64_t mask(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }

int constraint_bits(char c) {
  switch (c) {
    case 'h': return 16;
    case 'c': return 8;
    case 'r':
    case 'f': return 32;
    default: return 64;  // l, d, n
  }
}

}  // namespace

void register_family(const char* family, Handler handler) { families()[family] = handler; }

Handler find_family(const std::string& family) {
  auto it = families().find(family);
  return it == families().end() ? nullptr : it->second;
}

int type_bits(const std::string& p) {
  if (p == "pred") return 1;
  if (p.size() < 2 || p.size() > 4) return 0;
  const char k = p[0];
  if (k != 'b' && k != 'u' && k != 's' && k != 'f' && !(p.rfind("bf", 0) == 0)) return 0;
  const std::string digits = p.rfind("bf", 0) == 0 ? p.substr(2) : p.substr(1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::atoi(digits.c_str());
}

Machine::Machine(const Program& program, AsmOperand* operands, size_t count, const AsmSite& site)
    : program_(program),
      operands_(operands),
      count_(count),
      site_(site),
      where_(site.file, site.line),
      thread_(this_thread(Site(site.file, site.line))),
      locals_(program.locals.size(), 0) {}

AsmOperand& Machine::asm_operand(const Operand& o) const {
  if (o.kind != Operand::Kind::asm_operand || o.index < 0 || static_cast<size_t>(o.index) >= count_)
    fault(kErrorIllegalInstruction, "the PTX names operand %" + std::to_string(o.index) + " of " + std::to_string(count_),
          where_);
  return operands_[o.index];
}

uint64_t* Machine::local(const Operand& o) {
  return o.kind == Operand::Kind::local ? &locals_[static_cast<size_t>(o.index)] : nullptr;
}

uint64_t Machine::read(const Operand& o, int bits) const {
  switch (o.kind) {
    case Operand::Kind::asm_operand: {
      const AsmOperand& a = asm_operand(o);
      return a.value & mask(std::min(bits, constraint_bits(a.constraint)));
    }
    case Operand::Kind::local: return locals_[static_cast<size_t>(o.index)] & mask(bits);
    case Operand::Kind::immediate: return o.value & mask(bits);
    case Operand::Kind::sink: return 0;
    case Operand::Kind::special: {
      const ThreadState& t = thread_;
      const dim3 bd = t.block->cluster->launch->config.block, gd = t.block->cluster->launch->config.grid;
      const std::string& n = o.name;
      uint64_t v = 0;
      if (n == "%laneid") v = t.lane;
      else if (n == "%warpid") v = t.warp;
      else if (n == "%tid.x") v = t.index.x;
      else if (n == "%tid.y") v = t.index.y;
      else if (n == "%tid.z") v = t.index.z;
      else if (n == "%ntid.x") v = bd.x;
      else if (n == "%ntid.y") v = bd.y;
      else if (n == "%ntid.z") v = bd.z;
      else if (n == "%ctaid.x") v = t.block->index.x;
      else if (n == "%ctaid.y") v = t.block->index.y;
      else if (n == "%ctaid.z") v = t.block->index.z;
      else if (n == "%nctaid.x") v = gd.x;
      else if (n == "%nctaid.y") v = gd.y;
      else if (n == "%nctaid.z") v = gd.z;
      else if (n == "%cluster_ctarank") v = t.block->rank;
      else if (n == "%cluster_nctarank") v = t.block->cluster->blocks.size();
      else if (n == "%clock" || n == "%clock64" || n == "%globaltimer") v = static_cast<uint64_t>(clock64());
      else if (n == "%smid") v = 0;
      else if (n == "%lanemask_lt") v = (1u << t.lane) - 1;
      else if (n == "%lanemask_le") v = (2ull << t.lane) - 1;
      else if (n == "%lanemask_eq") v = 1u << t.lane;
      else if (n == "%lanemask_gt") v = ~((2ull << t.lane) - 1) & 0xffffffffu;
      else if (n == "%lanemask_ge") v = ~((1ull << t.lane) - 1) & 0xffffffffu;
      else fault(kErrorIllegalInstruction, "the special register " + n + " is not emulated", where_);
      return v & mask(bits);
    }
    default: fault(kErrorIllegalInstruction, "an operand that cannot be read here", where_);
  }
}

void Machine::write(const Operand& o, uint64_t value, int bits) {
  value &= mask(bits);
  switch (o.kind) {
    case Operand::Kind::asm_operand: {
      AsmOperand& a = asm_operand(o);
      if (!a.written)
        fault(kErrorIllegalInstruction, "the PTX writes %" + std::to_string(o.index) + ", an input operand", where_);
      std::memcpy(a.storage, &value, std::min<size_t>(a.size, 8));  // little-endian: the low bytes
      a.value = value;
      return;
    }
    case Operand::Kind::local: {
      const int width = program_.locals[static_cast<size_t>(o.index)].bits;
      locals_[static_cast<size_t>(o.index)] = value & mask(width);
      return;
    }
    case Operand::Kind::sink: return;
    default: fault(kErrorIllegalInstruction, "an operand that cannot be written", where_);
  }
}

float Machine::read_f32(const Operand& o) const {
  const uint32_t bits = static_cast<uint32_t>(read(o, 32));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double Machine::read_f64(const Operand& o) const {
  const uint64_t bits = read(o, 64);
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

void Machine::write_f32(const Operand& o, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  write(o, bits, 32);
}

void Machine::write_f64(const Operand& o, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  write(o, bits, 64);
}

bool Machine::read_pred(const Operand& o) const {
  const bool v = o.kind == Operand::Kind::immediate ? o.value != 0 : read(o, 64) != 0;
  return o.negated ? !v : v;
}

void Machine::write_pred(const Operand& o, bool v) { write(o, v ? 1 : 0, 64); }

uint64_t Machine::address(const Operand& o) const {
  if (o.kind != Operand::Kind::address || o.elements.empty())
    fault(kErrorIllegalInstruction, "an address operand ([...]) was expected", where_);
  return read(o.elements[0], 64) + o.value;
}

std::vector<Operand> Machine::elements(const Operand& o) const {
  if (o.kind == Operand::Kind::vector) return o.elements;
  return {o};
}

void Machine::fail(Status status, const std::string& what, const Instruction& in) const {
  fault(status, "PTX `" + in.opcode + "` (line " + std::to_string(in.line) + " of the asm statement): " + what, where_);
}

void Machine::unsupported(const Instruction& in) const {
  fail(kErrorIllegalInstruction, "this instruction or form is not emulated (emulator/README.md lists what is)", in);
}

}  // namespace arbiter::emu::ptx

namespace arbiter::emu {

namespace {

// An asm statement, parsed once for the process, with each instruction's handler looked up.
struct ParsedStatement {
  ptx::Program program;
  std::vector<ptx::Handler> handlers;  // nullptr: not emulated (reported when reached)
};

const ParsedStatement& parsed(AsmSite& site) {
  // The fast path reads the pointer published (release) by the parse below.
  if (void* done = __atomic_load_n(&site.program, __ATOMIC_ACQUIRE)) return *static_cast<ParsedStatement*>(done);
  static ForkSafeMutex parse_mutex{fork_rank::ptx_parse};
  std::lock_guard<ForkSafeMutex> lock(parse_mutex);
  if (site.program == nullptr) {
    auto* statement = new ParsedStatement;  // kept for the process
    try {
      statement->program = ptx::parse(site.text);
    } catch (const std::exception& e) {
      delete statement;
      fault(kErrorIllegalInstruction, std::string("cannot read this inline PTX: ") + e.what(), Site(site.file, site.line));
    }
    for (const ptx::Instruction& in : statement->program.instructions)
      statement->handlers.push_back(ptx::find_family(in.parts[0]));
    __atomic_store_n(&site.program, static_cast<void*>(statement), __ATOMIC_RELEASE);
  }
  return *static_cast<ParsedStatement*>(site.program);
}

}  // namespace

void run_asm(AsmSite& site, AsmOperand* operands, size_t count) {
  const ParsedStatement& statement = parsed(site);
  const auto& code = statement.program.instructions;
  if (code.empty()) return;  // asm volatile("" ...): a compiler fence only
  ptx::Machine m(statement.program, operands, count, site);
  for (size_t pc = 0; pc < code.size();) {
    const ptx::Instruction& in = code[pc];
    m.next = pc + 1;
    if (in.guard >= 0) {
      ptx::Operand p;
      p.kind = ptx::Operand::Kind::local;
      p.index = in.guard;
      if (m.read_pred(p) == in.guard_negated) {
        pc = m.next;
        continue;
      }
    }
    const ptx::Handler handler = statement.handlers[pc];
    if (handler == nullptr) m.unsupported(in);
    handler(m, in);
    pc = m.next;
  }
}

}  // namespace arbiter::emu
