// How close a kernel's output is to the reference's: relative norm error
// ||out - ref||_2 / ||ref||_2 over every output operand, against a tolerance per dtype.
// Special values are matched exactly and kept out of the norm (docs/verification.md,
// "Special values"): where the reference has NaN the kernel must have NaN, where it has an
// infinity the same infinity, and where it has a number a number.
#pragma once

#include "device/problem_buffers.hpp"
#include "plugin/plugin_record.hpp"

#include <string>

namespace arbiter {

// The tolerance model (docs/verification.md, "Tolerances"). The base: the largest relative
// norm error accepted for a dtype on a short sum, a few units of its rounding error, since
// both sides round their result to the dtype once.
double tolerance_for(int32_t dtype);
// For f32 computed with TF32 tensor-core math (kernels flagged ARB_KERNEL_FLAG_TF32).
constexpr double kTf32Tolerance = 5e-3;
// The base a kernel is held to on problems of `dtype`: kTf32Tolerance for a TF32 kernel on
// f32, the dtype's otherwise.
double tolerance_for(const KernelRecord& kernel, int32_t dtype);

// An honest sum of n terms accumulated in f32 carries a relative error that grows like
// sqrt(n) u (u = 2^-24; the probabilistic bound of Higham and Mary), times an epilogue's
// own factor (Op::epilogue_error_factor): the tolerance on `problem` is the larger of the
// base and kAccumulationLambda sqrt(n) u, times that factor.
inline constexpr double kAccumulationLambda = 2.0;
double tolerance_at(double base, const arb_problem& problem);
// tolerance_at(tolerance_for(kernel, problem.dtype), problem).
double tolerance_for(const KernelRecord& kernel, const arb_problem& problem);

struct Comparison {
  double error = 0.0;       // the worst relative norm error over the outputs
  std::string worst;        // which output
  bool finite = true;       // no NaN or infinity where the reference has none
  bool specials_match = true;  // NaN and infinities exactly where the reference has them
  std::string first_special_mismatch;  // "y[3,5] is 1 where the reference has nan"
  // The result is accepted: numbers where the reference has numbers, its special values
  // exactly, and an error within the tolerance (a NaN error never is).
  bool accepted(double tolerance) const { return finite && specials_match && error <= tolerance; }
};

// How much of the magnitudes' norm (below) an error is measured against: an honest kernel's
// rounding error is about the unit roundoff times the magnitudes, so a tenth of them leaves
// it far inside the tolerance, while reduced-precision math (TF32 products, error ~5e-4 per
// product) still fails f32's tolerance up to k of about 250,000 on uniform data.
inline constexpr double kMagnitudeWeight = 0.1;

// Compares the outputs of two buffer sets built for the same problem. With `magnitudes` (the
// reference on the absolute values of the inputs and scalars: the scale a sum of products'
// rounding error grows with), each output's error is relative to the larger of its norm and
// kMagnitudeWeight times its norm there, so that a result near zero by cancellation does not
// make an honest kernel look wrong (docs/verification.md, "Tolerances").
// weight: how much of the scale's norm counts (kMagnitudeWeight for the op on absolute inputs;
// 1 for a residual's terms, which bound the result's rounding as they are).
Comparison compare_outputs(const ProblemBuffers& result, const ProblemBuffers& reference,
                           const ProblemBuffers* magnitudes = nullptr, double weight = kMagnitudeWeight);

}  // namespace arbiter
