#include "problem/ops/call_key.hpp"

#include <dlpack/dlpack.h>

#include <cstring>

namespace arbiter {

namespace {

using namespace call_key;

// A size or stride the key holds in 32 bits.
bool fits(int64_t value) { return value >= 0 && value <= int64_t{0xffffffff}; }
bool flag(int32_t value) { return value == 0 || value == 1; }

uint64_t dtype_word(int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return dlpack_dtype(kDLFloat, 32);
    case ARB_DTYPE_F16: return dlpack_dtype(kDLFloat, 16);
    case ARB_DTYPE_BF16: return dlpack_dtype(kDLBfloat, 16);
    default: return 0;
  }
}

int32_t dtype_of(uint64_t tag) {
  const uint64_t dtype = tag & dlpack_dtype(0xff, 0xff);
  if (dtype == dlpack_dtype(kDLFloat, 32)) return ARB_DTYPE_F32;
  if (dtype == dlpack_dtype(kDLFloat, 16)) return ARB_DTYPE_F16;
  if (dtype == dlpack_dtype(kDLBfloat, 16)) return ARB_DTYPE_BF16;
  return ARB_DTYPE_INVALID;
}

uint64_t low(uint64_t word) { return word & 0xffffffff; }
uint64_t high(uint64_t word) { return word >> 32; }

}  // namespace

bool pack_call_key(const arb_problem& p, CallKey& key) noexcept {
  key = CallKey{};
  const uint64_t dtype = dtype_word(p.dtype);
  if (p.struct_size != sizeof(arb_problem) || p.flags != 0 || dtype == 0) return false;
  if (p.alignment < 0 || p.alignment > 0x1ff) return false;
  key.word[0] = pair_word(static_cast<uint32_t>(p.device_type), static_cast<uint32_t>(p.device_id));
  uint64_t tag = static_cast<uint64_t>(p.op) | static_cast<uint64_t>(p.alignment) << kAlignmentShift | dtype;
  if (!fits(p.rows) || !fits(p.cols)) return false;  // zero for gemm
  switch (p.op) {
    case ARB_OP_GEMM:
      if (!fits(p.m) || !fits(p.n) || !fits(p.k) || p.batch != 1 || !fits(p.lda) || !fits(p.ldb) || !fits(p.ldc) ||
          !fits(p.ldd) || !flag(p.trans_a) || !flag(p.trans_b) || p.activation < 0 || p.activation > 7 ||
          !flag(p.has_c) || !flag(p.has_bias) || !flag(p.c_is_d))
        return false;
      tag |= static_cast<uint64_t>(p.activation) << kActivationShift | (p.has_c ? kHasC : 0) | (p.c_is_d ? kCIsD : 0) |
             (p.has_bias ? kHasBias : 0) | pair_word(static_cast<uint64_t>(p.trans_a), static_cast<uint64_t>(p.trans_b))
                                               << kTransposesShift;
      key.word[2] = pair_word(static_cast<uint64_t>(p.m), static_cast<uint64_t>(p.n));
      key.word[3] = pair_word(static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.lda));
      key.word[4] = pair_word(static_cast<uint64_t>(p.ldb), static_cast<uint64_t>(p.ldd));
      key.word[5] = static_cast<uint64_t>(p.ldc);
      break;
    case ARB_OP_RMSNORM:
    case ARB_OP_SOFTMAX:
      if (!fits(p.ld_x) || !fits(p.ld_y) || !fits(p.ld_residual) || !flag(p.has_residual) || p.reserved != 0)
        return false;
      if (p.op == ARB_OP_SOFTMAX && (p.ld_residual != 0 || p.has_residual != 0)) return false;
      tag |= p.has_residual ? kHasResidual : 0;
      key.word[2] = pair_word(static_cast<uint64_t>(p.rows), static_cast<uint64_t>(p.cols));
      key.word[3] = pair_word(static_cast<uint64_t>(p.ld_x), static_cast<uint64_t>(p.ld_y));
      key.word[4] = static_cast<uint64_t>(p.ld_residual);
      break;
    case ARB_OP_SWIGLU:
      if (!fits(p.ld_gate) || !fits(p.ld_up) || !fits(p.ld_y) || p.ld_x != 0 || p.ld_residual != 0 ||
          p.has_residual != 0 || p.reserved != 0)
        return false;
      key.word[2] = pair_word(static_cast<uint64_t>(p.rows), static_cast<uint64_t>(p.cols));
      key.word[3] = pair_word(static_cast<uint64_t>(p.ld_gate), static_cast<uint64_t>(p.ld_up));
      key.word[4] = static_cast<uint64_t>(p.ld_y);
      break;
    default:
      return false;
  }
  key.word[1] = tag;
  return true;
}

arb_problem unpack_call_key(const CallKey& key) noexcept {
  arb_problem p;
  std::memset(&p, 0, sizeof p);
  const uint64_t tag = key.word[1];
  p.struct_size = sizeof p;
  p.op = static_cast<int32_t>(tag & 0xff);
  p.dtype = dtype_of(tag);
  p.device_type = static_cast<int32_t>(low(key.word[0]));
  p.device_id = static_cast<int32_t>(high(key.word[0]));
  p.alignment = static_cast<int32_t>(tag >> kAlignmentShift & 0x1ff);
  const auto at = [](uint64_t value) { return static_cast<int64_t>(value); };
  if (p.op == ARB_OP_GEMM) {
    p.m = at(low(key.word[2]));
    p.n = at(high(key.word[2]));
    p.k = at(low(key.word[3]));
    p.lda = at(high(key.word[3]));
    p.ldb = at(low(key.word[4]));
    p.ldd = at(high(key.word[4]));
    p.ldc = at(key.word[5]);
    p.batch = 1;
    p.trans_a = static_cast<int32_t>(tag >> kTransposesShift & 1);
    p.trans_b = static_cast<int32_t>(tag >> (kTransposesShift + 32) & 1);
    p.activation = static_cast<int32_t>(tag >> kActivationShift & 7);
    p.has_c = (tag & kHasC) != 0;
    p.c_is_d = (tag & kCIsD) != 0;
    p.has_bias = (tag & kHasBias) != 0;
    return p;
  }
  p.rows = at(low(key.word[2]));
  p.cols = at(high(key.word[2]));
  if (p.op == ARB_OP_SWIGLU) {
    p.ld_gate = at(low(key.word[3]));
    p.ld_up = at(high(key.word[3]));
    p.ld_y = at(key.word[4]);
  } else {
    p.ld_x = at(low(key.word[3]));
    p.ld_y = at(high(key.word[3]));
    p.ld_residual = at(key.word[4]);
    p.has_residual = (tag & kHasResidual) != 0;
  }
  return p;
}

}  // namespace arbiter
