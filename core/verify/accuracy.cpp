#include "verify/accuracy.hpp"

#include "problem/op_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace arbiter {

double tolerance_for(int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return 1e-5;
    case ARB_DTYPE_F16: return 1e-3;
    case ARB_DTYPE_BF16: return 8e-3;
    default: return 0.0;
  }
}

double tolerance_for(const KernelRecord& kernel, int32_t dtype) {
  if ((kernel.abi.flags & ARB_KERNEL_FLAG_TF32) != 0 && dtype == ARB_DTYPE_F32) return kTf32Tolerance;
  return tolerance_for(dtype);
}

double tolerance_at(double base, const arb_problem& problem) {
  constexpr double f32_unit_roundoff = 0x1p-24;
  const Op* op = find_op(problem.op);
  if (op == nullptr) return base;
  const double terms = static_cast<double>(std::max<int64_t>(1, op->accumulated_terms(problem)));
  const double accumulation = kAccumulationLambda * std::sqrt(terms) * f32_unit_roundoff;
  return std::max({base, accumulation, op->error_floor(problem)}) * op->epilogue_error_factor(problem);
}

double tolerance_for(const KernelRecord& kernel, const arb_problem& problem) {
  return tolerance_at(tolerance_for(kernel, problem.dtype), problem);
}

Comparison compare_outputs(const ProblemBuffers& result, const ProblemBuffers& reference,
                           const ProblemBuffers* magnitudes, double weight) {
  Comparison comparison;
  comparison.error = 0.0;
  for (const auto& out : result.all()) {
    if (!out.is_output) continue;
    const ProblemBuffers::Operand* ref = reference.find(out.name);
    double diff_sq = 0.0, ref_sq = 0.0;
    for (int64_t r = 0; r < out.rows; ++r) {
      for (int64_t c = 0; c < out.cols; ++c) {
        const double v = result.element(out, r, c);
        const double w = reference.element(*ref, r, c);
        if (!std::isfinite(w)) {  // matched exactly, outside the norm
          const bool same = std::isnan(w) ? std::isnan(v) : v == w;
          if (!same && comparison.specials_match) {
            comparison.specials_match = false;
            comparison.first_special_mismatch = fmt::format("{}[{},{}] is {} where the reference has {}", out.name, r, c, v, w);
          }
          continue;
        }
        if (!std::isfinite(v)) comparison.finite = false;
        diff_sq += (v - w) * (v - w);
        ref_sq += w * w;
      }
    }
    if (magnitudes != nullptr) {
      const ProblemBuffers::Operand* scale = magnitudes->find(out.name);
      double scale_sq = 0.0;
      for (int64_t r = 0; r < out.rows; ++r)
        for (int64_t c = 0; c < out.cols; ++c)
          if (const double s = magnitudes->element(*scale, r, c); std::isfinite(s)) scale_sq += s * s;
      ref_sq = std::max(ref_sq, weight * weight * scale_sq);
    }
    const double error = ref_sq > 0.0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
    const bool worse = std::isnan(error) ? !std::isnan(comparison.error) : error > comparison.error;
    if (worse) {  // a NaN error is the worst of all
      comparison.error = error;
      comparison.worst = out.name;
    }
  }
  return comparison;
}

}  // namespace arbiter
