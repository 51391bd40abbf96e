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
#include "device/problem_buffers.hpp"
#include "plugin/float_control.hpp"
#include "plugin/kernel_registry.hpp"
#include "plugin/process_state.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
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

// What a checked call needs from before its launch: a copy of every input.
struct ShadowCapture {
  const KernelRecord* oracle = nullptr;
  ProblemBuffers before;
  FloatControl control;  // the calling thread's, just before the launch
  ProcessState state;    // the process's, just before the launch (descriptors not compared)
};

class ShadowCheck {
 public:
  ShadowCheck(const Devices& devices, const KernelRegistry& registry) : devices_(devices), registry_(registry) {}

  // A checked call is the same call as any other: the caller takes the capture before its one
  // launch site and judges after it, so a kernel that looks at its call stack or its caller
  // sees nothing different (the checking code is never on the stack during the launch).
  //
  // Copies the inputs of the call about to be launched; null (counted as skipped) when the
  // call cannot be checked: no oracle, the kernel is the oracle, the reference would cost
  // more than its bound, or the stream is being captured into a graph.
  std::unique_ptr<ShadowCapture> capture(const KernelRecord& kernel, const arb_problem& problem,
                                       const arb_operands& operands, void* stream, std::string* why_not = nullptr);
  // After the launch: reads the outputs and inputs back and compares them with the oracle's
  // answer on the captured inputs. On a mismatch the caller's operands that are both read
  // and written (gemm's C = D, rmsnorm's x with a residual) hold again what they held before
  // the call, so that another kernel can run it.
  ShadowOutcome judge(const ShadowCapture& capture, const KernelRecord& kernel, const arb_problem& problem,
                      const arb_operands& operands, void* stream);

  struct Counts {
    uint64_t checked = 0, mismatched = 0, skipped = 0;
  };
  Counts counts() const {
    return {checked_.load(std::memory_order_relaxed), mismatched_.load(std::memory_order_relaxed),
            skipped_.load(std::memory_order_relaxed)};
  }

 private:
  const Devices& devices_;
  const KernelRegistry& registry_;
  std::atomic<uint64_t> checked_{0}, mismatched_{0}, skipped_{0};
};

}  // namespace arbiter
