// A plan: one problem bound once (arguments checked, kernel chosen, workspace sized) and run
// many times with new data addresses (arb_plan_create / arb_plan_run). A run checks only what
// the addresses can change: present, aligned for the dtype, not wrapping, outputs still
// disjoint from inputs; addresses less aligned than the plan's go through dispatch for their
// own alignment class. The kernel is the dispatcher's Selection, taken again when the
// dispatcher's generation moves (its choices forgotten after a quarantine).
#pragma once

#include "context.hpp"
#include "problem/op.hpp"
#include "problem/ops/plan_layouts.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

namespace arbiter {

class Plan {
 public:
  // Throws Failure as the op's call would (bad arguments, no kernel).
  Plan(Context& context, const Op& op, const void* args);
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // The hot path: checks the addresses, then launches as Context::run does. Thread-safe.
  // One test for the kernel: the selection's attention (Selection) is 0 unless its first calls
  // are checked, shadow checks are sampled or the dispatcher forgot it; then run_attended.
  // kLayout: the plan's layout() (its addresses bound by code made for it), or -1 for any plan
  // (bound by binder_).
  template <int kLayout = -1>
  ARBITER_HOT_INLINE void run(const arb_plan_operands& data, void* stream) {
    arb_operands operands;
    start_operands<kLayout>(operands);
    if (data.struct_size < ARB_PLAN_OPERANDS_STRUCT_SIZE) [[unlikely]]
      refuse(data);
    bool aligned;
    if constexpr (kLayout < 0)
      aligned = binder_(*this, data, operands);
    else
      aligned = bind_layout<kLayout>(data, operands);
    if (!aligned) [[unlikely]]
      return run_less_aligned(data, operands, stream);
    const Selection& chosen = *selection_.load(std::memory_order_acquire);
    if (chosen.attention.load(std::memory_order_acquire) != 0) [[unlikely]]
      return run_attended(operands, stream);
    context_.launch(chosen, problem_, operands, stream);
  }

  const arb_problem& problem() const { return problem_; }
  // The plan's entry in kPlanLayouts (problem/ops/plan_layouts.hpp), or -1: run<layout()>.
  int layout() const { return layout_; }
  // The kernel the plan runs now, then dispatch's explanation of the problem. Chooses nothing:
  // after the context forgot its choices, it says the next run chooses again.
  std::string explain();

 private:
  // The used tensors' addresses into `operands`, each checked; throws Failure naming the first
  // bad one. False when they are less aligned than the plan's (still aligned for the dtype).
  // arb_plan_operands 1.3 has five tensors; a later minor that adds some must read them only
  // when struct_size says the caller's struct has them.
  static constexpr int kSlots = 5;

  // A run's arb_operands before the binder stores the addresses: the plan's, whose address fields
  // are NULL but for the ones the binder overwrites, so those are written as zeros (stores of a
  // register no load feeds) and only the scalars (alpha to reserved) copied; the addresses
  // appended after them (swiglu's gate and up, plugin ABI 1.1; rope's positions, 1.2) are
  // zeroed too. For a listed layout, a 16-byte piece whose two words the layout's addresses
  // both overwrite is not zeroed first (rmsnorm's weight and y: one store fewer a run).
  static constexpr size_t kScalarsAt = offsetof(arb_operands, alpha);
  static constexpr size_t kScalarsEnd = offsetof(arb_operands, gate);
  static_assert(kScalarsAt % 16 == 0 && kScalarsEnd - kScalarsAt == 16 && (sizeof(arb_operands) - kScalarsEnd) % 8 == 0,
                "arb_operands grew: keep the zeroed and copied parts in 16-byte pieces (the tail in 8-byte ones)");
  template <int kLayout>
  static constexpr uint64_t bound_words() {  // bit w: word w of arb_operands holds a bound address
    if constexpr (kLayout < 0) {
      return 0;
    } else {
      uint64_t words = 0;
      for (int slot = 0; slot < kSlots; ++slot)
        if ((kPlanLayouts[kLayout].used >> slot & 1) != 0) words |= uint64_t{1} << (kPlanLayouts[kLayout].offset[slot] / 8);
      return words;
    }
  }
  template <int kLayout>
  ARBITER_HOT_INLINE void start_operands(arb_operands& operands) const {
    // struct_size (word 0) counts as bound: it is stored below, so a piece whose other word
    // is bound too is not zeroed, and a piece with one bound word zeroes only the other.
    constexpr uint64_t kBound = bound_words<kLayout>() | (kLayout < 0 ? 0 : 1);
    const auto zero = [&]<size_t kPiece>(std::integral_constant<size_t, kPiece>) {
      char* piece = reinterpret_cast<char*>(&operands) + 16 * kPiece;
      constexpr uint64_t kWords = (kBound >> (2 * kPiece)) & 3;
      if constexpr (kWords == 0) std::memset(piece, 0, 16);
      if constexpr (kWords == 1) std::memset(piece + 8, 0, 8);
      if constexpr (kWords == 2) std::memset(piece, 0, 8);
    };
    [&]<size_t... kPiece>(std::index_sequence<kPiece...>) {
      (zero(std::integral_constant<size_t, kPiece>{}), ...);
    }(std::make_index_sequence<kScalarsAt / 16>{});
    operands.struct_size = sizeof operands;  // as build_call sets it (the constructor checks)
    std::memcpy(reinterpret_cast<char*>(&operands) + kScalarsAt, reinterpret_cast<const char*>(&operands_) + kScalarsAt,
                kScalarsEnd - kScalarsAt);
    std::memset(reinterpret_cast<char*>(&operands) + kScalarsEnd, 0, sizeof(arb_operands) - kScalarsEnd);
  }
  static_assert(ARB_PLAN_MAX_TENSORS == kSlots, "arb_plan_operands grew: read the new slots by struct_size");

  // The binder of a plan whose used slots are the bits of `kUsedMask` and with `kPairs` output
  // pairs: slots and counts as constants, so that the loops unroll into straight code that
  // reads each address at a fixed place (a third of a run was loop control and slot lookups).
  template <unsigned kUsedMask, int kPairs>
  static bool bind_fixed(const Plan& plan, const arb_plan_operands& data, arb_operands& operands) {
    uint64_t stray = 0;  // the slots the op does not use must be NULL
    uint64_t addresses = 0;
    bool bad = false;
    int used = 0;
#pragma GCC unroll 8
    for (int slot = 0; slot < kSlots; ++slot) {
      const auto address = reinterpret_cast<uint64_t>(data.tensors[slot]);
      if ((kUsedMask >> slot & 1) == 0) {
        stray |= address;
        continue;
      }
      const Use& use = plan.uses_[used++];
      bad |= address - 1 >= use.last_start;  // NULL (wraps to the top) or spans past the address space
      addresses |= address;
      __builtin_memcpy(reinterpret_cast<char*>(&operands) + use.offset, &address, sizeof address);
    }
    bad |= stray != 0;
#pragma GCC unroll 16
    for (int k = 0; k < kPairs; ++k) {
      const Pair& pair = plan.pairs_[k];
      const uint64_t distance = reinterpret_cast<uint64_t>(data.tensors[pair.output]) -
                                reinterpret_cast<uint64_t>(data.tensors[pair.input]);
      bad |= distance + pair.shift < pair.limit;
    }
    if (bad) [[unlikely]]
      plan.refuse(data);
    // One test for the common case: aligned as the plan's addresses were (which includes the
    // dtype's alignment). Otherwise refused (not aligned for the dtype) or less aligned.
    if ((addresses & plan.alignment_mask_) == 0) [[likely]]
      return true;
    if ((addresses & plan.element_misalignment_) != 0) plan.refuse(data);
    return false;
  }
  using Binder = bool (*)(const Plan&, const arb_plan_operands&, arb_operands&);
  static constexpr int kMaxPairs = kSlots * (kSlots - 1) / 2;  // each pair of tensors once
  static Binder binder_for(unsigned used_mask, int pairs);

  // The pairs a plan checks: every output against every other used tensor, each pair once
  // (two outputs: from the lower slot), in this order (pairs_, and bind_layout's constants).
  struct PairSlots {
    int count = 0;
    int8_t output[kMaxPairs] = {}, input[kMaxPairs] = {};
  };
  static constexpr PairSlots pair_slots(unsigned used, unsigned outputs) {
    PairSlots p;
    for (int out = 0; out < kSlots; ++out) {
      if ((used >> out & 1) == 0 || (outputs >> out & 1) == 0) continue;
      for (int other = 0; other < kSlots; ++other) {
        if (other == out || (used >> other & 1) == 0 || ((outputs >> other & 1) != 0 && other < out)) continue;
        p.output[p.count] = static_cast<int8_t>(out);
        p.input[p.count++] = static_cast<int8_t>(other);
      }
    }
    return p;
  }

  // bind_fixed for a plan of a listed layout: each address stored at its constant offset in
  // arb_operands, the pairs' slots constants too (only their spans are read from the plan).
  template <int kLayout>
  ARBITER_HOT_INLINE bool bind_layout(const arb_plan_operands& data, arb_operands& operands) const {
    // Each check a compare and a branch to refuse (which finds the first failing check again):
    // a branch never taken costs one instruction where folding the checks into one flag took two.
    constexpr PlanLayout kUsed = kPlanLayouts[kLayout];
    constexpr PairSlots kPairs = pair_slots(kUsed.used, kUsed.outputs);
    uint64_t stray = 0;  // the slots the op does not use must be NULL
    uint64_t addresses = 0;
    const auto slot = [&]<int kSlot>(std::integral_constant<int, kSlot>) {
      const auto address = reinterpret_cast<uint64_t>(data.tensors[kSlot]);
      if constexpr ((kUsed.used >> kSlot & 1) == 0) {
        stray |= address;
      } else {
        constexpr int kRank = __builtin_popcount(kUsed.used & ((1u << kSlot) - 1));  // its index in uses_
        if (address - 1 >= uses_[kRank].last_start) [[unlikely]]
          refuse(data);
        addresses |= address;
        __builtin_memcpy(reinterpret_cast<char*>(&operands) + kUsed.offset[kSlot], &address, sizeof address);
      }
    };
    [&]<int... kSlot>(std::integer_sequence<int, kSlot...>) {
      (slot(std::integral_constant<int, kSlot>{}), ...);
    }(std::make_integer_sequence<int, kSlots>{});
    if (stray != 0) [[unlikely]]
      refuse(data);
    const auto pair = [&]<int kPair>(std::integral_constant<int, kPair>) {
      if (reinterpret_cast<uint64_t>(data.tensors[kPairs.output[kPair]]) -
              reinterpret_cast<uint64_t>(data.tensors[kPairs.input[kPair]]) + pairs_[kPair].shift <
          pairs_[kPair].limit) [[unlikely]]
        refuse(data);
    };
    [&]<int... kPair>(std::integer_sequence<int, kPair...>) {
      (pair(std::integral_constant<int, kPair>{}), ...);
    }(std::make_integer_sequence<int, kPairs.count>{});
    if ((addresses & alignment_mask_) == 0) [[likely]]
      return true;
    if ((addresses & element_misalignment_) != 0) refuse(data);
    return false;
  }

  // Addresses less aligned than the plan's: dispatched for their own alignment class (a
  // selection lookup per run; the kernel for that class chosen, and verified, once).
  void run_less_aligned(const arb_plan_operands& data, const arb_operands& operands, void* stream);
  // Why `data` was refused: the first check that fails, as a Failure.
  [[noreturn]] void refuse(const arb_plan_operands& data) const;

  // The selection with attention: chosen again when the dispatcher forgot its choices, then run
  // as a call would (checked when due).
  [[gnu::noinline]] void run_attended(const arb_operands& operands, void* stream);
  const Selection& selection() {
    if (generation_.load(std::memory_order_acquire) != context_.dispatcher().generation()) [[unlikely]]
      return select_again();
    return *selection_.load(std::memory_order_acquire);
  }
  // Under select_mutex_: two threads choosing at once must not leave an older choice stored
  // with a newer generation.
  const Selection& select_again();

  // An output and another tensor: disjoint, or (same) the very same memory. Either is one
  // unsigned comparison of their distance (output - input, modulo 2^64): bad when
  // distance + shift < limit. Disjoint spans of o and i bytes overlap exactly when the
  // distance lies in (-o, i), so shift = o - 1 and limit = o + i - 1 (spans that do not wrap,
  // which bind checks in the same pass); the same memory is refused when the distance is not
  // 0, so shift = limit = 2^64 - 1.
  struct Pair {
    int8_t output, input;
    bool same;
    uint64_t shift, limit;
  };
  // A slot the op uses: where its address goes in arb_operands, and the highest address its
  // span can start at minus one (an address above it, or NULL, is refused).
  struct Use {
    int8_t slot;
    uint32_t offset;
    uint64_t last_start;
  };

  arb_problem problem_;  // first: its address is the plan's, one register less on the run's path
  Context& context_;
  arb_operands operands_;  // the scalars; addresses filled per run
  const char* names_[ARB_PLAN_MAX_TENSORS] = {};
  uint64_t element_misalignment_ = 0;  // element size - 1: every address is aligned for the dtype
  uint64_t alignment_mask_ = 0;        // the plan's alignment - 1, with element_misalignment_
  bool used_[ARB_PLAN_MAX_TENSORS] = {};
  uint64_t bytes_[ARB_PLAN_MAX_TENSORS] = {};
  Use uses_[ARB_PLAN_MAX_TENSORS] = {};
  int used_count_ = 0;
  Pair pairs_[kMaxPairs] = {};
  int pair_count_ = 0;
  int layout_ = -1;         // in kPlanLayouts, or -1
  Binder binder_ = nullptr;  // bind_fixed for the used slots (uses_, in slot order) and pair_count_
  std::atomic<const Selection*> selection_{nullptr};  // stored before generation_, both under select_mutex_
  std::atomic<uint64_t> generation_{0};
  std::mutex select_mutex_;
};

}  // namespace arbiter
