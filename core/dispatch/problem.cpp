#include "dispatch/problem.hpp"

#include "common/failure.hpp"
#include "common/names.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace arbiter {

arb_problem empty_problem(arb_op op) {
  arb_problem problem;
  std::memset(&problem, 0, sizeof problem);
  problem.struct_size = sizeof problem;
  problem.op = op;
  problem.device_type = kDLCPU;
  if (op == ARB_OP_GEMM) problem.batch = 1;
  return problem;
}

uint64_t problem_hash(const arb_problem& problem) noexcept {
  static_assert(sizeof(arb_problem) % sizeof(uint64_t) == 0);
  uint64_t words[sizeof(arb_problem) / sizeof(uint64_t)];
  std::memcpy(words, &problem, sizeof words);
  // This runs on every call: one independent multiply per word (a different odd constant
  // for each position, so no chain of dependent multiplies), then a final avalanche.
  constexpr size_t kWords = sizeof(arb_problem) / sizeof(uint64_t);
  static constexpr auto kMultipliers = [] {
    std::array<uint64_t, kWords> m{};
    uint64_t k = 0x9e3779b97f4a7c15ull;
    for (uint64_t& v : m) v = (k += 0xd6e8feb86659fd93ull) | 1u;
    return m;
  }();
  uint64_t h = 0;
#pragma GCC unroll 32
  for (size_t i = 0; i < kWords; ++i) h += words[i] * kMultipliers[i];
  h ^= h >> 32;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

int32_t alignment_class(std::initializer_list<uint64_t> values) noexcept {
  uint64_t combined = 256;
  for (uint64_t v : values) combined |= v;
  return static_cast<int32_t>(combined & (~combined + 1));  // lowest set bit
}

std::string problem_key(const arb_problem& p) {
  std::string key;
  switch (p.op) {
    case ARB_OP_GEMM:
      key = fmt::format("gemm {} m={} n={} k={} ta={} tb={} act={} bias={} beta={}", dtype_name(p.dtype), p.m, p.n,
                        p.k, p.trans_a, p.trans_b, activation_name(p.activation), p.has_bias, p.has_c);
      if (p.c_is_d) key += " inplace=1";
      key += fmt::format(" lda={} ldb={}", p.lda, p.ldb);
      if (p.has_c && !p.c_is_d) key += fmt::format(" ldc={}", p.ldc);
      key += fmt::format(" ldd={}", p.ldd);
      break;
    case ARB_OP_RMSNORM:
      key = fmt::format("rmsnorm {} rows={} cols={} residual={} ldx={} ldy={}", dtype_name(p.dtype), p.rows, p.cols,
                        p.has_residual, p.ld_x, p.ld_y);
      if (p.has_residual) key += fmt::format(" ldr={}", p.ld_residual);
      break;
    case ARB_OP_SOFTMAX:
      key = fmt::format("softmax {} rows={} cols={} ldx={} ldy={}", dtype_name(p.dtype), p.rows, p.cols, p.ld_x,
                        p.ld_y);
      break;
    default:
      return "invalid";
  }
  key += fmt::format(" align={} device={}", p.alignment, device_name(p.device_type));
  if (p.device_id != 0) key += fmt::format(":{}", p.device_id);
  return key;
}

std::string problem_class_key(const arb_problem& p) {
  std::string key;
  switch (p.op) {
    case ARB_OP_GEMM:
      key = fmt::format("gemm {} ta={} tb={} act={} bias={} beta={} inplace={}", dtype_name(p.dtype), p.trans_a,
                        p.trans_b, activation_name(p.activation), p.has_bias, p.has_c, p.c_is_d);
      break;
    case ARB_OP_RMSNORM: key = fmt::format("rmsnorm {} residual={}", dtype_name(p.dtype), p.has_residual); break;
    case ARB_OP_SOFTMAX: key = fmt::format("softmax {}", dtype_name(p.dtype)); break;
    default: return "invalid";
  }
  key += fmt::format(" align={} device={}", p.alignment, device_name(p.device_type));
  if (p.device_id != 0) key += fmt::format(":{}", p.device_id);
  return key;
}

namespace {
[[noreturn]] void invalid(const std::string& what) { fail(ARB_ERR_INVALID_ARGUMENT, what); }

void check_ld(const char* name, int64_t ld, int64_t min_ld) {
  if (ld < min_ld) invalid(fmt::format("{} = {} is below the row length {}", name, ld, min_ld));
}
}  // namespace

void validate_problem(const arb_problem& p) {
  if (p.dtype < ARB_DTYPE_F32 || p.dtype > ARB_DTYPE_BF16) invalid(fmt::format("unsupported dtype code {}", p.dtype));
  if (p.device_type != kDLCPU && p.device_type != kDLCUDA)
    invalid(fmt::format("unsupported device type {} (cpu or cuda)", p.device_type));
  switch (p.op) {
    case ARB_OP_GEMM:
      if (p.m < 1 || p.n < 1 || p.k < 1) invalid(fmt::format("gemm sizes must be >= 1 (m={} n={} k={})", p.m, p.n, p.k));
      if (p.batch != 1) invalid("batched gemm is not supported yet (batch must be 1)");
      if (p.activation < ARB_ACT_NONE || p.activation > ARB_ACT_SILU)
        invalid(fmt::format("unknown activation code {}", p.activation));
      if ((p.trans_a != 0 && p.trans_a != 1) || (p.trans_b != 0 && p.trans_b != 1))
        invalid("trans_a and trans_b must be 0 or 1");
      check_ld("lda", p.lda, p.trans_a ? p.m : p.k);
      check_ld("ldb", p.ldb, p.trans_b ? p.k : p.n);
      if (p.has_c) check_ld("ldc", p.ldc, p.n);
      check_ld("ldd", p.ldd, p.n);
      break;
    case ARB_OP_RMSNORM:
    case ARB_OP_SOFTMAX:
      if (p.rows < 1 || p.cols < 1)
        invalid(fmt::format("{} sizes must be >= 1 (rows={} cols={})", op_name(p.op), p.rows, p.cols));
      check_ld("ldx", p.ld_x, p.cols);
      check_ld("ldy", p.ld_y, p.cols);
      if (p.has_residual) check_ld("ldr", p.ld_residual, p.cols);
      break;
    default:
      invalid(fmt::format("unknown op code {}", p.op));
  }
}

}  // namespace arbiter
