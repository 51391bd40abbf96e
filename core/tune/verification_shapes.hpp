// The shapes the verification gate runs a kernel on, derived from one problem: the problem
// itself (shrunk when large, so the fp64 reference stays cheap), and edge shapes of the same
// class: 1, odd and prime sizes, sizes just over common tile widths. Every shape keeps the
// problem's class, alignment included, so a verdict on them holds for the class.
#pragma once

#include <arbiter/plugin.h>

#include <string>
#include <vector>

namespace arbiter {

struct VerificationShape {
  arb_problem problem;
  std::string label;  // "problem", "problem (shrunk)", "edge: 1x1x1", ...
};

// Sizes above this are shrunk for verification (gemm dims; rows; cols use kMaxVerifyCols).
constexpr int64_t kMaxVerifyDim = 128;
constexpr int64_t kMaxVerifyCols = 4096;

std::vector<VerificationShape> verification_shapes(const arb_problem& problem);

// A copy of `problem` with new sizes, row strides chosen so its alignment class is kept.
arb_problem reshaped(const arb_problem& problem, int64_t m_or_rows, int64_t n_or_cols, int64_t k);

}  // namespace arbiter
