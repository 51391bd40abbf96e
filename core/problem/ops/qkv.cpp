// qkv: the input of a Llama attention block, a composite op over rows x cols (hidden):
// n = rmsnorm(x) * weight, y = n W^T with W the fused QKV projection [(heads + 2 kv_heads)
// head_dim, cols] as torch.nn.Linear stores it, then rope on y's q and k heads in place. y holds
// q, k and v side by side ([rows, heads + 2 kv_heads, head_dim]), as vLLM's qkv_proj output
// does: the caller takes q, k and v as views. Its kernels compete with the chain of the single
// ops (rmsnorm, gemm, rope on q, rope on k) under one gate.
#include "problem/ops/ops.hpp"

#include "common/failure.hpp"
#include "problem/ops/chain_calls.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/rope_fields.hpp"
#include "problem/ops/shape_helpers.hpp"
#include "problem/ops/tensor_views.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace arbiter {
namespace {

// y's heads: q's, then k's and v's.
int64_t total_heads(const arb_problem& p) { return p.heads + 2 * p.kv_heads; }
// y's columns, the projection's outputs. validate() checks that it does not overflow.
int64_t projected_cols(const arb_problem& p) { return total_heads(p) * p.head_dim; }

class Qkv final : public Op {
 public:
  arb_op code() const override { return ARB_OP_QKV; }
  ProblemWords problem_words() const override { return kQkvProblemWords; }
  const char* name() const override { return "qkv"; }
  const std::vector<SizeField>& sizes() const override {
    static const std::vector<SizeField> fields = {{"rows", &arb_problem::rows},
                                                  {"hidden", &arb_problem::cols},
                                                  {"heads", &arb_problem::heads},
                                                  {"kvheads", &arb_problem::kv_heads},
                                                  {"dim", &arb_problem::head_dim}};
    return fields;
  }

  std::string key_fields(const arb_problem& p) const override {
    return fmt::format("rows={} hidden={} heads={} kvheads={} dim={} layout={} theta={} maxpos={} ldx={} ldw={} ldy={}",
                       p.rows, p.cols, p.heads, p.kv_heads, p.head_dim, rope_layout_name(p.rope_layout), p.rope_theta,
                       p.max_position, p.ld_x, p.ld_w, p.ld_y);
  }
  std::string class_fields(const arb_problem& p) const override {
    return fmt::format("layout={}", rope_layout_name(p.rope_layout));
  }

  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override {
    if (auto eps = fields.take_float("eps")) parsed.eps = *eps;
    if (!(parsed.eps >= 0.0f) || !std::isfinite(parsed.eps)) fields.bad(fmt::format("eps={} must be finite and >= 0", parsed.eps));
    arb_problem& p = parsed.problem;
    p.rows = fields.require_int("rows");
    p.cols = fields.require_int("hidden");
    p.heads = fields.require_int("heads");
    p.kv_heads = fields.take_int("kvheads", p.heads);
    p.head_dim = fields.require_int("dim");
    read_rope_fields(fields, p);
    p.ld_x = fields.take_int("ldx", p.cols);
    p.ld_w = fields.take_int("ldw", p.cols);
    // A product that overflows is left for validate() to name.
    int64_t packed = 0;
    if (__builtin_mul_overflow(p.heads + 2 * p.kv_heads, p.head_dim, &packed)) packed = INT64_MAX;
    p.ld_y = fields.take_int("ldy", packed);
  }

  void validate(const arb_problem& p) const override {
    if (p.rows < 1 || p.cols < 1 || p.heads < 1 || p.kv_heads < 1 || p.head_dim < 2)
      invalid_argument(fmt::format("qkv sizes must be rows, hidden, heads, kvheads >= 1 and dim >= 2 (rows={} hidden={} "
                                   "heads={} kvheads={} dim={})", p.rows, p.cols, p.heads, p.kv_heads, p.head_dim));
    if (p.head_dim % 2 != 0) invalid_argument(fmt::format("qkv: dim = {} must be even (rope turns pairs)", p.head_dim));
    int64_t heads = 0, cols = 0;
    if (__builtin_mul_overflow(p.kv_heads, 2, &heads) || __builtin_add_overflow(heads, p.heads, &heads) ||
        __builtin_mul_overflow(heads, p.head_dim, &cols))
      invalid_argument("qkv: (heads + 2 kvheads) x dim overflows");
    for (const StrideField& stride : strides(p)) check_row_stride(stride.name, p.*stride.member, stride.least);
    validate_rope_fields(p, "qkv");
  }

  // The projection: 2 rows cols outputs flops (the norm and rope are not counted).
  double flops(const arb_problem& p) const override {
    return 2.0 * static_cast<double>(p.rows) * static_cast<double>(p.cols) * static_cast<double>(projected_cols(p));
  }
  // W, x, the norm's weight, y and the positions: at decode sizes W is all of it.
  double bytes_moved(const arb_problem& p) const override {
    const double out = static_cast<double>(projected_cols(p));
    const double elements = out * static_cast<double>(p.cols) + static_cast<double>(p.rows) * (static_cast<double>(p.cols) + out) +
                            static_cast<double>(p.cols);
    return elements * static_cast<double>(dtype_size(p.dtype)) + 4.0 * static_cast<double>(p.rows);
  }
  double reference_cost(const arb_problem& p) const override { return flops(p) / 2; }
  // Each output sums cols products of n.
  int64_t accumulated_terms(const arb_problem& p) const override { return p.cols; }
  // The chain rounds n and the projection to the dtype before rope turns (and rounds) it again.
  double epilogue_error_factor(const arb_problem& p) const override { return p.dtype == ARB_DTYPE_F32 ? 2.0 : 3.0; }
  // Angles computed as f32 products (rope_fields.hpp).
  double error_floor(const arb_problem& p) const override { return rope_angle_error_floor(p, p.head_dim); }
  std::string scalars_text(const arb_operands& o) const override { return fmt::format("eps {:g}", o.eps); }

  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    OperandLayout positions{"positions", true, false, 1, p.rows, p.rows};
    positions.index = true;
    return {{"x", true, false, p.rows, p.cols, p.ld_x},
            {"weight", true, false, 1, p.cols, p.cols},
            {"b", true, false, projected_cols(p), p.cols, p.ld_w},
            positions,
            {"y", false, true, p.rows, projected_cols(p), p.ld_y}};
  }

  arb_problem resized(const arb_problem& p, const Sizes& s) const override {
    return resized_with_least_strides(*this, p, s);
  }

  // The reference costs rows * cols * (heads + 2 kv_heads) * dim multiply-adds a trial.
  Sizes verification_sizes(const arb_problem& p) const override {
    return {{shrink(p.rows, 16), shrink(p.cols, 256), shrink(p.heads, 8), shrink(p.kv_heads, 4), shrink(p.head_dim, 64)}};
  }

  std::vector<SizedShape> edge_shapes(const Sizes& v) const override {
    const int64_t rows = v.value[0], hidden = v.value[1], heads = v.value[2], kv = v.value[3], dim = v.value[4];
    return {{{{1, 1, 1, 1, 2}}, "edge: one pair a head, one head each"},
            {{{3, 7, 3, 1, 6}}, "edge: small primes, three pairs a head"},
            {{{rows + 1, hidden + 1, heads, kv, dim + 2}}, "edge: one past the problem's rows, hidden and pairs"},
            {{{5, 33, 2, 2, 34}}, "edge: just over 32 elements a row and a head"},
            {{{1, hidden, heads, kv, dim}}, "edge: a single row (a decode step)"}};
  }

  std::vector<StrideField> strides(const arb_problem& p) const override {
    return {{"ldx", &arb_problem::ld_x, p.cols}, {"ldw", &arb_problem::ld_w, p.cols},
            {"ldy", &arb_problem::ld_y, projected_cols(p)}};
  }

  // Rows of x of very different magnitudes (the norm takes them to one scale), positions near
  // the top of the range (where f32 angles lose the most), outliers.
  std::vector<InputDraw> hard_inputs(const arb_problem& p) const override {
    const bool narrow = p.dtype != ARB_DTYPE_F32;
    InputDraw scaled{narrow ? "rows of magnitude 0.25 to 4" : "rows of magnitude 1e-2 to 1e2"};
    scaled.low_scale = narrow ? 0.25 : 1e-2;
    scaled.high_scale = narrow ? 4.0 : 1e2;
    InputDraw late{"positions in the top quarter of [0, max_position)"};
    late.index_low = 0.75;
    InputDraw outliers{narrow ? "one element of magnitude 8 per row" : "one element of magnitude 30 per row"};
    outliers.outlier = narrow ? 8.0 : 30.0;
    return {scaled, late, outliers};
  }

  const char* example_fields() const override { return "rows=4 hidden=256 heads=4 kvheads=2 dim=32"; }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_qkv_args*>(raw_args);
    check_args(args, "arb_qkv", ARB_QKV_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    check_tensor(args->x, "x", p);
    check_tensor(args->norm_weight, "norm_weight", p);
    check_tensor(args->weight, "weight", p);
    check_tensor(args->y, "y", p);
    if (!(args->eps >= 0.0f) || !std::isfinite(args->eps)) invalid_argument("eps must be finite and >= 0");
    if (args->heads < 1 || args->kv_heads < 1)
      invalid_argument(fmt::format("heads ({}) and kv_heads ({}) must be >= 1", args->heads, args->kv_heads));

    const Matrix x = as_rows(args->x, "x");
    p.rows = x.rows;
    p.cols = x.cols;
    p.heads = args->heads;
    p.kv_heads = args->kv_heads;
    const Matrix norm_weight = as_vector(args->norm_weight, "norm_weight", p.cols, "{} (the last dimension of x)");
    const Matrix y = as_heads_side_by_side(args->y, args->x, p);
    if (args->weight->ndim != 2)
      invalid_argument(fmt::format("weight must be 2-D (the fused QKV projection), got {} dimensions", args->weight->ndim));
    const Matrix weight = as_matrix(args->weight, "weight", projected_cols(p), p.cols);
    const Matrix positions = check_positions(args->positions, args->x, args->x->ndim - 1, p);
    for (const Matrix* input : std::initializer_list<const Matrix*>{&x, &norm_weight, &weight, &positions})
      check_disjoint(y, *input);

    p.ld_x = x.ld;
    p.ld_y = y.ld;
    p.ld_w = weight.ld;
    p.rope_theta = args->theta;
    p.max_position = args->max_position;
    p.rope_layout = args->layout;
    arb_operands& o = call.operands;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.x = x.data;
    o.weight = norm_weight.data;
    o.b = weight.data;
    o.positions = positions.data;
    o.y = y.data;
    o.eps = args->eps;
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
    if (p.device_type == kDLCPU) check_position_values(static_cast<const int32_t*>(o.positions), p);
  }

  void plan_slots(const void* raw_args, const arb_problem&, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_qkv_args*>(raw_args);
    slots[0] = {"x", args->x, offsetof(arb_operands, x)};
    slots[1] = {"norm_weight", args->norm_weight, offsetof(arb_operands, weight)};
    slots[2] = {"weight", args->weight, offsetof(arb_operands, b)};
    slots[3] = {"positions", args->positions, offsetof(arb_operands, positions)};
    slots[4] = {"y", args->y, offsetof(arb_operands, y), true};
  }

  // The chain: rmsnorm into n, the projection straight into y (one GEMM by the fused weight),
  // then rope in place on y's q heads and on its k heads. n is stored in the dtype, as the
  // single calls would have it.
  bool composite() const override { return true; }
  size_t chain_bytes(const arb_problem& p) const override {
    size_t bytes;
    if (__builtin_mul_overflow(static_cast<size_t>(p.rows), static_cast<size_t>(p.cols) * dtype_size(p.dtype), &bytes) ||
        bytes > SIZE_MAX - 255)
      return SIZE_MAX;
    return (bytes + 255) / 256 * 256;
  }

  int chain_steps(const arb_problem& p, const arb_operands& o, void* intermediates, Call* steps) const override {
    const int64_t element = static_cast<int64_t>(dtype_size(p.dtype));
    void* normed = intermediates;
    int count = 0;
    norm_step(steps[count++], p, o, normed);
    start_linear_step(steps[count], p, p.rows, normed, p.cols, p.cols, o.b, p.ld_w, projected_cols(p), o.y, p.ld_y);
    finish_chain_step(steps[count++]);
    // q's heads from y's first column, then k's.
    for (const auto& [first_head, heads] : {std::pair{int64_t{0}, p.heads}, std::pair{p.heads, p.kv_heads}}) {
      Call& call = steps[count++];
      start_chain_step(call, rope_op(), p);
      arb_problem& q = call.problem;
      q.rows = p.rows;
      q.heads = heads;
      q.cols = p.head_dim;
      q.ld_head = p.head_dim;
      q.ld_x = p.ld_y;
      q.rope_theta = p.rope_theta;
      q.rope_layout = p.rope_layout;
      q.max_position = p.max_position;
      call.operands.x = static_cast<char*>(o.y) + first_head * p.head_dim * element;
      call.operands.positions = o.positions;
      finish_chain_step(call);
    }
    return count;
  }

 private:
  // y: x's leading shape, then [heads + 2 kv_heads, head_dim] with the heads side by side
  // (head stride head_dim, the last dimension contiguous), viewed as rows of every head.
  static Matrix as_heads_side_by_side(const DLTensor* y, const DLTensor* x, arb_problem& p) {
    const int last = y->ndim - 1;
    bool same = y->ndim == x->ndim + 1;
    for (int i = 0; same && i < x->ndim - 1; ++i) same = y->shape[i] == x->shape[i];
    if (!same)
      invalid_argument(fmt::format("y must be [..., heads + 2 kv_heads, head_dim] with x's leading shape ({} dimensions), "
                                   "got {} dimensions", x->ndim + 1, y->ndim));
    if (y->shape[last - 1] != p.heads + 2 * p.kv_heads)
      invalid_argument(fmt::format("y: its second-to-last dimension ({}) must be heads + 2 kv_heads = {}",
                                   y->shape[last - 1], p.heads + 2 * p.kv_heads));
    p.head_dim = y->shape[last];
    if (p.head_dim < 2 || p.head_dim % 2 != 0)
      invalid_argument(fmt::format("y: head_dim (its last dimension, {}) must be even and >= 2", p.head_dim));
    if (y->strides != nullptr && ((y->strides[last] != 1) || (y->shape[last - 1] > 1 && y->strides[last - 1] != p.head_dim)))
      invalid_argument("y: the heads must lie side by side (head stride head_dim, the last dimension contiguous)");
    int64_t cols = 0;
    if (__builtin_mul_overflow(y->shape[last - 1], p.head_dim, &cols))
      invalid_argument("y: (heads + 2 kv_heads) x head_dim overflows");
    // The leading dimensions as rows of every head's elements, collapsed by as_rows' rules.
    DLTensor rows = *y;
    int64_t shape[16], strides[16];
    if (last > 16) invalid_argument(fmt::format("y: {} dimensions, more than arbiter reads", y->ndim));
    int64_t step = cols;
    for (int i = last - 2; i >= 0; --i) {
      shape[i] = y->shape[i];
      strides[i] = y->strides != nullptr ? y->strides[i] : step;
      if (y->strides == nullptr && __builtin_mul_overflow(step, y->shape[i], &step))
        invalid_argument("y: the product of its sizes overflows");
    }
    shape[last - 1] = cols;
    strides[last - 1] = 1;
    rows.ndim = last;
    rows.shape = shape;
    rows.strides = strides;
    return as_rows(&rows, "y");
  }
};

}  // namespace

namespace {
constinit const Qkv kQkv;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& qkv_op() { return kQkv; }

}  // namespace arbiter
