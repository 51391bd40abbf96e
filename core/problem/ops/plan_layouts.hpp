// The layouts of the ops' plans (each op's plan_slots: which slots it uses, which of them it
// writes, and where each address goes in arb_operands). A plan whose layout is listed here
// runs through code compiled for it (core/plan.hpp, bind_layout): every address stored at a
// constant offset, every output tested against its inputs at constant slots. Any other
// layout (an op added without a line here) runs the general binder, which reads the same
// from the plan; tests/test_plans.cpp checks that every op's plans find their layout here.
#pragma once

#include <arbiter/plugin.h>

#include <cstddef>
#include <cstdint>

namespace arbiter {

struct PlanLayout {
  int tensors = 0;       // the op's tensors: a run reads the slots of max(5, tensors) (core/plan.hpp)
  unsigned used = 0;     // bit per slot
  unsigned outputs = 0;  // bit per slot: the used slots the op writes
  uint32_t offset[ARB_PLAN_MAX_TENSORS] = {};  // of each used (or derived) slot's address in arb_operands
  int derived = -1;       // an unused slot whose address is derived from another's (PlanSlot), or -1
  int derived_from = -1;  // the slot it is derived from
};
static_assert(ARB_PLAN_MAX_TENSORS <= 32, "a layout's slots are the bits of an unsigned");

namespace plan_layout_detail {
constexpr PlanLayout gemm(bool c, bool bias) {
  PlanLayout l;
  l.tensors = 5;
  l.used = 1u << 0 | 1u << 1 | (c ? 1u << 2 : 0u) | (bias ? 1u << 3 : 0u) | 1u << 4;
  l.outputs = 1u << 4;
  l.offset[0] = offsetof(arb_operands, a);
  l.offset[1] = offsetof(arb_operands, b);
  l.offset[2] = c ? offsetof(arb_operands, c) : 0;
  l.offset[3] = bias ? offsetof(arb_operands, bias) : 0;
  l.offset[4] = offsetof(arb_operands, d);
  return l;
}
constexpr PlanLayout rmsnorm(bool residual) {
  PlanLayout l;
  l.tensors = 4;
  l.used = 1u << 0 | (residual ? 1u << 1 : 0u) | 1u << 2 | 1u << 3;
  l.outputs = (residual ? 1u << 0 : 0u) | 1u << 3;  // x += residual: x written
  l.offset[0] = offsetof(arb_operands, x);
  l.offset[1] = residual ? offsetof(arb_operands, residual) : 0;
  l.offset[2] = offsetof(arb_operands, weight);
  l.offset[3] = offsetof(arb_operands, y);
  return l;
}
constexpr PlanLayout two_in_one_out(size_t first, size_t second, size_t out) {
  PlanLayout l;
  l.tensors = second != 0 ? 3 : 2;
  l.used = second != 0 ? 7u : 3u;
  l.outputs = second != 0 ? 1u << 2 : 1u << 1;
  l.offset[0] = static_cast<uint32_t>(first);
  l.offset[1] = static_cast<uint32_t>(second != 0 ? second : out);
  l.offset[2] = second != 0 ? static_cast<uint32_t>(out) : 0;
  return l;
}
// rope: x, read and written in place, and positions.
constexpr PlanLayout rope() {
  PlanLayout l;
  l.tensors = 2;
  l.used = 3u;
  l.outputs = 1u << 0;
  l.offset[0] = offsetof(arb_operands, x);
  l.offset[1] = offsetof(arb_operands, positions);
  return l;
}
// attention: q, k and v read, o written.
constexpr PlanLayout attention() {
  PlanLayout l;
  l.tensors = 4;
  l.used = 15u;
  l.outputs = 1u << 3;
  l.offset[0] = offsetof(arb_operands, q);
  l.offset[1] = offsetof(arb_operands, k);
  l.offset[2] = offsetof(arb_operands, v);
  l.offset[3] = offsetof(arb_operands, o);
  return l;
}
// mlp: x, norm weight, gate, up and down read, y written. A fused gate/up weight (up NULL)
// leaves slot 3 unused: each run derives up from gate's address.
constexpr PlanLayout mlp(bool fused_gate_up) {
  PlanLayout l;
  l.tensors = 6;
  l.used = 1u << 0 | 1u << 1 | 1u << 2 | (fused_gate_up ? 0u : 1u << 3) | 1u << 4 | 1u << 5;
  l.outputs = 1u << 5;
  l.offset[0] = offsetof(arb_operands, x);
  l.offset[1] = offsetof(arb_operands, weight);
  l.offset[2] = offsetof(arb_operands, gate);
  l.offset[3] = offsetof(arb_operands, up);
  l.offset[4] = offsetof(arb_operands, down);
  l.offset[5] = offsetof(arb_operands, y);
  if (fused_gate_up) {
    l.derived = 3;
    l.derived_from = 2;
  }
  return l;
}
// qkv: x, norm weight, the projection's weight (in b) and positions read, y written.
constexpr PlanLayout qkv() {
  PlanLayout l;
  l.tensors = 5;
  l.used = 31u;
  l.outputs = 1u << 4;
  l.offset[0] = offsetof(arb_operands, x);
  l.offset[1] = offsetof(arb_operands, weight);
  l.offset[2] = offsetof(arb_operands, b);
  l.offset[3] = offsetof(arb_operands, positions);
  l.offset[4] = offsetof(arb_operands, y);
  return l;
}
}  // namespace plan_layout_detail

// gemm (a, b, c, bias, d), rmsnorm (x, residual, weight, y), softmax (x, y), swiglu (gate, up, y),
// rope (x, positions), attention (q, k, v, o), mlp (x, norm weight, gate, up, down, y), qkv (x,
// norm weight, weight, positions, y).
inline constexpr PlanLayout kPlanLayouts[] = {
    plan_layout_detail::gemm(false, false),
    plan_layout_detail::gemm(false, true),
    plan_layout_detail::gemm(true, false),
    plan_layout_detail::gemm(true, true),
    plan_layout_detail::rmsnorm(false),
    plan_layout_detail::rmsnorm(true),
    plan_layout_detail::two_in_one_out(offsetof(arb_operands, x), 0, offsetof(arb_operands, y)),
    plan_layout_detail::two_in_one_out(offsetof(arb_operands, gate), offsetof(arb_operands, up),
                                       offsetof(arb_operands, y)),
    plan_layout_detail::rope(),
    plan_layout_detail::attention(),
    plan_layout_detail::mlp(false),
    plan_layout_detail::mlp(true),
    plan_layout_detail::qkv(),
};
inline constexpr int kPlanLayoutCount = static_cast<int>(sizeof kPlanLayouts / sizeof kPlanLayouts[0]);

}  // namespace arbiter
