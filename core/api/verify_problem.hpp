// `arbiter verify` and arb_verify: the verification gate's verdict for every kernel of a
// problem's op on its device (or those a filter names). One implementation: the CLI prints
// text from the result, the C ABI hands out its JSON (verification_json).
#pragma once

#include "context.hpp"

#include <functional>
#include <string>
#include <vector>

namespace arbiter {

struct VerifyRequest {
  std::string only_plugin;  // "": every plugin
  std::string only_kernel;  // "<plugin>.<kernel>", or "": every kernel
  // Also at the problem's own size, with new seeds (the verification shapes stop at 128 per
  // GEMM dimension), as the tuner re-verifies a suspicious winner.
  bool full = false;
};

struct KernelVerification {
  enum class Result { passed, failed, refuses, oracle };
  const KernelRecord* kernel = nullptr;
  Result result = Result::refuses;
  std::string refusal;  // why, for refuses (the kernel's supports())
  Verdict verdict;      // for passed and failed
  // One line: the verdict's summary, the refusal, or what the oracle is.
  std::string summary() const;
};

struct ProblemVerification {
  std::string key;  // problem_key
  std::vector<KernelVerification> kernels;
  int passed = 0, failed = 0;
};

const char* result_name(KernelVerification::Result result);

// The kernels of the problem's op and device type that pass the filters, in heuristic order:
// refused by supports(), the oracle (not verified against itself), or the gate's verdict
// (computed now). `on_kernel`, if set, hears each as it is known. Throws Failure.
ProblemVerification verify_problem(Context& context, const arb_problem& problem, const VerifyRequest& request,
                                   const std::function<void(const KernelVerification&)>& on_kernel = {});

// {"problem": key, "verdicts": [{"kernel", "plugin", "provenance", "result", "summary",
//  "detail", "failed_checks", "max_error"}], "passed": N, "failed": N} (docs/c-api.md).
std::string verification_json(const ProblemVerification& verification);

}  // namespace arbiter
