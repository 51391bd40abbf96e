#include "verify/verification_gate.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "verify/accuracy.hpp"
#include "verify/isolated_verification.hpp"

#include <algorithm>
#include <cstdlib>

namespace arbiter {
namespace {

// The most one emulated verification may take (ARBITER_EMU_VERIFY_SECONDS, default an hour):
// a deadlock stops a launch at once, a launch stops at the emulator's own limit (300 s), but a
// thread spinning without a barrier or a collective never yields to the emulator.
double emulated_verify_seconds() {
  if (const char* s = std::getenv("ARBITER_EMU_VERIFY_SECONDS")) return std::max(1.0, std::atof(s));
  return 3600.0;
}

}  // namespace

VerificationGate::VerificationGate(const Devices& devices, const KernelRegistry& registry, const VerifyConfig& config)
    : devices_(devices), registry_(registry), config_(config) {}

bool VerificationGate::gated(const KernelRecord& kernel) const {
  if (kernel.provenance == ARB_PROVENANCE_REFERENCE) return false;  // the oracle itself
  if (kernel.provenance == ARB_PROVENANCE_AI_GENERATED) return true;
  return !config_.allow_unverified;
}

std::optional<Verdict> VerificationGate::known_verdict(const KernelRecord& kernel, const arb_problem& problem) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(verdict_key(kernel, problem));
  if (it == verdicts_.end()) return std::nullopt;
  return it->second;
}

void VerificationGate::remember(const KernelRecord& kernel, const arb_problem& problem, const Verdict& verdict) {
  std::lock_guard<std::mutex> lock(mutex_);
  verdicts_[verdict_key(kernel, problem)] = verdict;
}

Verdict VerificationGate::verdict(const KernelRecord& kernel, const arb_problem& problem, bool fresh) {
  if (!fresh)
    if (auto known = known_verdict(kernel, problem)) return *known;
  return run(kernel, problem, VerifyOptions{config_.trials, 0, false, 0});
}

Verdict VerificationGate::reverify(const KernelRecord& kernel, const arb_problem& problem) {
  return run(kernel, problem, VerifyOptions{config_.trials, 0x5eed5eedu, true, 0});
}

Verdict VerificationGate::run(const KernelRecord& kernel, const arb_problem& problem, VerifyOptions options) {
  Verdict v;
  if (tf32_refused(kernel, problem)) {  // not remembered: a config change admits it
    v.failed_checks.push_back("tf32_not_allowed");
    v.detail = "tf32_not_allowed: a TF32 kernel for an f32 problem needs verify.allow_tf32 = true";
    return v;
  }
  if ((kernel.abi.flags & ARB_KERNEL_FLAG_TF32) != 0 && problem.dtype == ARB_DTYPE_F32) options.tolerance = kTf32Tolerance;
  const KernelRecord* reference = registry_.find("reference." + std::string(op_name(problem.op)));
  if (reference == nullptr) {
    v.failed_checks.push_back("no_reference");
    v.detail = "no_reference: the reference plugin is not loaded, so nothing can be verified";
  } else {
    try {
      Device& device = devices_.of(problem.device_type);
      // On the emulator a kernel is host code: a wild pointer would hit this process.
      v = device.emulated() ? verify_kernel_in_child(device, kernel, *reference, problem, options, emulated_verify_seconds())
                            : verify_kernel(device, kernel, *reference, problem, options);
    } catch (const Failure& f) {  // no such device here
      v.failed_checks.push_back("no_device");
      v.detail = std::string("no_device: ") + f.what();
    }
  }
  if (!v.passed)
    logger().warn("kernel {} failed verification for {}: {}", kernel.name, problem_class_key(problem), v.detail);
  remember(kernel, problem, v);
  return v;
}

bool VerificationGate::tf32_refused(const KernelRecord& kernel, const arb_problem& problem) const {
  return (kernel.abi.flags & ARB_KERNEL_FLAG_TF32) != 0 && problem.dtype == ARB_DTYPE_F32 && !config_.allow_tf32;
}

Admission VerificationGate::admission(const KernelRecord& kernel, const arb_problem& problem, bool may_verify) {
  using State = Admission::State;
  if (tf32_refused(kernel, problem)) return {State::refused, "a TF32 kernel: needs verify.allow_tf32 = true for f32 problems"};
  if (!gated(kernel)) return {State::admitted, ""};
  std::optional<Verdict> v = known_verdict(kernel, problem);
  if (!v) {
    if (!may_verify) return {State::pending, "verification pending: runs on first use"};
    v = verdict(kernel, problem);
  }
  if (!v->passed) return {State::refused, "verification " + v->summary()};
  return {State::admitted, ""};
}

}  // namespace arbiter
