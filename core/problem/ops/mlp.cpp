// mlp: the MLP block of a Llama decoder layer, a composite op over rows x cols (hidden):
// y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight, with the weights as
// torch.nn.Linear stores them (gate and up [inter, cols], down [cols, inter]). Its kernels
// compete with the chain of the single ops (rmsnorm, gemm, swiglu, gemm) under one gate.
#include "problem/ops/ops.hpp"

#include "common/failure.hpp"
#include "problem/ops/chain_calls.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/shape_helpers.hpp"
#include "problem/ops/tensor_views.hpp"
#include "problem/problem.hpp"

#include <arbiter/float16.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

namespace arbiter {
namespace {

// Verification sizes: the fp64 reference costs 3 rows * cols * inter multiply-adds a trial.
constexpr int64_t kMaxVerifyRows = 16;
constexpr int64_t kMaxVerifyHidden = 256;
constexpr int64_t kMaxVerifyInter = 512;

class Mlp final : public Op {
 public:
  arb_op code() const override { return ARB_OP_MLP; }
  ProblemWords problem_words() const override { return kMlpProblemWords; }
  const char* name() const override { return "mlp"; }
  const std::vector<SizeField>& sizes() const override {
    static const std::vector<SizeField> fields = {
        {"rows", &arb_problem::rows}, {"hidden", &arb_problem::cols}, {"inter", &arb_problem::inter}};
    return fields;
  }

  std::string key_fields(const arb_problem& p) const override {
    return fmt::format("rows={} hidden={} inter={} ldx={} ldy={} ldgate={} ldup={} lddown={}", p.rows, p.cols,
                       p.inter, p.ld_x, p.ld_y, p.ld_gate, p.ld_up, p.ld_down);
  }
  std::string class_fields(const arb_problem&) const override { return ""; }

  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override {
    if (auto eps = fields.take_float("eps")) parsed.eps = *eps;
    if (!(parsed.eps >= 0.0f) || !std::isfinite(parsed.eps)) fields.bad(fmt::format("eps={} must be finite and >= 0", parsed.eps));
    arb_problem& p = parsed.problem;
    p.rows = fields.require_int("rows");
    p.cols = fields.require_int("hidden");
    p.inter = fields.require_int("inter");
    p.ld_x = fields.take_int("ldx", p.cols);
    p.ld_y = fields.take_int("ldy", p.cols);
    p.ld_gate = fields.take_int("ldgate", p.cols);
    p.ld_up = fields.take_int("ldup", p.cols);
    p.ld_down = fields.take_int("lddown", p.inter);
  }

  void validate(const arb_problem& p) const override {
    if (p.rows < 1 || p.cols < 1 || p.inter < 1)
      invalid_argument(fmt::format("mlp sizes must be >= 1 (rows={} hidden={} inter={})", p.rows, p.cols, p.inter));
    for (const StrideField& stride : strides(p)) check_row_stride(stride.name, p.*stride.member, stride.least);
  }

  // Three matrix products: 2 rows cols inter flops each (the norm and the activation are
  // not counted).
  double flops(const arb_problem& p) const override {
    return 6.0 * static_cast<double>(p.rows) * static_cast<double>(p.cols) * static_cast<double>(p.inter);
  }
  // The three weights, x, the norm's weight and y: at decode sizes the weights are all of it.
  double bytes_moved(const arb_problem& p) const override {
    const double weights = 3.0 * static_cast<double>(p.cols) * static_cast<double>(p.inter);
    const double rows = 2.0 * static_cast<double>(p.rows) * static_cast<double>(p.cols);
    return (weights + rows + static_cast<double>(p.cols)) * static_cast<double>(dtype_size(p.dtype));
  }
  double reference_cost(const arb_problem& p) const override { return flops(p) / 2; }
  // Each output sums inter products of activations that each summed cols.
  int64_t accumulated_terms(const arb_problem& p) const override { return p.cols + p.inter; }
  // The chain of single ops rounds n, both projections and the activation to the dtype. silu's
  // relative condition number is 1 + g (1 - sigmoid(g)): for a gate projection rounded at g
  // near -3 to -8 the activation carries 3 to 8 roundings' error, which the hard draws (weight
  // rows of very different sizes) make dominate y. Measured on chain.mlp over 80 verifications
  // (rows=4 hidden=64 inter=176): up to 1.8e-3 in f16 and 4.1e-2 in bf16; on the edge shape
  // 3 x 7 x 5 (one gate row can decide a y), over 100 to 200: up to 3e-3 in f16 and, with the
  // hard draws below, 3.7e-2 in bf16. So 6x and 8x a single sum's tolerance (6e-3, 6.4e-2);
  // f32's rounding stays at twice.
  double epilogue_error_factor(const arb_problem& p) const override {
    return p.dtype == ARB_DTYPE_BF16 ? 8.0 : p.dtype == ARB_DTYPE_F16 ? 6.0 : 2.0;
  }
  // y = x + the block's term: a y near zero by their cancellation is judged on |x| + the
  // term's scale (the block on absolute inputs would grow like hidden * inter: no scale of its
  // rounding).
  const char* residual_input() const override { return "x"; }
  // A chain of single ops rounds the projections and the activation to the dtype; silu
  // magnifies a rounded gate (its condition number reaches 8 near g = -8), and the down sum may
  // cancel those errors' terms into a small y - x: its scale is what it summed, |down| |h|.
  bool residual_term_scale(const arb_problem& p, const arb_operands& o, std::vector<double>& scale) const override {
    const auto at = [&](const void* base, int64_t i) { return static_cast<double>(load_float(base, i, p.dtype)); };
    std::vector<double> n(static_cast<size_t>(p.cols)), h(static_cast<size_t>(p.inter));
    scale.assign(static_cast<size_t>(p.rows * p.cols), 0.0);
    for (int64_t r = 0; r < p.rows; ++r) {
      double sum_sq = 0;
      for (int64_t c = 0; c < p.cols; ++c) {
        n[c] = at(o.x, r * p.ld_x + c);  // x's row first, then the norm of it
        sum_sq += n[c] * n[c];
      }
      const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(p.cols) + o.eps);
      for (int64_t c = 0; c < p.cols; ++c) n[c] = n[c] * inv * at(o.weight, c);
      for (int64_t j = 0; j < p.inter; ++j) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < p.cols; ++c) {
          g += at(o.gate, j * p.ld_gate + c) * n[c];
          u += at(o.up, j * p.ld_up + c) * n[c];
        }
        h[j] = std::fabs(g / (1.0 + std::exp(-g)) * u);
      }
      for (int64_t c = 0; c < p.cols; ++c) {
        double term = 0;
        for (int64_t j = 0; j < p.inter; ++j) term += std::fabs(at(o.down, c * p.ld_down + j)) * h[j];
        scale[r * p.cols + c] = std::fabs(at(o.x, r * p.ld_x + c)) + term;
      }
    }
    return true;
  }
  std::string scalars_text(const arb_operands& o) const override { return fmt::format("eps {:g}", o.eps); }

  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    return {{"x", true, false, p.rows, p.cols, p.ld_x},
            {"weight", true, false, 1, p.cols, p.cols},
            {"gate", true, false, p.inter, p.cols, p.ld_gate},
            {"up", true, false, p.inter, p.cols, p.ld_up},
            {"down", true, false, p.cols, p.inter, p.ld_down},
            {"y", false, true, p.rows, p.cols, p.ld_y}};
  }

  arb_problem resized(const arb_problem& p, const Sizes& s) const override {
    return resized_with_least_strides(*this, p, s);
  }

  Sizes verification_sizes(const arb_problem& p) const override {
    return {{shrink(p.rows, kMaxVerifyRows), shrink(p.cols, kMaxVerifyHidden), shrink(p.inter, kMaxVerifyInter)}};
  }

  std::vector<SizedShape> edge_shapes(const Sizes& v) const override {
    const int64_t rows = v.value[0], hidden = v.value[1], inter = v.value[2];
    return {{{{1, 1, 1}}, "edge: rows=hidden=inter=1"},
            {{{3, 7, 5}}, "edge: small primes 3x7x5"},
            {{{rows + 1, hidden + 1, inter + 1}}, "edge: one past the problem in every size"},
            {{{5, 33, 65}}, "edge: just over tiles of 32 and 64"},
            {{{1, hidden, inter}}, "edge: a single row (a decode step)"}};
  }

  std::vector<StrideField> strides(const arb_problem& p) const override {
    return {{"ldx", &arb_problem::ld_x, p.cols},
            {"ldy", &arb_problem::ld_y, p.cols},
            {"ldgate", &arb_problem::ld_gate, p.cols},
            {"ldup", &arb_problem::ld_up, p.cols},
            {"lddown", &arb_problem::ld_down, p.inter}};
  }

  // Rows of x of very different magnitudes (the norm takes them all to one scale; the
  // residual keeps theirs), outliers, and x non-negative. Every row of every input is
  // scaled, the weights' too: f16 stays where silu(gate) * up and the down sum fit it.
  // The magnitudes stop where an honest chain of single ops, rounding the gate projection to
  // the dtype, stays inside the tolerance: silu's condition number grows like |g| for negative
  // gates, so wide rows and outliers make a bf16 chain's rounding of g (2^-9) alone exceed 6%
  // (measured: 3 of 60 bf16 verifications of chain.mlp at 1e-2 to 1e2 and outliers of 30).
  // f16 also keeps silu(gate) * up and the down sum inside its range.
  std::vector<InputDraw> hard_inputs(const arb_problem& p) const override {
    const bool f16 = p.dtype == ARB_DTYPE_F16, bf16 = p.dtype == ARB_DTYPE_BF16;
    InputDraw scaled{f16 ? "rows of magnitude 0.25 to 2" : bf16 ? "rows of magnitude 0.25 to 4" : "rows of magnitude 1e-2 to 1e2"};
    scaled.low_scale = f16 || bf16 ? 0.25 : 1e-2;
    scaled.high_scale = f16 ? 2.0 : bf16 ? 4.0 : 1e2;
    InputDraw outliers{f16 ? "one element of magnitude 4 per row" : bf16 ? "one element of magnitude 8 per row"
                                                                        : "one element of magnitude 30 per row"};
    outliers.outlier = f16 ? 4.0 : bf16 ? 8.0 : 30.0;
    InputDraw positive{"x non-negative (a residual stream after a ReLU-like layer)"};
    positive.one_signed = "x";
    return {scaled, outliers, positive};
  }

  const char* example_fields() const override { return "rows=4 hidden=256 inter=688"; }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_mlp_args*>(raw_args);
    check_args(args, "arb_mlp", ARB_MLP_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    check_tensor(args->x, "x", p);
    check_tensor(args->norm_weight, "norm_weight", p);
    check_tensor(args->gate, "gate", p);
    if (args->up != nullptr) check_tensor(args->up, "up", p);
    check_tensor(args->down, "down", p);
    check_tensor(args->y, "y", p);
    if (!(args->eps >= 0.0f) || !std::isfinite(args->eps)) invalid_argument("eps must be finite and >= 0");
    if (args->reserved != 0) invalid_argument(fmt::format("reserved must be 0, got {}", args->reserved));

    const Matrix x = as_rows(args->x, "x");
    check_same_shape(args->y, "y", args->x, "x");
    const Matrix y = as_rows(args->y, "y");
    p.rows = x.rows;
    p.cols = x.cols;
    const Matrix weight = as_vector(args->norm_weight, "norm_weight", p.cols, "{} (the last dimension of x)");
    // Weights are matrices: a 3-D one is no batch here (as_matrix would call it a batched gemm).
    for (const auto& [t, name] : {std::pair{args->gate, "gate"}, std::pair{args->up, "up"}, std::pair{args->down, "down"}})
      if (t != nullptr && t->ndim != 2)
        invalid_argument(fmt::format("{} must be 2-D (a weight matrix), got {} dimensions", name, t->ndim));
    const bool fused = args->up == nullptr;
    const int64_t gate_rows = args->gate->shape[0];
    if (fused && gate_rows % 2 != 0)
      invalid_argument(fmt::format("gate: its first dimension ({}) must be even when up is NULL (the gate and up "
                                   "rows of one fused [2 inter, hidden] projection)", gate_rows));
    p.inter = fused ? gate_rows / 2 : gate_rows;
    const Matrix whole = as_matrix(args->gate, "gate", gate_rows, p.cols);
    Matrix gate = whole, up;
    if (fused) {
      // Each half spans its own inter rows: up keeps none of the whole's span past its end (an
      // output right after the fused weight is disjoint from it).
      const auto element = static_cast<int64_t>(dtype_size(p.dtype));
      gate.rows = p.inter;
      gate.bytes = static_cast<uint64_t>(((p.inter - 1) * whole.ld + p.cols) * element);
      up = gate;
      up.name = "up";
      up.data = static_cast<char*>(whole.data) + p.inter * whole.ld * element;
    } else {
      up = as_matrix(args->up, "up", p.inter, p.cols);
    }
    const Matrix down = as_matrix(args->down, "down", p.cols, p.inter);
    for (const Matrix* input : std::initializer_list<const Matrix*>{&x, &weight, &whole, &up, &down})
      check_disjoint(y, *input);

    p.ld_x = x.ld;
    p.ld_y = y.ld;
    p.ld_gate = gate.ld;
    p.ld_up = up.ld;
    p.ld_down = down.ld;
    arb_operands& o = call.operands;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.x = x.data;
    o.weight = weight.data;
    o.gate = gate.data;
    o.up = up.data;
    o.down = down.data;
    o.y = y.data;
    o.eps = args->eps;
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
  }

  // The chain: rmsnorm into n, the gate and up projections into one [rows, 2 inter] buffer
  // (one GEMM when the weights are the halves of one fused matrix, two otherwise), swiglu of its
  // halves into h, and the down projection with x as its C (beta 1): y = x + h down^T. Each
  // intermediate is stored in the dtype, as the single calls would have it.
  bool composite() const override { return true; }
  size_t chain_bytes(const arb_problem& p) const override {
    const size_t element = dtype_size(p.dtype);
    size_t total = 0;
    for (const int64_t cols : {p.cols, 2 * p.inter, p.inter}) {
      size_t bytes;
      if (__builtin_mul_overflow(static_cast<size_t>(p.rows), static_cast<size_t>(cols) * element, &bytes) ||
          __builtin_add_overflow(total, (bytes + 255) / 256 * 256, &total))
        return SIZE_MAX;
    }
    return total;
  }

  int chain_steps(const arb_problem& p, const arb_operands& o, void* intermediates, Call* steps) const override {
    const int64_t element = static_cast<int64_t>(dtype_size(p.dtype));
    char* normed = static_cast<char*>(intermediates);
    char* projected = normed + chain_region(p.rows * p.cols * element);
    char* activated = projected + chain_region(p.rows * 2 * p.inter * element);
    auto linear = [&](Call& call, const void* a, int64_t k, const void* weight, int64_t ld_weight, int64_t n, void* d,
                      int64_t ldd) { start_linear_step(call, p, p.rows, a, k, k, weight, ld_weight, n, d, ldd); };
    int count = 0;
    norm_step(steps[count++], p, o, normed);
    const bool one_weight = p.ld_up == p.ld_gate && static_cast<const char*>(o.up) ==
                                                        static_cast<const char*>(o.gate) + p.inter * p.ld_gate * element;
    if (one_weight) {
      linear(steps[count], normed, p.cols, o.gate, p.ld_gate, 2 * p.inter, projected, 2 * p.inter);
      finish_chain_step(steps[count++]);
    } else {
      linear(steps[count], normed, p.cols, o.gate, p.ld_gate, p.inter, projected, 2 * p.inter);
      finish_chain_step(steps[count++]);
      linear(steps[count], normed, p.cols, o.up, p.ld_up, p.inter, projected + p.inter * element, 2 * p.inter);
      finish_chain_step(steps[count++]);
    }
    {
      Call& call = steps[count++];
      start_chain_step(call, swiglu_op(), p);
      arb_problem& q = call.problem;
      q.rows = p.rows;
      q.cols = p.inter;
      q.ld_gate = q.ld_up = 2 * p.inter;
      q.ld_y = p.inter;
      call.operands.gate = projected;
      call.operands.up = projected + p.inter * element;
      call.operands.y = activated;
      finish_chain_step(call);
    }
    {
      Call& call = steps[count++];
      linear(call, activated, p.inter, o.down, p.ld_down, p.cols, o.y, p.ld_y);
      call.problem.has_c = 1;
      call.problem.ldc = p.ld_x;
      call.operands.c = o.x;
      call.operands.beta = 1.0f;
      finish_chain_step(call);
    }
    return count;
  }

  // A run's tensors in arb_mlp_args' order (six: a run reads tensors[5], since 1.8). With up
  // NULL, gate is the fused [2 inter, hidden] weight: the run takes up from each gate's address,
  // inter rows in, as build_call does, and checks y against the whole fused weight.
  void plan_slots(const void* raw_args, const arb_problem& p, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_mlp_args*>(raw_args);
    slots[0] = {"x", args->x, offsetof(arb_operands, x)};
    slots[1] = {"norm_weight", args->norm_weight, offsetof(arb_operands, weight)};
    slots[2] = {"gate", args->gate, offsetof(arb_operands, gate)};
    slots[3] = {"up", args->up, offsetof(arb_operands, up)};
    if (args->up == nullptr) {
      slots[3].derived_from = 2;
      slots[3].derived_bytes = static_cast<uint64_t>(p.inter * p.ld_gate) * dtype_size(p.dtype);
    }
    slots[4] = {"down", args->down, offsetof(arb_operands, down)};
    slots[5] = {"y", args->y, offsetof(arb_operands, y), true};
  }
};

}  // namespace

namespace {
constinit const Mlp kMlp;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& mlp_op() { return kMlp; }

}  // namespace arbiter
