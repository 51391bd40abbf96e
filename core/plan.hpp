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
  // (bound by bind_any).
  template <int kLayout = -1>
  ARBITER_HOT_INLINE void run(const arb_plan_operands& data, void* stream) {
    arb_operands operands;
    start_operands<kLayout>(operands);
    if (data.struct_size < least_struct_size<kLayout>()) [[unlikely]]
      refuse(data);
    bool aligned;
    if constexpr (kLayout < 0)
      aligned = bind_any(data, operands);
    else
      aligned = bind_layout<kLayout>(data, operands);
    if (!aligned) [[unlikely]]
      return run_less_aligned(data, operands, stream);
    const Selection& chosen = *selection_.load(std::memory_order_acquire);
    if (chosen.attention.load(std::memory_order_acquire) != 0) [[unlikely]]
      return run_attended(operands, stream);
    context_.launch_plain(chosen, problem_, operands, stream);
  }

  const arb_problem& problem() const { return problem_; }
  // The plan's entry in kPlanLayouts (problem/ops/plan_layouts.hpp), or -1: run<layout()>.
  int layout() const { return layout_; }
  // The kernel the plan runs now, then dispatch's explanation of the problem. Chooses nothing:
  // after the context forgot its choices, it says the next run chooses again.
  std::string explain();

 private:
  // arb_plan_operands has kSlots tensors since 1.8, five before (1.3-1.7). A run reads those
  // five, and the slots past them only for an op with more tensors (mlp's six), which requires
  // a struct_size that holds them: a caller built before 1.8 runs every other op's plans.
  static constexpr int kSlots = ARB_PLAN_MAX_TENSORS;
  static constexpr int kFirstVersionSlots = 5;
  static_assert(ARB_PLAN_OPERANDS_STRUCT_SIZE ==
                offsetof(arb_plan_operands, tensors) + kFirstVersionSlots * sizeof(void*));
  static constexpr int slots_read(int op_tensors) {
    return op_tensors > kFirstVersionSlots ? op_tensors : kFirstVersionSlots;
  }
  static constexpr size_t struct_size_holding(int slots) {
    return offsetof(arb_plan_operands, tensors) + static_cast<size_t>(slots) * sizeof(void*);
  }
  // The least struct_size a run takes: a constant for a listed layout.
  template <int kLayout>
  ARBITER_HOT_INLINE size_t least_struct_size() const {
    if constexpr (kLayout < 0)
      return least_struct_size_;
    else
      return struct_size_holding(slots_read(kPlanLayouts[kLayout].tensors));
  }

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
      constexpr PlanLayout kUsed = kPlanLayouts[kLayout];
      uint64_t words = 0;
      for (int slot = 0; slot < kSlots; ++slot)
        if ((kUsed.used >> slot & 1) != 0 || slot == kUsed.derived) words |= uint64_t{1} << (kUsed.offset[slot] / 8);
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

  // The used tensors' addresses into `operands` (and a derived one, PlanSlot), each checked;
  // throws Failure naming the first bad one. False when they are less aligned than the plan's
  // (still aligned for the dtype). For a plan of a layout not listed (an op added without a
  // line in plan_layouts.hpp): the slots, offsets and pairs read from the plan.
  bool bind_any(const arb_plan_operands& data, arb_operands& operands) const;
  static constexpr int kMaxPairs = kSlots * (kSlots - 1) / 2;  // each pair of tensors once

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

  // bind_any for a plan of a listed layout: each address stored at its constant offset in
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
    }(std::make_integer_sequence<int, slots_read(kUsed.tensors)>{});
    if (stray != 0) [[unlikely]]
      refuse(data);
    if constexpr (kUsed.derived >= 0) {  // its source was checked above: the sum does not wrap
      const uint64_t address = reinterpret_cast<uint64_t>(data.tensors[kUsed.derived_from]) + derived_.bytes;
      __builtin_memcpy(reinterpret_cast<char*>(&operands) + kUsed.offset[kUsed.derived], &address, sizeof address);
    }
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
  // A slot the run leaves NULL whose address is slot `from`'s plus `bytes` (PlanSlot), or none.
  struct Derived {
    int8_t slot = -1, from = -1;
    uint32_t offset = 0;
    uint64_t bytes = 0;
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
  Derived derived_;
  int tensor_count_ = 0;  // the op's (its named slots)
  int slots_read_ = kFirstVersionSlots;
  size_t least_struct_size_ = ARB_PLAN_OPERANDS_STRUCT_SIZE;
  int layout_ = -1;  // in kPlanLayouts, or -1
  std::atomic<const Selection*> selection_{nullptr};  // stored before generation_, both under select_mutex_
  std::atomic<uint64_t> generation_{0};
  std::mutex select_mutex_;
};

}  // namespace arbiter
