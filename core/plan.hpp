// A plan: one problem bound once (arguments checked, kernel chosen, workspace sized) and run
// many times with new data addresses (arb_plan_create / arb_plan_run). A run checks only what
// the addresses can change: present, aligned for the dtype, not wrapping, outputs still
// disjoint from inputs; addresses less aligned than the plan's go through dispatch for their
// own alignment class. The kernel is the dispatcher's Selection, taken again when the
// dispatcher's generation moves (its choices forgotten after a quarantine).
#pragma once

#include "context.hpp"
#include "problem/op.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace arbiter {

class Plan {
 public:
  // Throws Failure as the op's call would (bad arguments, no kernel).
  Plan(Context& context, const Op& op, const void* args);
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // The hot path: checks the addresses, then launches as Context::run does. Thread-safe.
  void run(const arb_plan_operands& data, void* stream) {
    arb_operands operands = operands_;
    if (bind(data, operands)) [[likely]]
      context_.run_selection(selection(), problem_, operands, stream);
    else
      run_less_aligned(data, operands, stream);
  }

  const arb_problem& problem() const { return problem_; }
  // The kernel the plan runs now, then dispatch's explanation of the problem. Chooses nothing:
  // after the context forgot its choices, it says the next run chooses again.
  std::string explain();

 private:
  // The used tensors' addresses into `operands`, each checked; throws Failure naming the first
  // bad one. False when they are less aligned than the plan's (still aligned for the dtype).
  // arb_plan_operands 1.3 has five tensors; a later minor that adds some must read them only
  // when struct_size says the caller's struct has them.
  static constexpr int kSlots = 5;
  static_assert(ARB_PLAN_MAX_TENSORS == kSlots, "arb_plan_operands grew: read the new slots by struct_size");

  bool bind(const arb_plan_operands& data, arb_operands& operands) const {
    if (data.struct_size < ARB_PLAN_OPERANDS_STRUCT_SIZE) [[unlikely]]
      refuse(data);
    uint64_t addresses = 0;
    for (int i = 0; i < kSlots; ++i) {  // a fixed count: unrolled
      const auto address = reinterpret_cast<uint64_t>(data.tensors[i]);
      if (!used_[i]) {
        if (address != 0) [[unlikely]]
          refuse(data);
        continue;
      }
      if (address == 0 || (address & element_misalignment_) != 0 || address > UINTPTR_MAX - bytes_[i]) [[unlikely]]
        refuse(data);
      addresses |= address;
      __builtin_memcpy(reinterpret_cast<char*>(&operands) + offsets_[i], &data.tensors[i], sizeof(void*));
    }
    for (int k = 0; k < pair_count_; ++k) {
      const Pair& pair = pairs_[k];
      const auto out = reinterpret_cast<uint64_t>(data.tensors[pair.output]);
      const auto in = reinterpret_cast<uint64_t>(data.tensors[pair.input]);
      if (pair.same ? out != in : (out < in + bytes_[pair.input] && in < out + bytes_[pair.output])) [[unlikely]]
        refuse(data);
    }
    return (addresses & (static_cast<uint64_t>(problem_.alignment) - 1)) == 0;
  }
  // Addresses less aligned than the plan's: dispatched for their own alignment class (a
  // selection lookup per run; the kernel for that class chosen, and verified, once).
  void run_less_aligned(const arb_plan_operands& data, const arb_operands& operands, void* stream);
  // Why `data` was refused: the first check that fails, as a Failure.
  [[noreturn]] void refuse(const arb_plan_operands& data) const;

  const Selection& selection() {
    if (generation_.load(std::memory_order_acquire) != context_.dispatcher().generation()) [[unlikely]]
      return select_again();
    return *selection_.load(std::memory_order_acquire);
  }
  // Under select_mutex_: two threads choosing at once must not leave an older choice stored
  // with a newer generation.
  const Selection& select_again();

  // An output and another tensor: disjoint, or (same) the very same memory.
  struct Pair {
    int8_t output, input;
    bool same;
  };

  Context& context_;
  arb_problem problem_;
  arb_operands operands_;  // the scalars; addresses filled per run
  const char* names_[ARB_PLAN_MAX_TENSORS] = {};
  uint64_t element_misalignment_ = 0;  // element size - 1: every address is aligned for the dtype
  bool used_[ARB_PLAN_MAX_TENSORS] = {};
  size_t offsets_[ARB_PLAN_MAX_TENSORS] = {};
  uint64_t bytes_[ARB_PLAN_MAX_TENSORS] = {};
  Pair pairs_[ARB_PLAN_MAX_TENSORS * ARB_PLAN_MAX_TENSORS] = {};
  int pair_count_ = 0;
  std::atomic<const Selection*> selection_{nullptr};  // stored before generation_, both under select_mutex_
  std::atomic<uint64_t> generation_{0};
  std::mutex select_mutex_;
};

}  // namespace arbiter
