// The problem syntax, one line used everywhere (CLI, explain, tuning-table keys):
//   gemm bf16 m=128 n=4096 k=4096 tb=1 act=gelu
//   rmsnorm f16 rows=32 cols=4096 residual=1
//   softmax f32 rows=64 cols=32000
// docs/problem-syntax.md lists every field and default.
#pragma once

#include <arbiter/plugin.h>

#include <string_view>

namespace arbiter {

// A problem plus the per-call scalars a runnable example needs.
struct ParsedProblem {
  arb_problem problem;
  float alpha = 1.0f;
  float beta = 0.0f;
  float eps = 1e-6f;
};

// Throws Failure(ARB_ERR_INVALID_ARGUMENT) naming the offending word.
ParsedProblem parse_problem(std::string_view text);

}  // namespace arbiter
