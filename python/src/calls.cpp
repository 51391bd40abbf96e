#include "calls.hpp"

#include "python_errors.hpp"

#include <tuple>

namespace arbiter::python {

void describe_gemm(const nb::ndarray<nb::ro>& a, const nb::ndarray<nb::ro>& b, const Input& c, const Input& bias,
                   const Output& d, uint32_t bf16, CallOperands& operands) {
  Operand& oa = operands.slots[0];
  Operand& ob = operands.slots[1];
  Operand& oc = operands.slots[2];
  Operand& obias = operands.slots[3];
  make_operand(a, "a", bf16 & 1, oa);
  make_operand(b, "b", bf16 & 2, ob);
  if (c) make_operand(*c, "c", bf16 & 4, oc);
  if (bias) make_operand(*bias, "bias", bf16 & 8, obias);
  make_operand(d, "out", bf16 & 16, operands.slots[4]);
  for (auto [operand, flag, name] :
       {std::tuple{&oa, &operands.trans_a, "a"}, std::tuple{&ob, &operands.trans_b, "b"}}) {
    switch (matrix_layout(*operand)) {
      case Layout::as_is: break;
      case Layout::transposed: transpose(*operand); *flag = 1; break;
      case Layout::needs_copy: needs_copy(name);
    }
  }
  if (c && matrix_layout(oc) != Layout::as_is) needs_copy("c");
  if (bias && rows_layout(obias) != Layout::as_is) needs_copy("bias");
}

void describe_rmsnorm(const nb::ndarray<nb::ro>& x, const Input& residual, const nb::ndarray<nb::ro>& weight,
                      const Output& y, uint32_t bf16, CallOperands& operands) {
  Operand& ox = operands.slots[0];
  Operand& oresidual = operands.slots[1];
  Operand& oweight = operands.slots[2];
  make_operand(x, "x", bf16 & 1, ox);
  if (residual) make_operand(*residual, "residual", bf16 & 2, oresidual);
  make_operand(weight, "weight", bf16 & 4, oweight);
  make_operand(y, "out", bf16 & 8, operands.slots[3]);
  if (rows_layout(ox) != Layout::as_is) needs_copy("x");
  if (residual && rows_layout(oresidual) != Layout::as_is) needs_copy("residual");
  if (rows_layout(oweight) != Layout::as_is) needs_copy("weight");
}

void describe_softmax(const nb::ndarray<nb::ro>& x, const Output& y, uint32_t bf16, CallOperands& operands) {
  make_operand(x, "x", bf16 & 1, operands.slots[0]);
  make_operand(y, "out", bf16 & 2, operands.slots[1]);
  if (rows_layout(operands.slots[0]) != Layout::as_is) needs_copy("x");
}

void describe_swiglu(const nb::ndarray<nb::ro>& gate, const Input& up, const Output& y, uint32_t bf16,
                     CallOperands& operands) {
  make_operand(gate, "gate", bf16 & 1, operands.slots[0]);
  if (up) make_operand(*up, "up", bf16 & 2, operands.slots[1]);
  make_operand(y, "out", bf16 & 4, operands.slots[2]);
  if (rows_layout(operands.slots[0]) != Layout::as_is) needs_copy("gate");
  if (up && rows_layout(operands.slots[1]) != Layout::as_is) needs_copy("up");
}

void describe_rope(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& positions, uint32_t bf16,
                   CallOperands& operands) {
  make_operand(x, "x", bf16 & 1, operands.slots[0]);
  make_index_operand(positions, "positions", operands.slots[1]);
  if (!is_compact(operands.slots[1])) needs_copy("positions");
}

void describe_attention(const nb::ndarray<nb::ro>& q, const nb::ndarray<nb::ro>& k, const nb::ndarray<nb::ro>& v,
                        const Output& out, uint32_t bf16, CallOperands& operands) {
  make_operand(q, "q", bf16 & 1, operands.slots[0]);
  make_operand(k, "k", bf16 & 2, operands.slots[1]);
  make_operand(v, "v", bf16 & 4, operands.slots[2]);
  make_operand(out, "out", bf16 & 8, operands.slots[3]);
  for (int slot = 0; slot < 3; ++slot) {
    const DLTensor& t = operands.slots[slot].tensor;
    if (t.ndim >= 1 && t.shape[t.ndim - 1] > 1 && t.strides != nullptr && t.strides[t.ndim - 1] != 1)
      needs_copy(slot_name(ARB_OP_ATTENTION, slot));
  }
}

void describe_mlp(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight, const nb::ndarray<nb::ro>& gate,
                  const Input& up, const nb::ndarray<nb::ro>& down, const Output& out, uint32_t bf16,
                  CallOperands& operands) {
  make_operand(x, "x", bf16 & 1, operands.slots[0]);
  make_operand(norm_weight, "norm_weight", bf16 & 2, operands.slots[1]);
  make_operand(gate, "gate", bf16 & 4, operands.slots[2]);
  if (up) make_operand(*up, "up", bf16 & 8, operands.slots[3]);
  make_operand(down, "down", bf16 & 16, operands.slots[4]);
  make_operand(out, "out", bf16 & 32, operands.slots[5]);
  if (rows_layout(operands.slots[0]) != Layout::as_is) needs_copy("x");
  if (rows_layout(operands.slots[1]) != Layout::as_is) needs_copy("norm_weight");
  // The weights are taken row-major only (no trans flag as gemm has): a transposed view is copied.
  for (int slot = 2; slot <= 4; ++slot)
    if (operands.slots[slot].present && matrix_layout(operands.slots[slot]) != Layout::as_is)
      needs_copy(slot_name(ARB_OP_MLP, slot));
}

void describe_qkv(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight,
                  const nb::ndarray<nb::ro>& weight, const nb::ndarray<nb::ro>& positions, const Output& out,
                  uint32_t bf16, CallOperands& operands) {
  make_operand(x, "x", bf16 & 1, operands.slots[0]);
  make_operand(norm_weight, "norm_weight", bf16 & 2, operands.slots[1]);
  make_operand(weight, "weight", bf16 & 4, operands.slots[2]);
  make_index_operand(positions, "positions", operands.slots[3]);
  make_operand(out, "out", bf16 & 16, operands.slots[4]);
  if (rows_layout(operands.slots[0]) != Layout::as_is) needs_copy("x");
  if (rows_layout(operands.slots[1]) != Layout::as_is) needs_copy("norm_weight");
  // Row-major only, as mlp's weights: a transposed view is copied.
  if (matrix_layout(operands.slots[2]) != Layout::as_is) needs_copy("weight");
  if (!is_compact(operands.slots[3])) needs_copy("positions");
}

arb_gemm_args gemm_args(const CallOperands& operands, int32_t activation, float alpha, float beta) {
  arb_gemm_args args = ARB_GEMM_ARGS_INIT;
  args.a = operands.slots[0].get();
  args.b = operands.slots[1].get();
  args.c = operands.slots[2].get();
  args.bias = operands.slots[3].get();
  args.d = operands.slots[4].get();
  args.trans_a = operands.trans_a;
  args.trans_b = operands.trans_b;
  args.activation = activation;
  args.alpha = alpha;
  args.beta = beta;
  return args;
}

arb_rmsnorm_args rmsnorm_args(const CallOperands& operands, float eps) {
  arb_rmsnorm_args args = ARB_RMSNORM_ARGS_INIT;
  args.x = operands.slots[0].get();
  args.residual = operands.slots[1].get();
  args.weight = operands.slots[2].get();
  args.y = operands.slots[3].get();
  args.eps = eps;
  return args;
}

arb_softmax_args softmax_args(const CallOperands& operands) {
  arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
  args.x = operands.slots[0].get();
  args.y = operands.slots[1].get();
  return args;
}

arb_swiglu_args swiglu_args(const CallOperands& operands) {
  arb_swiglu_args args = ARB_SWIGLU_ARGS_INIT;
  args.gate = operands.slots[0].get();
  args.up = operands.slots[1].get();
  args.y = operands.slots[2].get();
  return args;
}

arb_rope_args rope_args(const CallOperands& operands, double theta, int64_t max_position, int32_t layout) {
  arb_rope_args args = ARB_ROPE_ARGS_INIT;
  args.x = operands.slots[0].get();
  args.positions = operands.slots[1].get();
  args.theta = theta;
  args.max_position = max_position;
  args.layout = layout;
  return args;
}

arb_attention_args attention_args(const CallOperands& operands, bool causal, float scale) {
  arb_attention_args args = ARB_ATTENTION_ARGS_INIT;
  args.q = operands.slots[0].get();
  args.k = operands.slots[1].get();
  args.v = operands.slots[2].get();
  args.o = operands.slots[3].get();
  args.causal = causal ? 1 : 0;
  args.scale = scale;
  return args;
}

arb_mlp_args mlp_args(const CallOperands& operands, float eps) {
  arb_mlp_args args = ARB_MLP_ARGS_INIT;
  args.x = operands.slots[0].get();
  args.norm_weight = operands.slots[1].get();
  args.gate = operands.slots[2].get();
  args.up = operands.slots[3].get();
  args.down = operands.slots[4].get();
  args.y = operands.slots[5].get();
  args.eps = eps;
  return args;
}

arb_qkv_args qkv_args(const CallOperands& operands, int64_t heads, int64_t kv_heads, double theta, int64_t max_position,
                      int32_t layout, float eps) {
  arb_qkv_args args = ARB_QKV_ARGS_INIT;
  args.x = operands.slots[0].get();
  args.norm_weight = operands.slots[1].get();
  args.weight = operands.slots[2].get();
  args.positions = operands.slots[3].get();
  args.y = operands.slots[4].get();
  args.heads = heads;
  args.kv_heads = kv_heads;
  args.theta = theta;
  args.max_position = max_position;
  args.eps = eps;
  args.layout = layout;
  return args;
}

const char* slot_name(int32_t op, int slot) {
  static constexpr const char* kGemm[] = {"a", "b", "c", "bias", "out", "-"};
  static constexpr const char* kRmsNorm[] = {"x", "residual", "weight", "out", "-", "-"};
  static constexpr const char* kSoftmax[] = {"x", "out", "-", "-", "-", "-"};
  static constexpr const char* kSwiglu[] = {"gate", "up", "out", "-", "-", "-"};
  static constexpr const char* kRope[] = {"x", "positions", "-", "-", "-", "-"};
  static constexpr const char* kAttention[] = {"q", "k", "v", "out", "-", "-"};
  static constexpr const char* kMlp[] = {"x", "norm_weight", "gate", "up", "down", "out"};
  static constexpr const char* kQkv[] = {"x", "norm_weight", "weight", "positions", "out", "-"};
  if (slot < 0 || slot >= kMaxCallOperands) return "-";
  switch (op) {
    case ARB_OP_GEMM: return kGemm[slot];
    case ARB_OP_RMSNORM: return kRmsNorm[slot];
    case ARB_OP_SOFTMAX: return kSoftmax[slot];
    case ARB_OP_SWIGLU: return kSwiglu[slot];
    case ARB_OP_ROPE: return kRope[slot];
    case ARB_OP_ATTENTION: return kAttention[slot];
    case ARB_OP_MLP: return kMlp[slot];
    case ARB_OP_QKV: return kQkv[slot];
    default: return "-";
  }
}

const char* op_name(int32_t op) {
  switch (op) {
    case ARB_OP_GEMM: return "gemm";
    case ARB_OP_RMSNORM: return "rmsnorm";
    case ARB_OP_SOFTMAX: return "softmax";
    case ARB_OP_SWIGLU: return "swiglu";
    case ARB_OP_ROPE: return "rope";
    case ARB_OP_ATTENTION: return "attention";
    case ARB_OP_MLP: return "mlp";
    case ARB_OP_QKV: return "qkv";
    default: return "unknown";
  }
}

}  // namespace arbiter::python
