#include "verify/verification_gate.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "verify/accuracy.hpp"
#include "plugin/kernel_call.hpp"
#include "plugin/plugin_search.hpp"
#include "problem/problem_cost.hpp"
#include "verify/isolated_verification.hpp"
#include "verify/kernel_sandbox.hpp"
#include "verify/verification_shapes.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>

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

// Trust comes from the host and the operator, never from what a plugin declares: only the
// built-in oracle, and kernels of plugins the config trusts by path and content hash (other
// than AI-generated ones), run without a verdict.
bool VerificationGate::gated(const KernelRecord& kernel) const {
  switch (kernel.plugin->trust) {
    case ARB_PLUGIN_TRUST_ORACLE: return false;
    case ARB_PLUGIN_TRUST_HOST: return false;  // a chain: each step's kernel is gated as its own call
    case ARB_PLUGIN_TRUST_CONFIG: return kernel.provenance == ARB_PROVENANCE_AI_GENERATED;
    default: return true;
  }
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

void VerificationGate::remember_from_table(const KernelRecord& kernel, const arb_problem& problem, Verdict verdict) {
  verdict.from_table = true;
  std::lock_guard<std::mutex> lock(mutex_);
  verdicts_.emplace(verdict_key(kernel, problem), std::move(verdict));  // never over one reached here
}

// Kernels on the emulator (device code built for the host) are verified in a forked child
// with a time limit: a wild pointer or a hang there costs a verdict, not this process.
// Untrusted CPU kernels run in a spawned sandbox instead (sandboxed): fork() from a process
// whose other threads run OpenBLAS deadlocks in OpenBLAS's fork handler, and so do untrusted
// GPU and emulated kernels (sandboxed, first). A GPU's kernels are otherwise verified here: a
// CUDA context does not survive fork.
std::optional<double> VerificationGate::child_time_limit(const KernelRecord&, const Device& device) const {
  if (device.emulated()) return emulated_verify_seconds();
  return std::nullopt;
}

// The kernels shipped in the install's own folders are part of the installation, like
// libarbiter (verified in this process; on the emulator in a forked child); any other gated
// kernel, and any AI-generated one, is launched in a sandbox while it is verified: on the
// CPU, on a GPU (a CUDA context of its own) or on the emulator.
bool VerificationGate::sandboxed(const KernelRecord& kernel) const {
  if (config_.sandbox == VerifySandbox::off || !gated(kernel)) return false;
  return config_.sandbox == VerifySandbox::all || !shipped_with_install(kernel.plugin->origin) ||
         kernel.provenance == ARB_PROVENANCE_AI_GENERATED;
}

template <typename InSandbox, typename Here>
Verdict VerificationGate::sandboxed_then_here(const KernelRecord& kernel, Device& device, InSandbox&& in_sandbox,
                                              Here&& here) {
  const KernelSandbox::TimeLimit limit =
      device.emulated() ? KernelSandbox::TimeLimit{emulated_verify_seconds(), "ARBITER_EMU_VERIFY_SECONDS"}
                        : KernelSandbox::TimeLimit{static_cast<double>(config_.time_limit_s), "verify.time_limit_s"};
  std::string why_not;
  if (std::unique_ptr<KernelSandbox> sandbox = KernelSandbox::start(kernel, device, limit, &why_not)) {
    Verdict verdict = in_sandbox(sandbox->device(), *sandbox);
    if (std::string ended = sandbox->ended(); !ended.empty())
      return crashed_verdict(kernel, "in its sandbox", ended, device.emulated());
    if (!verdict.passed) return verdict;
  } else {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      logger().warn("{}: untrusted kernels are verified without a sandbox (on a CPU or a GPU, a crash or hang there "
                    "ends this process)",
                    why_not);
  }
  return here();
}

Verdict VerificationGate::verify_where_due(const KernelRecord& kernel, const KernelRecord& reference,
                                           const arb_problem& problem, const VerifyOptions& options) {
  Device& device = devices_.of(problem.device_type);
  auto here = [&](const VerifyOptions& o) {
    if (const std::optional<double> limit = child_time_limit(kernel, device))
      return verify_kernel_in_child(device, kernel, reference, problem, o, *limit);
    return verify_kernel(device, kernel, reference, problem, o);
  };
  if (!sandboxed(kernel)) return here(options);
  return sandboxed_then_here(
      kernel, device,
      [&](Device& shared, KernelSandbox& sandbox) {
        VerifyOptions o = options;
        o.sandbox = &sandbox;
        o.after_return_ms = config_.after_return_ms;
        return verify_kernel(shared, kernel, reference, problem, o);
      },
      [&] {
        VerifyOptions o = options;
        o.seed = next_seed();  // here: new inputs again
        return here(o);
      });
}

Verdict VerificationGate::full_size_where_due(const KernelRecord& kernel, const KernelRecord& reference,
                                              const arb_problem& problem, uint64_t seed, double tolerance) {
  Device& device = devices_.of(problem.device_type);
  auto here = [&](uint64_t s) {
    if (const std::optional<double> limit = child_time_limit(kernel, device))
      return check_full_size_in_child(device, kernel, reference, problem, s, tolerance, *limit);
    return check_full_size(device, kernel, reference, problem, s, tolerance);
  };
  if (!sandboxed(kernel)) return here(seed);
  return sandboxed_then_here(
      kernel, device,
      [&](Device& shared, KernelSandbox& sandbox) {
        return check_full_size(shared, kernel, reference, problem, seed, tolerance, &sandbox);
      },
      [&] { return here(next_seed()); });
}

bool VerificationGate::quarantine(const KernelRecord& kernel, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  return quarantined_.emplace(&kernel, reason).second;
}

std::optional<std::string> VerificationGate::quarantined(const KernelRecord& kernel) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = quarantined_.find(&kernel);
  if (it == quarantined_.end()) return std::nullopt;
  return it->second;
}

Verdict VerificationGate::verdict(const KernelRecord& kernel, const arb_problem& problem, bool fresh) {
  if (std::optional<std::string> reason = quarantined(kernel)) {
    Verdict v;
    v.failed_checks.push_back("shadow_check");
    v.detail = "shadow_check: quarantined: " + *reason;
    return v;
  }
  std::optional<Verdict> v;
  if (!fresh)
    if (auto known = known_verdict(kernel, problem); known && !needs_recheck(*known)) v = std::move(known);
  if (!v) v = run(kernel, problem, VerifyOptions{config_.trials, next_seed(), false, 0});
  if (!v->passed || (v->from_table && !config_.recheck_table_verdicts)) return *v;  // the operator takes the table's word
  return checked_at_full_size(kernel, problem, std::move(*v));
}

uint64_t VerificationGate::full_size_key(const KernelRecord& kernel, const arb_problem& problem) const {
  return std::hash<std::string>{}(verdict_key(kernel, problem) + "|" + problem_key(problem));
}

bool VerificationGate::full_size_done(const KernelRecord& kernel, const arb_problem& problem) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return full_size_checked_.count(full_size_key(kernel, problem)) != 0;
}

bool VerificationGate::full_size_unaffordable(const arb_problem& problem) const {
  try {
    const bool emulated = devices_.of(problem.device_type).emulated();
    return reference_cost(problem) > (emulated ? kMaxEmulatedFullSizeCost : kMaxReferenceCost);
  } catch (const Failure&) {
    return true;  // no such device: nothing to check on
  }
}

// A verdict earned on the class's shapes does not cover a problem whose size or strides the
// kernel treats differently: each new problem is run once at full size before the verdict
// is used for it.
Verdict VerificationGate::checked_at_full_size(const KernelRecord& kernel, const arb_problem& problem,
                                               Verdict class_verdict) {
  const uint64_t key = full_size_key(kernel, problem);
  if (full_size_done(kernel, problem)) return class_verdict;
  const KernelRecord* reference = registry_.oracle(problem.op);
  if (full_size_unaffordable(problem) || reference == nullptr || !kernel_supports(kernel, problem, nullptr)) {
    std::lock_guard<std::mutex> lock(mutex_);
    full_size_checked_.insert(key);  // admission() says when it was too large
    return class_verdict;
  }
  Verdict full = full_size_where_due(kernel, *reference, problem, next_seed(), tolerance_for(kernel, problem.dtype));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    full_size_checked_.insert(key);
  }
  if (full.passed) return class_verdict;
  full.detail = "the problem at full size, " + problem_key(problem) + ":\n" + full.detail;
  logger().warn("kernel {} failed at full size on {}: {}", kernel.name, problem_key(problem), full.detail);
  remember(kernel, problem, full);
  return full;
}

Verdict VerificationGate::reverify(const KernelRecord& kernel, const arb_problem& problem) {
  return run(kernel, problem, VerifyOptions{config_.trials, next_seed(), true, 0});
}

// Inputs and scalars no kernel can know in advance: a new seed for every verification, from
// a per-process random start.
uint64_t VerificationGate::next_seed() {
  static const uint64_t start = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  return start + 0x9e3779b97f4a7c15ull * seeds_.fetch_add(1, std::memory_order_relaxed);
}

Verdict VerificationGate::run(const KernelRecord& kernel, const arb_problem& problem, VerifyOptions options) {
  Verdict v;
  if (tf32_refused(kernel, problem)) {  // not remembered: a config change admits it
    v.failed_checks.push_back("tf32_not_allowed");
    v.detail = "tf32_not_allowed: a TF32 kernel for an f32 problem needs verify.allow_tf32 = true";
    return v;
  }
  if (options.tolerance == 0) options.tolerance = tolerance_for(kernel, problem.dtype);
  const KernelRecord* reference = registry_.oracle(problem.op);
  if (reference == nullptr) {
    v.failed_checks.push_back("no_reference");
    v.detail = "no_reference: the built-in oracle has no kernel for this op, so nothing can be verified";
  } else {
    try {
      v = verify_where_due(kernel, *reference, problem, options);
    } catch (const Failure& f) {  // no such device here
      v.failed_checks.push_back("no_device");
      v.detail = std::string("no_device: ") + f.what();
    }
  }
  if (!v.passed)
    logger().warn("kernel {} failed verification for {}: {}", kernel.name, problem_class_key(problem), v.detail);
  remember(kernel, problem, v);
  if (verified_unshrunk(problem)) {  // its verification ran it as it is
    std::lock_guard<std::mutex> lock(mutex_);
    full_size_checked_.insert(full_size_key(kernel, problem));
  }
  return v;
}

// A table's verdict is a claim about a file with this content hash; unless the operator
// takes the table's word, it is checked here before the kernel first runs.
bool VerificationGate::needs_recheck(const Verdict& verdict) const {
  return verdict.from_table && config_.recheck_table_verdicts;
}

bool VerificationGate::tf32_refused(const KernelRecord& kernel, const arb_problem& problem) const {
  return (kernel.abi.flags & ARB_KERNEL_FLAG_TF32) != 0 && problem.dtype == ARB_DTYPE_F32 && !config_.allow_tf32;
}

Admission VerificationGate::admission(const KernelRecord& kernel, const arb_problem& problem, bool may_verify) {
  using State = Admission::State;
  if (std::optional<std::string> reason = quarantined(kernel)) return {State::refused, "quarantined: " + *reason};
  if (tf32_refused(kernel, problem)) return {State::refused, "a TF32 kernel: needs verify.allow_tf32 = true for f32 problems"};
  if (!gated(kernel))
    return {State::admitted, kernel.plugin->trust == ARB_PLUGIN_TRUST_ORACLE ? "the oracle"
                             : kernel.plugin->trust == ARB_PLUGIN_TRUST_HOST
                                 ? "not gated itself: a chain of dispatched calls, each step's kernel gated"
                                 : "not gated: its plugin is trusted by path and SHA-256 ([[plugins.trust]])"};
  std::optional<Verdict> v = known_verdict(kernel, problem);
  if (!may_verify) {
    if (!v || needs_recheck(*v))
      return {State::pending, v ? "the tuning table's verdict (passed) is verified again on first use "
                                  "(verify.recheck_table_verdicts)"
                                : "verification pending: runs on first use"};
    if (v->passed && !v->from_table && !full_size_done(kernel, problem))
      return {State::pending, "verified for the class; the problem at full size is checked on first use"};
  } else {
    v = verdict(kernel, problem);
  }
  if (!v->passed) return {State::refused, "verification " + v->summary()};
  if (v->from_table) return {State::admitted, "verdict from the tuning table (same plugin content), not re-checked"};
  if (full_size_unaffordable(problem))
    return {State::admitted, "verified for the class; the problem at full size is not run: the fp64 reference would "
                             "cost more than the gate's bound"};
  return {State::admitted, ""};
}

}  // namespace arbiter
