// Hopper warpgroup instructions (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-
// Accumulate Instructions" and "setmaxnreg"), each met by the warpgroup's 128 threads:
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16} d, desc-a, desc-b, scale-d,
//       imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
// with both operands in shared memory, K-major, named by matrix descriptors: start address
// (bits 0-13, >> 4), leading byte offset (16-29), stride byte offset (32-45), base offset
// (49-51), layout (62-63: 0 none, 1 128B, 2 64B, 3 32B swizzle). Element (row, k) of a swizzled
// operand is at start + (row % 8) * span + (row / 8) * SBO + 2k, the swizzle applied to that
// address (as TMA writes it); without swizzle, core matrices of 8 rows x 16 bytes, SBO apart
// along rows and LBO apart along k. The accumulators of thread t (warp w, lane l) are
// d[4j + f] = D[16w + l/4 + 8(f/2)][8j + 2(l%4) + f%2].
// mma_async only records the operation; it runs at the wait_group that retires its group,
// reading shared memory then: a stage released before that is read after it was refilled.
#include "../../include/arbiter_emulator/float16_types.hpp"
#include "../shared_memory.hpp"
#include "async_state.hpp"
#include "machine.hpp"
#include "tensor_map.hpp"

#include <cstring>
#include <memory>

namespace arbiter::emu {

WarpgroupState& warpgroup_of(ThreadState& t) {
  Block& b = *t.block;
  if (b.warpgroups.empty()) {
    const size_t groups = (b.threads.size() + 127) / 128;
    for (size_t g = 0; g < groups; ++g) {
      b.warpgroups.push_back(std::make_unique<WarpgroupState>());
      b.warpgroups.back()->registers = b.cluster->launch->info.registers;
    }
  }
  return *b.warpgroups[t.linear / 128];
}

void finish_block_async_state(Block& b) {
  for (const auto& [offset, barrier] : b.mbarriers)
    if (!barrier->in_flight.empty())
      fault(kErrorLaunchFailure,
            std::to_string(barrier->in_flight.size()) + " TMA copies on the mbarrier at shared address " +
                std::to_string(offset) + " were never waited for when the block ended (issued at " +
                where_text(barrier->in_flight.front().where) + ")",
            barrier->in_flight.front().where);
  for (size_t g = 0; g < b.warpgroups.size(); ++g) {
    const WarpgroupState& wg = *b.warpgroups[g];
    if (!wg.uncommitted.empty() || !wg.groups.empty()) {
      const WgmmaOp& op = wg.uncommitted.empty() ? wg.groups.front().front() : wg.uncommitted.front();
      fault(kErrorLaunchFailure,
            "wgmma operations of warpgroup " + std::to_string(g) + " were still in flight when the block ended "
            "(no wgmma.wait_group retired them)",
            op.where);
    }
  }
}

namespace ptx {
namespace {

// A warpgroup waiting for registers, for deadlock reports (value: the count it asked for).
std::string describe_register_wait(const void* block, uint64_t value) {
  return "to " + std::to_string(value) + " registers (" +
         std::to_string(static_cast<const Block*>(block)->register_pool_free / 128) + " a thread free in the block's pool)";
}


using namespace arbiter_emulated_cuda::float16_detail;

struct Descriptor {
  uint32_t start, leading, stride;
  int base_offset, layout;
};

Descriptor decode(uint64_t d) {
  return {static_cast<uint32_t>((d & 0x3fff) << 4), static_cast<uint32_t>(((d >> 16) & 0x3fff) << 4),
          static_cast<uint32_t>(((d >> 32) & 0x3fff) << 4), static_cast<int>((d >> 49) & 7), static_cast<int>(d >> 62)};
}

uint32_t element_address(const Descriptor& d, int row, int k) {
  if (d.layout == 0) return d.start + (row / 8) * d.stride + (k / 8) * d.leading + (row % 8) * 16 + (k % 8) * 2;
  const uint32_t span = d.layout == 1 ? 128 : d.layout == 2 ? 64 : 32;
  const int swizzle = d.layout == 1 ? 3 : d.layout == 2 ? 2 : 1;  // tensor_map.hpp's numbering
  return swizzled(d.start + (row % 8) * span + (row / 8) * d.stride + static_cast<uint32_t>(k) * 2, swizzle);
}

float load(const Descriptor& d, int row, int k, bool bf16, Site where) {
  uint16_t bits;
  std::memcpy(&bits, shared_bytes(element_address(d, row, k), 2, "wgmma operand", where), 2);
  return bf16 ? bfloat16_bits_to_float(bits) : half_bits_to_float(bits);
}

void execute(const WgmmaOp& op) {
  const Descriptor a = decode(op.desc_a), b = decode(op.desc_b);
  for (const Descriptor* d : {&a, &b})
    if (d->base_offset != 0)
      fault(kErrorIllegalInstruction, "wgmma: a matrix descriptor with a base offset is not emulated", op.where);
  // The operands, widened, per thread: on the heap, not in thread-local storage, so that
  // libarbiter_emu's TLS block stays small enough for a process to dlopen it (a Python
  // extension loading libarbiter: glibc leaves only a few hundred bytes of static TLS).
  struct Operands {
    float A[64][16], B[256][16];
  };
  static thread_local std::unique_ptr<Operands> operands;
  if (!operands) operands = std::make_unique<Operands>();
  auto& A = operands->A;
  auto& B = operands->B;
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) A[m][k] = load(a, m, k, op.a_bf16, op.where) * op.scale_a;
  for (int n = 0; n < op.n; ++n)
    for (int k = 0; k < 16; ++k) B[n][k] = load(b, n, k, op.b_bf16, op.where) * op.scale_b;
  for (int t = 0; t < 128; ++t) {
    const int warp = t / 32, lane = t % 32;
    for (int i = 0; i < op.n / 2; ++i) {
      const int j = i / 4, f = i % 4;
      const int row = 16 * warp + lane / 4 + 8 * (f / 2), col = 8 * j + 2 * (lane % 4) + f % 2;
      float& acc = *op.accumulators[static_cast<size_t>(t)][static_cast<size_t>(i)];
      double sum = op.scale_d ? acc : 0.0;
      for (int k = 0; k < 16; ++k) sum += static_cast<double>(A[row][k]) * B[col][k];
      acc = static_cast<float>(sum);
    }
  }
}

const std::bitset<128> kWarpgroup = ~std::bitset<128>();

struct MmaSlot {
  uint64_t desc_a = 0, desc_b = 0;
  bool scale_d = true;
  int64_t scale_a = 1, scale_b = 1, trans_a = 0, trans_b = 0;
  std::vector<float*> accumulators;
};
struct MmaContext {
  int n;
  bool a_bf16, b_bf16;
  Site where;
};

void combine_mma(void** slots, const std::bitset<128>&, void* context) {
  const MmaContext& c = *static_cast<MmaContext*>(context);
  const MmaSlot& first = *static_cast<MmaSlot*>(slots[0]);
  for (int t = 1; t < 128; ++t) {
    const MmaSlot& s = *static_cast<MmaSlot*>(slots[t]);
    if (s.desc_a != first.desc_a || s.desc_b != first.desc_b || s.scale_d != first.scale_d || s.scale_a != first.scale_a ||
        s.scale_b != first.scale_b)
      fault(kErrorLaunchFailure,
            "wgmma.mma_async: thread " + std::to_string(t) + " of the warpgroup passes other descriptors or scales "
            "than thread 0 (all 128 must pass the same)",
            c.where);
  }
  WgmmaOp op;
  op.n = c.n;
  op.a_bf16 = c.a_bf16;
  op.b_bf16 = c.b_bf16;
  op.desc_a = first.desc_a;
  op.desc_b = first.desc_b;
  op.scale_d = first.scale_d;
  op.scale_a = static_cast<float>(first.scale_a);
  op.scale_b = static_cast<float>(first.scale_b);
  op.where = c.where;
  for (int t = 0; t < 128; ++t) op.accumulators.push_back(static_cast<MmaSlot*>(slots[t])->accumulators);
  ThreadState* me = current_thread();
  warpgroup_of(*me).uncommitted.push_back(std::move(op));
}

void mma_async(Machine& m, const Instruction& in) {
  int n = 0;
  for (const std::string& p : in.parts)
    if (p.rfind("m64n", 0) == 0 && p.size() > 7 && p.compare(p.size() - 3, 3, "k16") == 0)
      n = std::atoi(p.c_str() + 4);
  if (n < 8 || n > 256 || n % 8 != 0 || in.operands.size() != 8) m.unsupported(in);
  std::vector<std::string> types;
  for (const std::string& p : in.parts)
    if (p == "f32" || p == "f16" || p == "bf16") types.push_back(p);
  if (types.size() != 3 || types[0] != "f32") m.unsupported(in);
  if (in.operands[1].kind == Operand::Kind::vector) m.fail(kErrorIllegalInstruction, "A from registers is not emulated", in);
  const std::vector<Operand> d = m.elements(in.operands[0]);
  if (static_cast<int>(d.size()) != n / 2)
    m.fail(kErrorIllegalInstruction, "m64n" + std::to_string(n) + "k16 has " + std::to_string(n / 2) + " accumulators a thread", in);
  MmaSlot slot;
  slot.desc_a = m.read(in.operands[1], 64);
  slot.desc_b = m.read(in.operands[2], 64);
  slot.scale_d = m.read_pred(in.operands[3]);
  auto signed_immediate = [&](const Operand& o) { return static_cast<int64_t>(static_cast<int32_t>(m.read(o, 32))); };
  slot.scale_a = signed_immediate(in.operands[4]);
  slot.scale_b = signed_immediate(in.operands[5]);
  slot.trans_a = signed_immediate(in.operands[6]);
  slot.trans_b = signed_immediate(in.operands[7]);
  if ((slot.scale_a != 1 && slot.scale_a != -1) || (slot.scale_b != 1 && slot.scale_b != -1))
    m.fail(kErrorIllegalInstruction, "imm-scale-a and imm-scale-b must be 1 or -1", in);
  if (slot.trans_a != 0 || slot.trans_b != 0)
    m.fail(kErrorIllegalInstruction, "transposed (MN-major) operands are not emulated", in);
  for (const Operand& o : d) {
    AsmOperand& a = m.asm_operand(o);
    if (a.constraint != 'f' || !a.written || a.size != 4)
      m.fail(kErrorIllegalInstruction, "accumulators must be \"+f\" floats", in);
    slot.accumulators.push_back(static_cast<float*>(a.storage));
  }
  MmaContext context{n, types[1] == "bf16", types[2] == "bf16", m.where()};
  meet(1, kWarpgroup, in.opcode.c_str(), &slot, combine_mma, &context, m.where());
}

void combine_nothing(void**, const std::bitset<128>&, void*) {}

void combine_commit(void**, const std::bitset<128>&, void*) {
  WarpgroupState& wg = warpgroup_of(*current_thread());
  wg.groups.push_back(std::move(wg.uncommitted));
  wg.uncommitted.clear();
}

void combine_wait(void**, const std::bitset<128>&, void* context) {
  const size_t pending = *static_cast<size_t*>(context);
  WarpgroupState& wg = warpgroup_of(*current_thread());
  while (wg.groups.size() > pending) {
    for (const WgmmaOp& op : wg.groups.front()) execute(op);
    wg.groups.pop_front();
  }
}

void wgmma(Machine& m, const Instruction& in) {
  if (in.parts.size() < 2 || !in.has("sync") || !in.has("aligned")) m.unsupported(in);
  const std::string& op = in.parts[1];
  if (op == "mma_async") return mma_async(m, in);
  if (op == "fence") return meet(1, kWarpgroup, in.opcode.c_str(), nullptr, combine_nothing, nullptr, m.where());
  if (op == "commit_group") return meet(1, kWarpgroup, in.opcode.c_str(), nullptr, combine_commit, nullptr, m.where());
  if (op == "wait_group") {
    size_t pending = static_cast<size_t>(m.read(in.operands.at(0), 32));
    return meet(1, kWarpgroup, in.opcode.c_str(), nullptr, combine_wait, &pending, m.where());
  }
  m.unsupported(in);
}

// ---- setmaxnreg ------------------------------------------------------------------------------------
// The block's registers are a pool (the count at launch times its threads); .dec gives some back,
// .inc waits until the pool can give what it asks: with too few at launch it waits forever, and
// the emulator reports the deadlock.
struct RegisterContext {
  bool increase;
  Site where;
};

void combine_registers(void** slots, const std::bitset<128>&, void* context) {
  const RegisterContext& c = *static_cast<RegisterContext*>(context);
  const int count = *static_cast<int*>(slots[0]);
  for (int t = 1; t < 128; ++t)
    if (*static_cast<int*>(slots[t]) != count)
      fault(kErrorLaunchFailure, "setmaxnreg: the warpgroup's threads ask for different register counts", c.where);
  if (count < 24 || count > 256 || count % 8 != 0)
    fault(kErrorIllegalInstruction, "setmaxnreg: a register count outside 24 .. 256 or not a multiple of 8", c.where);
  ThreadState& me = *current_thread();
  WarpgroupState& wg = warpgroup_of(me);
  Block& b = *me.block;
  if (!c.increase) {
    if (count > wg.registers)
      fault(kErrorLaunchFailure, "setmaxnreg.dec to " + std::to_string(count) + " from " + std::to_string(wg.registers), c.where);
    b.register_pool_free += (wg.registers - count) * 128;
    wg.registers = count;
    progress(b);
    return;
  }
  if (count < wg.registers)
    fault(kErrorLaunchFailure, "setmaxnreg.inc to " + std::to_string(count) + " from " + std::to_string(wg.registers), c.where);
  wg.waiting_for = count;
  wg.granted = false;
}

void setmaxnreg(Machine& m, const Instruction& in) {
  const bool increase = in.has("inc");
  if ((!increase && !in.has("dec")) || in.operands.size() != 1) m.unsupported(in);
  int count = static_cast<int>(m.read(in.operands[0], 32));
  RegisterContext context{increase, m.where()};
  meet(1, kWarpgroup, in.opcode.c_str(), &count, combine_registers, &context, m.where());
  if (!increase) return;
  WarpgroupState& wg = warpgroup_of(m.thread());
  Block& b = *m.thread().block;
  while (!wg.granted) {
    const int needed = (wg.waiting_for - wg.registers) * 128;
    if (b.register_pool_free >= needed) {
      b.register_pool_free -= needed;
      wg.registers = wg.waiting_for;
      wg.granted = true;
      progress(b);
      break;
    }
    spin("setmaxnreg.inc", m.where(), {describe_register_wait, &b, static_cast<uint64_t>(wg.waiting_for)});
  }
}

const bool registered = [] {
  register_family("wgmma", wgmma);
  register_family("setmaxnreg", setmaxnreg);
  return true;
}();

}  // namespace
}  // namespace ptx
}  // namespace arbiter::emu
