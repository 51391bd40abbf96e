// Warp-wide matrix instructions, from the PTX ISA's fragment layouts ("Matrix Fragments for
// mma.m16n8k16" and "ldmatrix"); g = lane / 4 and t = lane % 4 throughout.
//   ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: lanes 8q..8q+7 give the row addresses
//     of matrix q; register q of lane l gets row l/4, columns 2t and 2t+1 (low half first),
//     or with .trans column l/4, rows 2t and 2t+1.
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 (and m16n8k8, and the
//     .f16 accumulator form): A 16x16 row-major, a[r] = A[g + 8 (r % 2)][2t + 8 (r / 2) + {0, 1}];
//     B 16x8 column-major, b[r] = B[2t + 8 r + {0, 1}][g]; C, D c[i] = C[g + 8 (i / 2)][2t + i % 2].
// Products of 16-bit values are exact in float; the sum is taken in double and rounded once.
#include "../../include/arbiter_emulator/float16_types.hpp"
#include "../shared_memory.hpp"
#include "machine.hpp"

#include <cstring>

namespace arbiter::emu::ptx {
namespace {

using namespace arbiter_emulated_cuda::float16_detail;

// ---- ldmatrix ---------------------------------------------------------------------------------
struct LdmatrixSlot {
  uint32_t address = 0;
  uint32_t result[4] = {};
};
struct LdmatrixContext {
  int count;  // matrices: 1, 2, 4
  bool transpose;
  Site where;
};

void combine_ldmatrix(void** slots, const std::bitset<128>&, void* context) {
  const LdmatrixContext& c = *static_cast<LdmatrixContext*>(context);
  uint16_t rows[4][8][8];  // [matrix][row][column]
  for (int q = 0; q < c.count; ++q)
    for (int r = 0; r < 8; ++r) {
      const uint32_t a = static_cast<LdmatrixSlot*>(slots[q * 8 + r])->address;
      if (a % 16 != 0) fault(kErrorMisalignedAddress, "ldmatrix: a row address that is not 16-byte aligned", c.where);
      std::memcpy(rows[q][r], shared_bytes(a, 16, "ldmatrix", c.where), 16);
    }
  for (int lane = 0; lane < 32; ++lane) {
    LdmatrixSlot& s = *static_cast<LdmatrixSlot*>(slots[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int q = 0; q < c.count; ++q) {
      const uint16_t lo = c.transpose ? rows[q][2 * t][g] : rows[q][g][2 * t];
      const uint16_t hi = c.transpose ? rows[q][2 * t + 1][g] : rows[q][g][2 * t + 1];
      s.result[q] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
}

void ldmatrix(Machine& m, const Instruction& in) {
  int count = 0;
  for (const std::string& p : in.parts) {
    if (p == "x1") count = 1;
    if (p == "x2") count = 2;
    if (p == "x4") count = 4;
  }
  if (count == 0 || !in.has("m8n8") || !in.has("b16") || in.operands.size() != 2) m.unsupported(in);
  const std::vector<Operand> destinations = m.elements(in.operands[0]);
  if (static_cast<int>(destinations.size()) != count) m.fail(kErrorIllegalInstruction, "the register count and .xN differ", in);
  LdmatrixSlot slot;
  slot.address = static_cast<uint32_t>(m.address(in.operands[1]));
  LdmatrixContext context{count, in.has("trans"), m.where()};
  meet(0, std::bitset<128>(0xffffffffull), in.opcode.c_str(), &slot, combine_ldmatrix, &context, m.where());
  for (int q = 0; q < count; ++q) m.write(destinations[static_cast<size_t>(q)], slot.result[q], 32);
}

// ---- mma.sync ------------------------------------------------------------------------------------
struct MmaSlot {
  uint32_t a[4] = {}, b[2] = {}, c[4] = {};
  uint32_t d[4] = {};
};
struct MmaContext {
  int k;              // 16 or 8
  bool bf16;          // operand type (A and B alike)
  bool f16_accumulator;
};

float element(uint32_t reg, int half, bool bf16) {
  const uint16_t bits = static_cast<uint16_t>(reg >> (16 * half));
  return bf16 ? bfloat16_bits_to_float(bits) : half_bits_to_float(bits);
}

void combine_mma(void** slots, const std::bitset<128>&, void* context) {
  const MmaContext& c = *static_cast<MmaContext*>(context);
  double A[16][16] = {}, B[16][8] = {}, C[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const MmaSlot& s = *static_cast<MmaSlot*>(slots[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < (c.k == 16 ? 4 : 2); ++r)
      for (int h = 0; h < 2; ++h) A[g + 8 * (r % 2)][2 * t + 8 * (r / 2) + h] = element(s.a[r], h, c.bf16);
    for (int r = 0; r < (c.k == 16 ? 2 : 1); ++r)
      for (int h = 0; h < 2; ++h) B[2 * t + 8 * r + h][g] = element(s.b[r], h, c.bf16);
    for (int i = 0; i < 4; ++i) {
      float v;
      if (c.f16_accumulator) {
        v = half_bits_to_float(static_cast<uint16_t>(s.c[i / 2] >> (16 * (i % 2))));
      } else {
        std::memcpy(&v, &s.c[i], 4);
      }
      C[g + 8 * (i / 2)][2 * t + i % 2] = v;
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    MmaSlot& s = *static_cast<MmaSlot*>(slots[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      double sum = C[row][col];
      for (int k = 0; k < c.k; ++k) sum += A[row][k] * B[k][col];
      if (c.f16_accumulator) {
        const uint32_t h = double_to_half_bits(sum);
        s.d[i / 2] |= h << (16 * (i % 2));
      } else {
        const float f = static_cast<float>(sum);
        std::memcpy(&s.d[i], &f, 4);
      }
    }
  }
}

void mma(Machine& m, const Instruction& in) {
  // mma.sync.aligned.m16n8k{16,8}.row.col.dtype.atype.btype.ctype d, a, b, c
  if (!in.has("sync") || !in.has("row") || !in.has("col") || in.operands.size() != 4) m.unsupported(in);
  MmaContext context{};
  if (in.has("m16n8k16")) context.k = 16;
  else if (in.has("m16n8k8")) context.k = 8;
  else m.unsupported(in);
  std::vector<std::string> types;
  for (const std::string& p : in.parts)
    if (p == "f32" || p == "f16" || p == "bf16") types.push_back(p);
  if (types.size() != 4 || types[1] != types[2] || types[0] != types[3]) m.unsupported(in);
  context.bf16 = types[1] == "bf16";
  context.f16_accumulator = types[0] == "f16";
  if (context.f16_accumulator && context.bf16) m.unsupported(in);
  const std::vector<Operand> d = m.elements(in.operands[0]), a = m.elements(in.operands[1]),
                             b = m.elements(in.operands[2]), c = m.elements(in.operands[3]);
  const size_t a_regs = context.k == 16 ? 4 : 2, b_regs = context.k == 16 ? 2 : 1, c_regs = context.f16_accumulator ? 2 : 4;
  if (a.size() != a_regs || b.size() != b_regs || c.size() != c_regs || d.size() != c_regs)
    m.fail(kErrorIllegalInstruction, "operand vectors of the wrong size for this shape", in);
  MmaSlot slot;
  for (size_t r = 0; r < a_regs; ++r) slot.a[r] = static_cast<uint32_t>(m.read(a[r], 32));
  for (size_t r = 0; r < b_regs; ++r) slot.b[r] = static_cast<uint32_t>(m.read(b[r], 32));
  for (size_t r = 0; r < c_regs; ++r) slot.c[r] = static_cast<uint32_t>(m.read(c[r], 32));
  meet(0, std::bitset<128>(0xffffffffull), in.opcode.c_str(), &slot, combine_mma, &context, m.where());
  for (size_t r = 0; r < c_regs; ++r) m.write(d[r], slot.d[r], 32);
}

const bool registered = [] {
  register_family("ldmatrix", ldmatrix);
  register_family("mma", mma);
  return true;
}();

}  // namespace
}  // namespace arbiter::emu::ptx
