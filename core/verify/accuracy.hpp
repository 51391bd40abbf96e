// How close a kernel's output is to the reference's: relative norm error
// ||out - ref||_2 / ||ref||_2 over every output operand, against a tolerance per dtype.
#pragma once

#include "device/problem_buffers.hpp"

#include <string>

namespace arbiter {

// The largest relative norm error accepted for a dtype: a few units of its rounding
// error, since both sides round their result to the dtype once.
double tolerance_for(int32_t dtype);
// For f32 computed with TF32 tensor-core math (kernels flagged ARB_KERNEL_FLAG_TF32).
constexpr double kTf32Tolerance = 5e-3;

struct Comparison {
  double error = 0.0;       // the worst relative norm error over the outputs
  std::string worst;        // which output
  bool finite = true;       // no NaN or infinity where the reference has none
};

// Compares the outputs of two buffer sets built for the same problem.
Comparison compare_outputs(const ProblemBuffers& result, const ProblemBuffers& reference);

}  // namespace arbiter
