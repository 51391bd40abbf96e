// arbiter verify [--plugin=P] [--kernel=K] [--full] <problem | --suite=FILE>: the verification
// gate's verdict for every kernel that supports each problem, with the failed checks named.
// The verdicts come from verify_problem (core/api/verify_problem.hpp), as arb_verify's do.
#include "cli.hpp"
#include "arbiter_base/counted.hpp"

#include "api/verify_problem.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>

namespace arbiter::cli {

int command_verify(const Arguments& args) {
  const std::vector<SuiteProblem> problems = problems_from(args, "verify");
  const auto context = make_context(args);
  VerifyRequest request;
  request.only_plugin = args.option("plugin");
  request.only_kernel = args.option("kernel");
  request.full = args.flag("full");
  int failed = 0, passed = 0;
  for (const SuiteProblem& sp : problems) {
    const arb_problem& p = sp.parsed.problem;
    fmt::print("{}\n", problem_key(p));
    const ProblemVerification verification = verify_problem(*context, p, request, [](const KernelVerification& k) {
      using Result = KernelVerification::Result;
      if (k.result == Result::refuses) {
        fmt::print("  {:<28} {:<12} refuses: {}\n", k.kernel->name, provenance_name(k.kernel->provenance), k.refusal);
      } else if (k.result == Result::oracle) {
        fmt::print("  {:<28} {:<12} {}\n", k.kernel->name, "reference", k.summary());
      } else {
        fmt::print("  {:<28} {:<12} {}\n", k.kernel->name, provenance_name(k.kernel->provenance), k.summary());
        if (k.result == Result::failed)
          for (size_t start = 0; start < k.verdict.detail.size();) {
            const size_t end = k.verdict.detail.find('\n', start);
            fmt::print("      {}\n", k.verdict.detail.substr(start, end - start));
            start = end == std::string::npos ? k.verdict.detail.size() : end + 1;
          }
      }
    });
    passed += verification.passed;
    failed += verification.failed;
    if (verification.kernels.empty()) fmt::print("  (no kernel of this op matches the filters)\n");
  }
  fmt::print("\n{}: {} passed, {} failed. Checks: docs/verification.md\n", counted(passed + failed, "verdict"), passed, failed);
  return failed > 0 ? 4 : 0;
}

}  // namespace arbiter::cli
