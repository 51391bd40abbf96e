// The verification gate as dispatch sees it: verdicts per kernel identity (including the
// content hash of its plugin's file) and problem class, computed on first need and
// remembered (and, through the tuning table, persisted). Only the built-in oracle and the
// kernels of plugins the operator trusts by path and hash ([[plugins.trust]]; never
// AI-generated kernels) run without a verdict; what a plugin declares about itself counts for
// nothing. Verdicts read from a tuning table are re-checked before first use unless
// verify.recheck_table_verdicts = false. A class verdict covers a new problem of the class
// only after the kernel was also right on that problem at full size (check_full_size; once
// per problem and process, when the fp64 reference can afford it: kMaxReferenceCost, less
// on the emulator).
#pragma once

#include "config/config.hpp"
#include "device/device.hpp"
#include "plugin/kernel_registry.hpp"
#include "verify/verifier.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <string>

namespace arbiter {

// The gate's answer for one kernel and problem, with its reason.
struct Admission {
  enum class State {
    admitted,  // a passing verdict, or a kernel the config lets run without one
    refused,   // a failing verdict, or a TF32 kernel without verify.allow_tf32
    pending    // not verified yet, and not allowed to verify now (explain)
  };
  State state = State::refused;
  std::string reason;  // why refused; for pending, what happens on first use; for admitted,
                       // on whose word when not a verdict reached in this process ("" then)
};

class VerificationGate {
 public:
  VerificationGate(const Devices& devices, const KernelRegistry& registry, const VerifyConfig& config);

  // May `kernel` run `problem`? With may_verify an unknown verdict is computed now;
  // without (explain) it is pending.
  Admission admission(const KernelRecord& kernel, const arb_problem& problem, bool may_verify);

  // The verdict, computed now if not known, or known only from a table that is re-checked
  // (or always, with fresh = true); then, for a passing one, the problem at full size if it
  // was not run yet (a failure there is the class's verdict from then on).
  Verdict verdict(const KernelRecord& kernel, const arb_problem& problem, bool fresh = false);
  // A second opinion on a result that looks too good: new random inputs, and the problem at
  // full size as well as the usual shapes. Replaces the remembered verdict.
  Verdict reverify(const KernelRecord& kernel, const arb_problem& problem);
  std::optional<Verdict> known_verdict(const KernelRecord& kernel, const arb_problem& problem) const;
  void remember(const KernelRecord& kernel, const arb_problem& problem, const Verdict& verdict);
  // A passing verdict a tuning-table entry claims; re-checked before first use (see above).
  void remember_from_table(const KernelRecord& kernel, const arb_problem& problem, Verdict verdict);

  // A seed no kernel can predict (for the tuner's timing data, too).
  uint64_t draw_seed() { return next_seed(); }
  // How many of a new problem's first calls dispatch checks against the oracle.
  int first_calls_checked() const { return config_.first_calls_checked; }
  const KernelRecord* oracle(int32_t op) const { return registry_.oracle(op); }

  // A kernel a shadow check found wrong on a live call (shadow_check.hpp): refused from then
  // on, for every problem, whatever its verdicts or its plugin's trust. False if it already was.
  bool quarantine(const KernelRecord& kernel, const std::string& reason);
  // Why the kernel is quarantined, if it is.
  std::optional<std::string> quarantined(const KernelRecord& kernel) const;

  // Does this kernel need a verdict at all?
  bool gated(const KernelRecord& kernel) const;
  // A TF32 kernel asked to run an f32 problem without verify.allow_tf32.
  bool tf32_refused(const KernelRecord& kernel, const arb_problem& problem) const;

 private:
  const Devices& devices_;
  const KernelRegistry& registry_;
  VerifyConfig config_;
  Verdict run(const KernelRecord& kernel, const arb_problem& problem, VerifyOptions options);
  bool needs_recheck(const Verdict& verdict) const;
  // The time limit of a verification in a forked child process (the emulator's kernels), or
  // nullopt: verified in this one.
  std::optional<double> child_time_limit(const KernelRecord& kernel, const Device& device) const;
  // Are this kernel's launches run in a sandbox process (verify.sandbox)?
  bool sandboxed(const KernelRecord& kernel) const;
  // `in_sandbox(shared memory, sandbox)` with the kernel in a sandbox and then, if it passed,
  // `here()` (a kernel that behaves only in the sandbox is caught too); a sandbox that ended
  // is a failed verdict. Without a sandbox program: here only, with a warning.
  template <typename InSandbox, typename Here>
  Verdict sandboxed_then_here(const KernelRecord& kernel, Device& device, InSandbox&& in_sandbox, Here&& here);
  // The verification of `run` or check_full_size, wherever this kernel's is run.
  Verdict verify_where_due(const KernelRecord& kernel, const KernelRecord& reference, const arb_problem& problem,
                           const VerifyOptions& options);
  Verdict full_size_where_due(const KernelRecord& kernel, const KernelRecord& reference, const arb_problem& problem,
                              uint64_t seed, double tolerance);
  Verdict checked_at_full_size(const KernelRecord& kernel, const arb_problem& problem, Verdict class_verdict);
  // Is the problem too costly for the full-size check on this device? (Then it is skipped.)
  bool full_size_unaffordable(const arb_problem& problem) const;
  bool full_size_done(const KernelRecord& kernel, const arb_problem& problem) const;
  uint64_t full_size_key(const KernelRecord& kernel, const arb_problem& problem) const;
  uint64_t next_seed();

  std::atomic<uint64_t> seeds_{0};
  mutable std::mutex mutex_;
  std::map<std::string, Verdict> verdicts_;
  std::map<const KernelRecord*, std::string> quarantined_;  // the reason
  // Hashes of verdict key and problem key: one per distinct problem a class verdict served
  // (as many as the selection cache holds), so 8 bytes each.
  std::unordered_set<uint64_t> full_size_checked_;
};

}  // namespace arbiter
