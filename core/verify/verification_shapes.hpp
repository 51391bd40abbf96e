// The shapes the verification gate runs a kernel on, derived from one problem: the problem
// itself (shrunk when large, so the fp64 reference stays cheap), and edge shapes of the same
// class: 1, odd and prime sizes, sizes just over common tile widths (each op says which, in
// core/problem/ops/). Every shape keeps the problem's class, alignment included, so a
// verdict on them holds for the class.
#pragma once

#include <arbiter/plugin.h>

#include <string>
#include <vector>

namespace arbiter {

struct VerificationShape {
  arb_problem problem;
  std::string label;  // "problem", "problem (shrunk)", "edge: 1x1x1", ...
};

std::vector<VerificationShape> verification_shapes(const arb_problem& problem);

}  // namespace arbiter
