#include "plan.hpp"

#include "common/failure.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <utility>

namespace arbiter {
namespace {

// The bytes a tensor spans from its first element to just past its last (its strides are
// positive: build_call accepted it).
uint64_t span_of(const DLTensor& t) {
  int64_t elements = 1, compact = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    const int64_t stride = t.strides != nullptr ? t.strides[i] : compact;
    int64_t step = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, stride, &step) || __builtin_add_overflow(elements, step, &elements) ||
        __builtin_mul_overflow(compact, t.shape[i], &compact))
      fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_create: a tensor spans more memory than an address can reach");
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<int64_t>((t.dtype.bits * t.dtype.lanes + 7) / 8), &bytes))
    fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_create: a tensor spans more memory than an address can reach");
  return static_cast<uint64_t>(bytes);
}

}  // namespace

Plan::Plan(Context& context, const Op& op, const void* args) : context_(context) {
  Call call;
  op.build_call(args, call);
  problem_ = call.problem;
  operands_ = call.operands;
  PlanSlots slots;
  op.plan_slots(args, problem_, slots);
  element_misalignment_ = static_cast<uint64_t>(dtype_size(problem_.dtype)) - 1;
  alignment_mask_ = (static_cast<uint64_t>(problem_.alignment) - 1) | element_misalignment_;
  for (int i = 0; i < ARB_PLAN_MAX_TENSORS; ++i) {
    names_[i] = slots[i].name;
    if (names_[i] != nullptr) tensor_count_ = i + 1;
    if (slots[i].derived_from >= 0) {
      if (derived_.slot >= 0 || slots[i].tensor != nullptr || slots[slots[i].derived_from].tensor == nullptr)
        fail(ARB_ERR_INTERNAL, "arb_plan_create: the op derives an address the plan cannot (one, from a used slot)");
      derived_ = {static_cast<int8_t>(i), static_cast<int8_t>(slots[i].derived_from),
                  static_cast<uint32_t>(slots[i].offset), slots[i].derived_bytes};
    }
    used_[i] = slots[i].tensor != nullptr;
    if (!used_[i]) continue;
    bytes_[i] = span_of(*slots[i].tensor);
    uses_[used_count_++] = {static_cast<int8_t>(i), static_cast<uint32_t>(slots[i].offset), UINT64_MAX - bytes_[i]};
  }
  slots_read_ = slots_read(tensor_count_);
  least_struct_size_ = struct_size_holding(slots_read_);
  // Every output against every other tensor it must not overlap (or must be).
  unsigned used_mask = 0, output_mask = 0;
  for (int k = 0; k < used_count_; ++k) {
    used_mask |= 1u << uses_[k].slot;
    if (slots[uses_[k].slot].output) output_mask |= 1u << uses_[k].slot;
  }
  const PairSlots pair_slots_of_plan = pair_slots(used_mask, output_mask);
  for (int k = 0; k < pair_slots_of_plan.count; ++k) {
    const int out = pair_slots_of_plan.output[k], other = pair_slots_of_plan.input[k];
    const bool same = slots[other].same_as == out || slots[out].same_as == other;
    Pair& pair = pairs_[pair_count_++];
    pair = {static_cast<int8_t>(out), static_cast<int8_t>(other), same, UINT64_MAX, UINT64_MAX};
    if (same) continue;
    // Spans below an address space's size: o + i - 1 cannot wrap. An empty span overlaps nothing.
    const bool empty = bytes_[out] == 0 || bytes_[other] == 0;
    pair.shift = empty ? 0 : bytes_[out] - 1;
    pair.limit = empty ? 0 : bytes_[out] + bytes_[other] - 1;
  }
  // A run starts from the plan's scalars with every address NULL (start_operands), then binds
  // the used slots' addresses: the op's operands must hold no other address.
  arb_operands started;
  start_operands<-1>(started);
  for (int k = 0; k < used_count_; ++k)
    std::memcpy(reinterpret_cast<char*>(&started) + uses_[k].offset,
                reinterpret_cast<const char*>(&call.operands) + uses_[k].offset, sizeof(void*));
  if (derived_.slot >= 0) {
    const uint64_t address = reinterpret_cast<uint64_t>(slots[derived_.from].tensor->data) +
                             slots[derived_.from].tensor->byte_offset + derived_.bytes;
    std::memcpy(reinterpret_cast<char*>(&started) + derived_.offset, &address, sizeof address);
  }
  if (std::memcmp(&started, &call.operands, sizeof started) != 0)
    fail(ARB_ERR_INTERNAL, "arb_plan_create: the op's operands hold an address that no tensor of the plan gives");
  // A listed layout: the same tensors, slots, outputs, offsets and derived address.
  for (int i = 0; i < kPlanLayoutCount && layout_ < 0; ++i) {
    const PlanLayout& layout = kPlanLayouts[i];
    bool same = layout.tensors == tensor_count_ && layout.used == used_mask && layout.outputs == output_mask &&
                layout.derived == derived_.slot && layout.derived_from == derived_.from &&
                (derived_.slot < 0 || layout.offset[derived_.slot] == derived_.offset);
    for (int k = 0; same && k < used_count_; ++k) same = layout.offset[uses_[k].slot] == uses_[k].offset;
    if (same) layout_ = i;
  }
  const uint64_t generation = context_.dispatcher().generation();  // before: a later forget is seen
  selection_.store(&context_.dispatcher().select(problem_), std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
}

bool Plan::bind_any(const arb_plan_operands& data, arb_operands& operands) const {
  uint64_t stray = 0;  // the slots the op does not use must be NULL
  uint64_t addresses = 0;
  bool bad = false;
  for (int slot = 0, used = 0; slot < slots_read_; ++slot) {
    const auto address = reinterpret_cast<uint64_t>(data.tensors[slot]);
    if (!used_[slot]) {
      stray |= address;
      continue;
    }
    const Use& use = uses_[used++];
    bad |= address - 1 >= use.last_start;  // NULL (wraps to the top) or spans past the address space
    addresses |= address;
    std::memcpy(reinterpret_cast<char*>(&operands) + use.offset, &address, sizeof address);
  }
  for (int k = 0; k < pair_count_; ++k) {
    const Pair& pair = pairs_[k];
    const uint64_t distance = reinterpret_cast<uint64_t>(data.tensors[pair.output]) -
                              reinterpret_cast<uint64_t>(data.tensors[pair.input]);
    bad |= distance + pair.shift < pair.limit;
  }
  if (bad || stray != 0) refuse(data);
  if (derived_.slot >= 0) {
    const uint64_t address = reinterpret_cast<uint64_t>(data.tensors[derived_.from]) + derived_.bytes;
    std::memcpy(reinterpret_cast<char*>(&operands) + derived_.offset, &address, sizeof address);
  }
  // One test for the common case: aligned as the plan's addresses were (which includes the
  // dtype's alignment). Otherwise refused (not aligned for the dtype) or less aligned.
  if ((addresses & alignment_mask_) == 0) return true;
  if ((addresses & element_misalignment_) != 0) refuse(data);
  return false;
}

const Selection& Plan::select_again() {
  std::lock_guard<std::mutex> lock(select_mutex_);
  const uint64_t generation = context_.dispatcher().generation();  // before: a later forget is seen
  if (generation_.load(std::memory_order_relaxed) == generation) return *selection_.load(std::memory_order_relaxed);
  const Selection& selection = context_.dispatcher().select(problem_);
  selection_.store(&selection, std::memory_order_release);  // before the generation: who sees it sees this
  generation_.store(generation, std::memory_order_release);
  return selection;
}

void Plan::run_attended(const arb_operands& operands, void* stream) {
  context_.run_selection(selection(), problem_, operands, stream);
}

void Plan::run_less_aligned(const arb_plan_operands& data, const arb_operands& operands, void* stream) {
  // A derived address lies a multiple of a row stride past its source: the strides' alignment
  // below covers it.
  uint64_t addresses = 0;
  for (int i = 0; i < slots_read_; ++i) addresses |= reinterpret_cast<uint64_t>(data.tensors[i]);
  arb_problem problem = problem_;
  problem.alignment = alignment_class({addresses, static_cast<uint64_t>(stride_alignment(problem_))});
  context_.run(problem, operands, stream);
}

void Plan::refuse(const arb_plan_operands& data) const {
  auto name = [&](int i) { return fmt::format("tensors[{}] ({})", i, names_[i] ? names_[i] : "past the op's last"); };
  if (data.struct_size < ARB_PLAN_OPERANDS_STRUCT_SIZE)
    fail(ARB_ERR_INVALID_ARGUMENT, "arb_plan_run: operands->struct_size is below the minimum (set it to sizeof)");
  if (data.struct_size < least_struct_size_)
    fail(ARB_ERR_INVALID_ARGUMENT,
         fmt::format("arb_plan_run: operands->struct_size = {} is too small for {}'s {} tensors: it holds {} (an "
                     "arb_plan_operands from before 1.8); a run needs {} or more (build against arbiter 1.8 or "
                     "later and set it to sizeof)",
                     data.struct_size, op_name(problem_.op), tensor_count_,
                     (data.struct_size - offsetof(arb_plan_operands, tensors)) / sizeof(void*), least_struct_size_));
  for (int slot = 0; slot < slots_read_; ++slot) {
    const auto address = reinterpret_cast<uint64_t>(data.tensors[slot]);
    if (slot == derived_.slot && address != 0)
      fail(ARB_ERR_INVALID_ARGUMENT,
           fmt::format("arb_plan_run: {} must be NULL: the plan's {} holds it (each run takes it from that address)",
                       name(slot), name(derived_.from)));
    if (!used_[slot]) {
      if (address != 0)
        fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("arb_plan_run: {} must be NULL: the plan does not use it", name(slot)));
      continue;
    }
    if (address == 0) fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("arb_plan_run: {} is NULL", name(slot)));
    if ((address & element_misalignment_) != 0)
      fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("arb_plan_run: {} is not aligned for its dtype (address % {} = {})",
                                                 name(slot), element_misalignment_ + 1, address & element_misalignment_));
    if (address > UINTPTR_MAX - bytes_[slot])
      fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("arb_plan_run: {} spans past the end of the address space", name(slot)));
  }
  for (int k = 0; k < pair_count_; ++k) {
    const Pair& pair = pairs_[k];
    const auto out = reinterpret_cast<uint64_t>(data.tensors[pair.output]);
    const auto in = reinterpret_cast<uint64_t>(data.tensors[pair.input]);
    if (pair.same && out != in)
      fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("arb_plan_run: {} must be the same address as {} (the plan was made "
                                                 "in place)", name(pair.input), name(pair.output)));
    if (!pair.same && out < in + bytes_[pair.input] && in < out + bytes_[pair.output])
      fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("arb_plan_run: {} overlaps {} in memory: an output must not share "
                                                 "memory with an input", name(pair.output), name(pair.input)));
  }
  fail(ARB_ERR_INTERNAL, "arb_plan_run: the operands were refused, but no check fails again");
}

std::string Plan::explain() {
  const bool stale = generation_.load(std::memory_order_acquire) != context_.dispatcher().generation();
  const Selection& chosen = *selection_.load(std::memory_order_acquire);
  return fmt::format("plan: {} {} (workspace {} bytes) for addresses aligned to {} bytes; less aligned ones are "
                     "dispatched for their own alignment\n",
                     stale ? "chooses again at its next run; it ran" : "runs", chosen.kernel->name,
                     chosen.workspace_bytes, problem_.alignment) +
         context_.dispatcher().explain(problem_);
}

}  // namespace arbiter
