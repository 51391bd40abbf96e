// rope: rotary position embedding in place on x [tokens, heads, head_dim]. Each head's pairs
// (element i with i + head_dim/2 split-half, 2i with 2i + 1 interleaved) turn by the angle
// position * theta^(-2i / head_dim), the position an int32 per token.
#include "problem/ops/ops.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/rope_fields.hpp"
#include "problem/ops/shape_helpers.hpp"
#include "problem/ops/tensor_views.hpp"

#include "common/failure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace arbiter {
namespace {

// One token's heads, in elements: (heads - 1) * ld_head + head_dim. validate() checks it does
// not overflow; every other use comes after.
int64_t heads_span(const arb_problem& p) { return (p.heads - 1) * p.ld_head + p.cols; }

class Rope final : public Op {
 public:
  arb_op code() const override { return ARB_OP_ROPE; }
  const char* name() const override { return "rope"; }
  ProblemWords problem_words() const override { return kRopeProblemWords; }

  const std::vector<SizeField>& sizes() const override {
    static const std::vector<SizeField> fields = {
        {"tokens", &arb_problem::rows}, {"heads", &arb_problem::heads}, {"dim", &arb_problem::cols}};
    return fields;
  }

  void validate(const arb_problem& p) const override {
    if (p.rows < 1 || p.heads < 1 || p.cols < 2)
      invalid_argument(fmt::format("rope sizes must be tokens >= 1, heads >= 1, dim >= 2 (tokens={} heads={} dim={})",
                                   p.rows, p.heads, p.cols));
    if (p.cols % 2 != 0) invalid_argument(fmt::format("rope: dim = {} must be even (pairs of elements turn)", p.cols));
    check_row_stride("ldhead", p.ld_head, p.cols);
    int64_t span = 0;
    if (__builtin_mul_overflow(p.heads - 1, p.ld_head, &span) || __builtin_add_overflow(span, p.cols, &span))
      invalid_argument("rope: heads x ldhead overflows");
    check_row_stride("ldtoken", p.ld_x, span);
    validate_rope_fields(p, "rope");
  }

  std::string key_fields(const arb_problem& p) const override {
    return fmt::format("tokens={} heads={} dim={} layout={} theta={} maxpos={} ldhead={} ldtoken={}", p.rows, p.heads,
                       p.cols, rope_layout_name(p.rope_layout), p.rope_theta, p.max_position, p.ld_head, p.ld_x);
  }
  std::string class_fields(const arb_problem& p) const override {
    return fmt::format("layout={}", rope_layout_name(p.rope_layout));
  }

  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override {
    arb_problem& p = parsed.problem;
    p.rows = fields.require_int("tokens");
    p.heads = fields.require_int("heads");
    p.cols = fields.require_int("dim");
    read_rope_fields(fields, p);
    p.ld_head = fields.take_int("ldhead", p.cols);
    // The heads of a token side by side by default; a product that overflows is left for
    // validate() to name.
    int64_t packed = 0;
    if (__builtin_mul_overflow(p.heads, p.ld_head, &packed)) packed = INT64_MAX;
    p.ld_x = fields.take_int("ldtoken", packed);
  }

  // Bound by memory; each element is a sum of two products.
  double flops(const arb_problem&) const override { return 0; }
  int64_t accumulated_terms(const arb_problem&) const override { return 2; }
  // x read and written, one position per token.
  double bytes_moved(const arb_problem& p) const override {
    const double elements = static_cast<double>(p.rows) * static_cast<double>(p.heads) * static_cast<double>(p.cols);
    return 2.0 * elements * static_cast<double>(dtype_size(p.dtype)) + 4.0 * static_cast<double>(p.rows);
  }
  // A power, a sine and a cosine per pair in fp64: a few dozen multiply-adds each.
  double reference_cost(const arb_problem& p) const override {
    return static_cast<double>(p.rows) * static_cast<double>(p.heads) * static_cast<double>(p.cols) * 32;
  }

  // Angles computed as f32 products (rope_fields.hpp).
  double error_floor(const arb_problem& p) const override { return rope_angle_error_floor(p, p.cols); }

  // x as tokens rows of every head's elements (the gaps between heads included: a kernel
  // must leave them as they are), and the positions as one row of int32 indices.
  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    OperandLayout positions{"positions", true, false, 1, p.rows, p.rows};
    positions.index = true;
    return {{"x", true, true, p.rows, heads_span(p), p.ld_x}, positions};
  }

  arb_problem resized(const arb_problem& p, const Sizes& s) const override {
    arb_problem r = p;
    const size_t element = dtype_size(p.dtype);
    r.rows = s.value[0];
    r.heads = s.value[1];
    r.cols = s.value[2];
    r.ld_head = stride_with_alignment(r.cols, element, p.alignment);
    r.ld_x = r.heads * r.ld_head;
    r.alignment = stride_alignment(r);
    return r;
  }

  // Tokens and heads are independent rows: a few are enough; dim is where kernels vectorize.
  Sizes verification_sizes(const arb_problem& p) const override {
    return {{shrink(p.rows, 16), shrink(p.heads, 8), shrink(p.cols, 512)}};
  }

  std::vector<SizedShape> edge_shapes(const Sizes& v) const override {
    return {{{{1, 1, 2}}, "edge: one pair"},
            {{{3, 5, 6}}, "edge: small odd counts, three pairs"},
            {{{2, 3, v.value[2] + 2}}, "edge: one pair past the problem's dim"},
            {{{5, 2, 34}}, "edge: just over 32 elements a head"},
            {{{1, 1, 1022}}, "edge: just under 1024 elements a head"}};
  }

  // ldtoken's least is every head's span; tie_strides keeps it so after ldhead is drawn.
  std::vector<StrideField> strides(const arb_problem& p) const override {
    return {{"ldhead", &arb_problem::ld_head, p.cols}, {"ldtoken", &arb_problem::ld_x, p.heads * p.cols}};
  }
  void tie_strides(arb_problem& p) const override {
    if (p.ld_x < heads_span(p)) p.ld_x = p.heads * p.ld_head;  // ld_head's alignment, kept
  }

  // Positions near the top of the range (where f32 angles lose the most, and a table of
  // angles must reach), magnitudes far from 1, and rows of very different magnitudes.
  std::vector<InputDraw> hard_inputs(const arb_problem& p) const override {
    InputDraw late{"positions in the top quarter of [0, max_position)"};
    late.index_low = 0.75;
    InputDraw large{"x of magnitude 1e4"};
    large.low_scale = large.high_scale = p.dtype == ARB_DTYPE_F16 ? 1e3 : 1e4;
    InputDraw mixed{"rows of magnitude 1e-3 to 1e3"};
    mixed.low_scale = 1e-3;
    mixed.high_scale = 1e3;
    return {late, large, mixed};
  }

  const char* example_fields() const override { return "tokens=4 heads=8 dim=128"; }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_rope_args*>(raw_args);
    check_args(args, "arb_rope", ARB_ROPE_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    check_tensor(args->x, "x", p);
    const DLTensor* x = args->x;
    if (x->ndim < 3)
      invalid_argument(fmt::format("x must be [..., heads, head_dim] (at least 3 dimensions), got {}", x->ndim));
    const HeadView heads = as_heads(x);
    const Matrix positions = check_positions(args->positions, x, x->ndim - 2, p);
    if (args->reserved != 0) invalid_argument(fmt::format("reserved must be 0, got {}", args->reserved));
    check_disjoint(heads.whole, positions);
    p.rows = heads.whole.rows;
    p.heads = heads.heads;
    p.cols = heads.dim;
    p.ld_head = heads.ld_head;
    p.ld_x = heads.whole.ld;
    p.rope_theta = args->theta;
    p.max_position = args->max_position;
    p.rope_layout = args->layout;
    arb_operands& o = call.operands;
    o = arb_operands{};
    o.struct_size = sizeof o;
    o.x = heads.whole.data;
    o.positions = positions.data;
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
    if (p.device_type == kDLCPU) check_position_values(static_cast<const int32_t*>(o.positions), p);
  }

  void plan_slots(const void* raw_args, const arb_problem&, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_rope_args*>(raw_args);
    slots[0] = {"x", args->x, offsetof(arb_operands, x), true};
    slots[1] = {"positions", args->positions, offsetof(arb_operands, positions)};
  }

 private:
  // x as tokens (the leading dimensions, collapsed) by heads by head_dim, with the token and
  // head strides; `whole` spans every token's heads.
  struct HeadView {
    Matrix whole;
    int64_t heads, dim, ld_head;
  };

  static HeadView as_heads(const DLTensor* x) {
    const int last = x->ndim - 1;
    HeadView v{};
    v.dim = x->shape[last];
    v.heads = x->shape[last - 1];
    const bool strided = x->strides != nullptr;
    if (strided && v.dim > 1 && x->strides[last] != 1)
      invalid_argument(fmt::format("x: the last dimension must be contiguous (stride 1, got {})", x->strides[last]));
    v.ld_head = strided && v.heads > 1 ? x->strides[last - 1] : v.dim;
    if (v.ld_head < v.dim)
      invalid_argument(fmt::format("x: head stride {} is below head_dim {}", v.ld_head, v.dim));
    int64_t span = 0;  // one token's heads, in elements
    if (__builtin_mul_overflow(v.heads - 1, v.ld_head, &span) || __builtin_add_overflow(span, v.dim, &span))
      invalid_argument("x: its sizes and strides span more memory than an address can reach");
    // The leading dimensions as rows of `span` elements: a view of x whose last dimension is
    // one token's heads, collapsed by as_rows' rules.
    DLTensor tokens = *x;
    int64_t shape[16], strides[16];
    for (int i = 0; i < last - 1; ++i) {
      shape[i] = x->shape[i];
      strides[i] = strided ? x->strides[i] : 0;
    }
    shape[last - 1] = span;
    strides[last - 1] = 1;
    if (!strided) {  // compact: each token is heads * dim elements
      int64_t step = v.heads * v.dim;
      for (int i = last - 2; i >= 0; --i) {
        strides[i] = step;
        if (__builtin_mul_overflow(step, x->shape[i], &step))
          invalid_argument("x: the product of its sizes overflows");
      }
    }
    tokens.ndim = last;
    tokens.shape = shape;
    tokens.strides = strides;
    v.whole = as_rows(&tokens, "x");
    return v;
  }
};

}  // namespace

namespace {
constinit const Rope kRope;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& rope_op() { return kRope; }

}  // namespace arbiter
