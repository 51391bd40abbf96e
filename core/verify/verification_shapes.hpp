// The shapes the verification gate runs a kernel on, derived from one problem: the problem
// itself (shrunk when large, so the fp64 reference stays cheap, with the caller's row
// padding kept), edge shapes of the same class (1, odd and prime sizes, sizes just over
// common tile widths: each op says which, in core/problem/ops/), and, when the problem was
// shrunk, shapes that keep one of its sizes in full (a kernel that changes strategy above
// the shrink cap meets its other strategy). The edge shapes' row strides are drawn per
// operand, padded or not, from `seed`. Every shape keeps the problem's class, alignment
// included, so a verdict on them holds for the class; the problem at full size is checked
// on its own (verifier.hpp, check_full_size).
#pragma once

#include <arbiter/plugin.h>

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter {

struct VerificationShape {
  arb_problem problem;
  std::string label;  // "problem", "problem shrunk to ...", "edge: 1x1x1", ...
};

// The most a shape that keeps one full size may cost the fp64 reference (multiply-adds).
constexpr double kMaxFullDimensionCost = double(1 << 24);

std::vector<VerificationShape> verification_shapes(const arb_problem& problem, uint64_t seed);
// Is the problem verified as it is (not shrunk), so that its verdict saw it at full size?
bool verified_unshrunk(const arb_problem& problem);

}  // namespace arbiter
