#include "api/verify_problem.hpp"

#include "arbiter_base/abi_names.hpp"
#include "common/json_writer.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"

namespace arbiter {

std::string KernelVerification::summary() const {
  switch (result) {
    case Result::refuses: return refusal;
    case Result::oracle: return "the oracle (not verified against itself)";
    default: return verdict.summary();
  }
}

const char* result_name(KernelVerification::Result result) {
  switch (result) {
    case KernelVerification::Result::passed: return "passed";
    case KernelVerification::Result::failed: return "failed";
    case KernelVerification::Result::oracle: return "oracle";
    default: return "refuses";
  }
}

ProblemVerification verify_problem(Context& context, const arb_problem& p, const VerifyRequest& request,
                                   const std::function<void(const KernelVerification&)>& on_kernel) {
  ProblemVerification out;
  out.key = problem_key(p);
  for (const KernelRecord* kernel : context.registry().candidates(p.op)) {
    if (!request.only_plugin.empty() && kernel->plugin->name != request.only_plugin) continue;
    if (!request.only_kernel.empty() && kernel->name != request.only_kernel) continue;
    if (kernel->abi.device_type != p.device_type) continue;
    KernelVerification k;
    k.kernel = kernel;
    if (!kernel_supports(*kernel, p, &k.refusal)) {
      k.result = KernelVerification::Result::refuses;
    } else if (kernel->plugin->trust == ARB_PLUGIN_TRUST_ORACLE) {  // declared provenance is no such pass
      k.result = KernelVerification::Result::oracle;
    } else {
      k.verdict = request.full ? context.gate().reverify(*kernel, p) : context.gate().verdict(*kernel, p, true);
      k.result = k.verdict.passed ? KernelVerification::Result::passed : KernelVerification::Result::failed;
      (k.verdict.passed ? out.passed : out.failed) += 1;
    }
    if (on_kernel) on_kernel(k);
    out.kernels.push_back(std::move(k));
  }
  return out;
}

std::string verification_json(const ProblemVerification& verification) {
  JsonWriter json;
  json.begin_object().key("problem").value(verification.key).key("verdicts").begin_array();
  for (const KernelVerification& k : verification.kernels) {
    const bool judged = k.result == KernelVerification::Result::passed || k.result == KernelVerification::Result::failed;
    json.begin_object()
        .key("kernel").value(k.kernel->name)
        .key("plugin").value(k.kernel->plugin->name)
        .key("provenance").value(provenance_name(k.kernel->provenance))
        .key("result").value(result_name(k.result))
        .key("summary").value(k.summary())
        .key("detail").value(judged ? k.verdict.detail : std::string())
        .key("failed_checks").begin_array();
    for (const std::string& check : k.verdict.failed_checks) json.value(check);
    json.end_array().key("max_error");
    if (judged) json.value(k.verdict.max_error); else json.null();
    json.end_object();
  }
  json.end_array().key("passed").value(verification.passed).key("failed").value(verification.failed).end_object();
  return json.text();
}

}  // namespace arbiter
