// arbiter explain <problem>: which kernel, by which rule, and what was refused.
#include "cli.hpp"

#include "common/failure.hpp"
#include "problem/problem_text.hpp"

#include <fmt/format.h>

namespace arbiter::cli {

int command_explain(const Arguments& args) {
  if (args.positional.empty()) fail(ARB_ERR_INVALID_ARGUMENT, "explain needs a problem, e.g. 'gemm f32 m=8 n=8 k=8'");
  const ParsedProblem parsed = parse_problem(joined(args.positional));
  const auto context = make_context(args);
  fmt::print("{}", context->explain(parsed.problem));
  return 0;
}

}  // namespace arbiter::cli
