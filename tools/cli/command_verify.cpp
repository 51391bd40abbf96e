// arbiter verify [--plugin=P] [--kernel=K] [--full] <problem | --suite=FILE>: the verification
// gate's verdict for every kernel that supports each problem, with the failed checks named.
#include "cli.hpp"
#include "arbiter_base/counted.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>

namespace arbiter::cli {

int command_verify(const Arguments& args) {
  const std::vector<SuiteProblem> problems = problems_from(args, "verify");
  const auto context = make_context(args);
  const std::string only_plugin = args.option("plugin"), only_kernel = args.option("kernel");
  const bool full = args.flag("full");
  int failed = 0, passed = 0;
  for (const SuiteProblem& sp : problems) {
    const arb_problem& p = sp.parsed.problem;
    fmt::print("{}\n", problem_key(p));
    int shown = 0;
    for (const KernelRecord* kernel : context->registry().candidates(p.op)) {
      if (!only_plugin.empty() && kernel->plugin->name != only_plugin) continue;
      if (!only_kernel.empty() && kernel->name != only_kernel) continue;
      if (kernel->abi.device_type != p.device_type) continue;
      ++shown;
      std::string why;
      if (!kernel_supports(*kernel, p, &why)) {
        fmt::print("  {:<28} {:<12} refuses: {}\n", kernel->name, provenance_name(kernel->provenance), why);
        continue;
      }
      if (kernel->plugin->trust == ARB_PLUGIN_TRUST_ORACLE) {  // declared provenance is no such pass
        fmt::print("  {:<28} {:<12} the oracle (not verified against itself)\n", kernel->name, "reference");
        continue;
      }
      // --full: the problem at its own size too (the verification shapes stop at 128 per
      // GEMM dimension), with new seeds, as the tuner re-verifies a suspicious winner.
      const Verdict v = full ? context->gate().reverify(*kernel, p) : context->gate().verdict(*kernel, p, true);
      (v.passed ? passed : failed) += 1;
      fmt::print("  {:<28} {:<12} {}\n", kernel->name, provenance_name(kernel->provenance), v.summary());
      if (!v.passed)
        for (size_t start = 0; start < v.detail.size();) {
          const size_t end = v.detail.find('\n', start);
          fmt::print("      {}\n", v.detail.substr(start, end - start));
          start = end == std::string::npos ? v.detail.size() : end + 1;
        }
    }
    if (shown == 0) fmt::print("  (no kernel of this op matches the filters)\n");
  }
  fmt::print("\n{}: {} passed, {} failed. Checks: docs/verification.md\n", counted(passed + failed, "verdict"), passed, failed);
  return failed > 0 ? 4 : 0;
}

}  // namespace arbiter::cli
