// Shadow checks (docs/verification.md, "Shadow checks"): the gate watches a kernel for a few
// dozen launches; a kernel that is right then and wrong later (after N launches, after some
// time, on some data) is seen only by checking its life. With verify.shadow_one_in = N, about
// one live call in N (per thread, at random intervals no kernel can predict) is run with a
// copy of its inputs taken before the launch and its outputs read back after, and compared
// with the fp64 oracle on those same inputs. The caller (Context) quarantines a kernel that
// fails one. Off by default: a checked call costs two reference runs and, on a GPU, a
// synchronisation of the caller's stream.
#pragma once

#include "device/device.hpp"
#include "plugin/kernel_registry.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace arbiter {

// Is this call of the calling thread one to check? A countdown per thread, refilled with a
// random interval of mean `one_in` (one_in = 1: every call).
bool shadow_check_due(int64_t one_in) noexcept;

struct ShadowOutcome {
  enum class State {
    matched,     // the outputs matched the oracle's
    mismatched,  // they did not, or an input changed: detail says how
    skipped      // not checked: detail says why (the call ran as usual)
  };
  State state = State::skipped;
  std::string detail;
};

class ShadowCheck {
 public:
  ShadowCheck(const Devices& devices, const KernelRegistry& registry) : devices_(devices), registry_(registry) {}

  // Runs `launch` (the kernel on the caller's operands, on `stream`) with the check around it.
  // On a mismatch the caller's operands that are both read and written (gemm's C = D,
  // rmsnorm's x with a residual) hold again what they held before the call, so that another
  // kernel can run it. Errors of the launch itself propagate as they would without the check.
  ShadowOutcome run(const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands, void* stream,
                    const std::function<void()>& launch);

  struct Counts {
    uint64_t checked = 0, mismatched = 0, skipped = 0;
  };
  Counts counts() const {
    return {checked_.load(std::memory_order_relaxed), mismatched_.load(std::memory_order_relaxed),
            skipped_.load(std::memory_order_relaxed)};
  }

 private:
  ShadowOutcome skip(std::string why, const std::function<void()>& launch);

  const Devices& devices_;
  const KernelRegistry& registry_;
  std::atomic<uint64_t> checked_{0}, mismatched_{0}, skipped_{0};
};

}  // namespace arbiter
