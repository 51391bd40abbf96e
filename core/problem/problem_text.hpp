// The problem syntax, one line used everywhere (CLI, explain, tuning-table keys):
//   gemm bf16 m=128 n=4096 k=4096 tb=1 act=gelu
//   rmsnorm f16 rows=32 cols=4096 residual=1
//   softmax f32 rows=64 cols=32000
// docs/problem-syntax.md lists every field and default. The fields after the dtype belong
// to the op (core/problem/ops/), apart from align= and device=.
#pragma once

#include <arbiter/plugin.h>

#include <map>
#include <optional>
#include <string>
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

// The key=value fields of one line, taken by the op that reads them; a field nobody takes
// is an error. Every take_* throws Failure(ARB_ERR_INVALID_ARGUMENT) on a malformed value.
class ProblemFields {
 public:
  ProblemFields(std::string_view op, std::map<std::string, std::string_view, std::less<>> fields)
      : op_(op), fields_(std::move(fields)) {}

  std::optional<std::string_view> take(std::string_view key);
  int64_t take_int(std::string_view key, int64_t fallback);
  int64_t require_int(std::string_view key);
  // `count` comma-separated integers into values ("ldq=0,4096,128"); false when absent.
  bool take_ints(std::string_view key, int64_t* values, size_t count);
  bool take_flag(std::string_view key);  // absent: false
  std::optional<float> take_float(std::string_view key);
  std::optional<double> take_double(std::string_view key);
  [[noreturn]] void bad(const std::string& what) const;
  // The first field nobody took, if any.
  std::optional<std::string> leftover() const;

 private:
  std::string_view op_;
  std::map<std::string, std::string_view, std::less<>> fields_;
};

}  // namespace arbiter
