// rmsnorm: y = x / sqrt(mean(x^2) + eps) * weight per row; with a residual, x += residual
// first and the sum is written back to x.
#include "problem/ops/ops.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/row_op.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>


namespace arbiter {
namespace {

class RmsNorm final : public RowOp {
 public:
  arb_op code() const override { return ARB_OP_RMSNORM; }
  ProblemWords problem_words() const override { return kRmsNormProblemWords; }
  const char* name() const override { return "rmsnorm"; }

  std::string key_fields(const arb_problem& p) const override {
    std::string key =
        fmt::format("rows={} cols={} residual={} ldx={} ldy={}", p.rows, p.cols, p.has_residual, p.ld_x, p.ld_y);
    if (p.has_residual) key += fmt::format(" ldr={}", p.ld_residual);
    return key;
  }
  std::string class_fields(const arb_problem& p) const override { return fmt::format("residual={}", p.has_residual); }

  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override {
    if (auto eps = fields.take_float("eps")) parsed.eps = *eps;
    if (!(parsed.eps >= 0.0f)) fields.bad(fmt::format("eps={} must be >= 0", parsed.eps));
    arb_problem& p = parsed.problem;
    read_rows(fields, p);
    p.has_residual = fields.take_flag("residual");
    if (p.has_residual) p.ld_residual = fields.take_int("ldr", p.cols);
  }

  // x, weight, y; with a residual also the residual read and x written back.
  double bytes_moved(const arb_problem& p) const override {
    const double tile = static_cast<double>(p.rows) * static_cast<double>(p.cols);
    const double elements = 2.0 * tile + static_cast<double>(p.cols) + (p.has_residual ? 2.0 * tile : 0.0);
    return elements * static_cast<double>(dtype_size(p.dtype));
  }

  std::string scalars_text(const arb_operands& o) const override { return fmt::format("eps {:g}", o.eps); }

  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    const bool fused = p.has_residual != 0;
    std::vector<OperandLayout> out;
    out.push_back({"x", true, fused, p.rows, p.cols, p.ld_x});
    if (fused) out.push_back({"residual", true, false, p.rows, p.cols, p.ld_residual});
    out.push_back({"weight", true, false, 1, p.cols, p.cols});
    out.push_back({"y", false, true, p.rows, p.cols, p.ld_y});
    return out;
  }

  // Rows of very different magnitudes (eps matters for the small ones; a float sum of
  // squares must not overflow for the large: the largest magnitude keeps cols * x^2 within
  // f32), and outliers that a clipping kernel would miss. f16 inputs stay within its range.
  std::vector<InputDraw> hard_inputs(const arb_problem& p) const override {
    InputDraw scaled{"rows of magnitude 1e-4 to 1e18"};
    scaled.low_scale = 1e-4;
    const double f32_limit = std::sqrt(3.0e38 / (4.0 * static_cast<double>(std::max<int64_t>(p.cols, 1))));
    scaled.high_scale = p.dtype == ARB_DTYPE_F16 ? 100.0 : std::min(1e18, f32_limit);
    InputDraw outliers{"one element of magnitude 200 per row"};
    outliers.outlier = p.dtype == ARB_DTYPE_F16 ? 60.0 : 200.0;
    InputDraw positive{"x non-negative (activations after a ReLU)"};
    positive.one_signed = "x";
    return {scaled, outliers, positive};
  }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_rmsnorm_args*>(raw_args);
    check_args(args, "arb_rmsnorm", ARB_RMSNORM_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    check_tensor(args->x, "x", p);
    check_tensor(args->weight, "weight", p);
    check_tensor(args->y, "y", p);
    const auto [x, y] = bind_rows(args->x, args->y, call);
    const Matrix weight = as_vector(args->weight, "weight", p.cols, "{} (the last dimension of x)");
    check_disjoint(y, weight);
    if (!(args->eps >= 0.0f)) invalid_argument("eps must be >= 0");
    if (args->struct_size >= offsetof(arb_rmsnorm_args, reserved) + sizeof args->reserved && args->reserved != 0)
      invalid_argument(fmt::format("reserved must be 0, got {}", args->reserved));
    arb_operands& o = call.operands;
    o.weight = weight.data;
    o.eps = args->eps;
    if (args->residual != nullptr) {
      check_tensor(args->residual, "residual", p);
      check_same_shape(args->residual, "residual", args->x, "x");
      const Matrix r = as_rows(args->residual, "residual");
      check_disjoint(y, r);
      // x += residual is written in place: x is an output too.
      check_disjoint(x, r);
      check_disjoint(x, weight);
      p.has_residual = 1;
      p.ld_residual = r.ld;
      o.residual = r.data;
    }
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
  }

  void plan_slots(const void* raw_args, const arb_problem& p, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_rmsnorm_args*>(raw_args);
    slots[0] = {"x", args->x, offsetof(arb_operands, x), p.has_residual != 0};  // x += residual: written
    slots[1] = {"residual", p.has_residual ? args->residual : nullptr, offsetof(arb_operands, residual)};
    slots[2] = {"weight", args->weight, offsetof(arb_operands, weight)};
    slots[3] = {"y", args->y, offsetof(arb_operands, y), true};
  }
};

}  // namespace

namespace {
constinit const RmsNorm kRmsNorm;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& rmsnorm_op() { return kRmsNorm; }

}  // namespace arbiter
