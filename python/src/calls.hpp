// The tensors of one operation as its C call takes them, shared by the calls, explain and plans:
// each operand described over the caller's memory (operand.hpp), views normalised the way the
// ABI can take them (a transposed GEMM operand becomes trans_a / trans_b), and an input view it
// cannot take reported as _NeedsCopy (the Python layer copies it and calls again).
#pragma once

#include "operand.hpp"

#include <arbiter/arbiter.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>

namespace arbiter::python {

using Input = std::optional<nb::ndarray<nb::ro>>;
using Output = nb::ndarray<>;

// The most tensors one call takes: mlp's six (x, norm_weight, gate, up, down, y). A plan's run
// takes up to ARB_PLAN_MAX_TENSORS (eight since ABI 1.8, five before), so every call has a plan.
inline constexpr int kMaxCallOperands = 6;
static_assert(kMaxCallOperands <= ARB_PLAN_MAX_TENSORS);

// The operands in the order of the op's args struct, which is also the order of
// arb_plan_operands' slots (gemm a, b, c, bias, d; rmsnorm x, residual, weight, y; softmax x, y;
// swiglu gate, up, y; rope x, positions; attention q, k, v, o; mlp x, norm_weight, gate, up,
// down, y; qkv x, norm_weight, weight, positions, y).
// Not copyable: each DLTensor points into its own Operand's shape and strides.
struct CallOperands {
  Operand slots[kMaxCallOperands];
  int32_t trans_a = 0, trans_b = 0;  // gemm: a, b given as transposed views

  CallOperands() = default;
  CallOperands(const CallOperands&) = delete;
  CallOperands& operator=(const CallOperands&) = delete;
};

// `bf16` is a mask of the operands (bit i: the i-th, in argument order: gemm a, b, c, bias, out;
// rmsnorm x, residual, weight, out; softmax x, out; swiglu gate, up, out; rope x; attention q, k, v,
// out; mlp x, norm_weight, gate, up, down, out; qkv x, norm_weight, weight, positions, out) that
// are NumPy bfloat16 arrays passed as uint16 views, to be read as bfloat16.
void describe_gemm(const nb::ndarray<nb::ro>& a, const nb::ndarray<nb::ro>& b, const Input& c, const Input& bias,
                   const Output& d, uint32_t bf16, CallOperands& operands);
void describe_rmsnorm(const nb::ndarray<nb::ro>& x, const Input& residual, const nb::ndarray<nb::ro>& weight,
                      const Output& y, uint32_t bf16, CallOperands& operands);
void describe_softmax(const nb::ndarray<nb::ro>& x, const Output& y, uint32_t bf16, CallOperands& operands);
// swiglu: up absent when gate is one fused [..., 2n] gate/up output (the C call's up NULL).
void describe_swiglu(const nb::ndarray<nb::ro>& gate, const Input& up, const Output& y, uint32_t bf16,
                     CallOperands& operands);
// rope: x is rotated in place, so it is never reported for a copy (the library names what is
// wrong with a view it cannot take); positions are int32 indices, copied when not compact.
void describe_rope(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& positions, uint32_t bf16,
                   CallOperands& operands);

// attention: q, k and v [batch, tokens, heads, head_dim] in any strides but the last dimension's
// (an input whose last dimension is strided is reported for a copy).
void describe_attention(const nb::ndarray<nb::ro>& q, const nb::ndarray<nb::ro>& k, const nb::ndarray<nb::ro>& v,
                        const Output& out, uint32_t bf16, CallOperands& operands);

// mlp: x [..., hidden] in rows; the weights row-major as torch.nn.Linear stores them (a
// transposed or strided weight is reported for a copy); up absent when gate is the fused
// [2 inter, hidden] gate/up weight (the C call's up NULL).
void describe_mlp(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight, const nb::ndarray<nb::ro>& gate,
                  const Input& up, const nb::ndarray<nb::ro>& down, const Output& out, uint32_t bf16,
                  CallOperands& operands);

// qkv: x [..., hidden] in rows; the fused QKV weight row-major as torch.nn.Linear stores it (a
// transposed or strided weight is reported for a copy); positions int32 indices, copied when not
// compact, as rope's; out [..., heads + 2 kv_heads, head_dim], never copied.
void describe_qkv(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight,
                  const nb::ndarray<nb::ro>& weight, const nb::ndarray<nb::ro>& positions, const Output& out,
                  uint32_t bf16, CallOperands& operands);

arb_gemm_args gemm_args(const CallOperands& operands, int32_t activation, float alpha, float beta);
arb_rmsnorm_args rmsnorm_args(const CallOperands& operands, float eps);
arb_softmax_args softmax_args(const CallOperands& operands);
arb_swiglu_args swiglu_args(const CallOperands& operands);
arb_rope_args rope_args(const CallOperands& operands, double theta, int64_t max_position, int32_t layout);
arb_attention_args attention_args(const CallOperands& operands, bool causal, float scale);
arb_mlp_args mlp_args(const CallOperands& operands, float eps);
arb_qkv_args qkv_args(const CallOperands& operands, int64_t heads, int64_t kv_heads, double theta, int64_t max_position,
                      int32_t layout, float eps);

// A report by arb_explain's buffer protocol (ask for the size, then fill) into `text`, without
// raising, so that it can run without the GIL. `write(buffer, capacity, &length)` makes the call.
template <typename Write>
arb_status read_report(Write write, std::string& text) {
  size_t length = 0;
  arb_status status = write(nullptr, 0, &length);
  if (status != ARB_OK && status != ARB_ERR_BUFFER_TOO_SMALL) return status;
  text.assign(length, '\0');
  status = write(text.data(), text.size(), &length);
  text.resize(status == ARB_OK && length > 0 ? length - 1 : 0);  // without the NUL
  return status;
}

// The Python names of an op's operands in slot order (the output is `out`, as the caller passes it).
const char* slot_name(int32_t op, int slot);
// An arb_op's name as the problem syntax spells it ("gemm", ..., "qkv"); "unknown" for another.
const char* op_name(int32_t op);

}  // namespace arbiter::python
