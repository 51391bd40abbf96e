// swiglu: y = silu(gate) * up elementwise over rows x cols, silu(g) = g / (1 + e^-g); gate
// and up either separate tensors or the two halves of one fused gate/up GEMM output.
#include "problem/ops/ops.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/row_op.hpp"

#include "common/failure.hpp"

#include <cstddef>

namespace arbiter {
namespace {

class Swiglu final : public RowOp {
 public:
  arb_op code() const override { return ARB_OP_SWIGLU; }
  const char* name() const override { return "swiglu"; }
  ProblemWords problem_words() const override { return kSwigluProblemWords; }

  // A fused gate/up output reads as ldgate = ldup = 2 cols (or its own row stride).
  std::string key_fields(const arb_problem& p) const override {
    return fmt::format("rows={} cols={} ldgate={} ldup={} ldy={}", p.rows, p.cols, p.ld_gate, p.ld_up, p.ld_y);
  }
  std::string class_fields(const arb_problem&) const override { return ""; }

  // fused=1 is a shorthand for the halves of one [rows, 2 cols] tensor: both strides 2 cols.
  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override {
    arb_problem& p = parsed.problem;
    p.rows = fields.require_int("rows");
    p.cols = fields.require_int("cols");
    const bool fused = fields.take_flag("fused");
    const int64_t halves = p.cols > INT64_MAX / 2 ? p.cols : 2 * p.cols;
    p.ld_gate = fields.take_int("ldgate", fused ? halves : p.cols);
    p.ld_up = fields.take_int("ldup", fused ? halves : p.cols);
    p.ld_y = fields.take_int("ldy", p.cols);
  }

  // Bound by memory, no reduction: each output is one product of two rounded inputs.
  int64_t accumulated_terms(const arb_problem&) const override { return 1; }
  double reference_cost(const arb_problem& p) const override {
    return static_cast<double>(p.rows) * static_cast<double>(p.cols) * 2;
  }
  // gate and up read, y written.
  double bytes_moved(const arb_problem& p) const override {
    return 3.0 * static_cast<double>(p.rows) * static_cast<double>(p.cols) * static_cast<double>(dtype_size(p.dtype));
  }

  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    return {{"gate", true, false, p.rows, p.cols, p.ld_gate},
            {"up", true, false, p.rows, p.cols, p.ld_up},
            {"y", false, true, p.rows, p.cols, p.ld_y}};
  }

  std::vector<StrideField> strides(const arb_problem& p) const override {
    return {{"ldgate", &arb_problem::ld_gate, p.cols}, {"ldup", &arb_problem::ld_up, p.cols}, {"ldy", &arb_problem::ld_y, p.cols}};
  }

  // Gates far from zero (e^-g overflows f32 below -88: a kernel computing e^g / (1 + e^g)
  // gets inf / inf), gates all negative (silu's small tail), and large products. f16 stays
  // within its range: |gate * up| <= 1e4.
  std::vector<InputDraw> hard_inputs(const arb_problem& p) const override {
    InputDraw large{"gate and up of magnitude 100"};
    large.low_scale = large.high_scale = 100.0;
    InputDraw huge{"gate and up of magnitude 1e4"};
    huge.low_scale = huge.high_scale = p.dtype == ARB_DTYPE_F16 ? 200.0 : 1e4;
    InputDraw negative{"gate all negative, magnitudes 1e-3 to 1e3"};
    negative.one_signed = "gate";
    negative.negative = true;
    negative.low_scale = 1e-3;
    negative.high_scale = p.dtype == ARB_DTYPE_F16 ? 60.0 : 1e3;
    return {large, huge, negative};
  }

  const char* example_fields() const override { return "rows=8 cols=1024"; }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_swiglu_args*>(raw_args);
    check_args(args, "arb_swiglu", ARB_SWIGLU_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    check_tensor(args->gate, "gate", p);
    if (args->up != nullptr) check_tensor(args->up, "up", p);
    check_tensor(args->y, "y", p);
    const Matrix whole = as_rows(args->gate, "gate");
    Matrix gate = whole, up;
    if (args->up != nullptr) {
      check_same_shape(args->up, "up", args->gate, "gate");
      up = as_rows(args->up, "up");
      check_same_shape(args->y, "y", args->gate, "gate");
    } else {
      // One [.., 2n] tensor: its halves, each n columns with the whole's row stride.
      if (whole.cols % 2 != 0)
        invalid_argument(fmt::format("gate: its last dimension ({}) must be even when up is NULL (the gate and up "
                                     "halves of one fused gate/up output)", whole.cols));
      check_half_shape(args->y, args->gate);
      gate.cols = up.cols = whole.cols / 2;
      up = gate;
      up.name = "up";
      up.data = static_cast<char*>(whole.data) + gate.cols * static_cast<int64_t>(dtype_size(p.dtype));
    }
    const Matrix y = as_rows(args->y, "y");
    check_disjoint(y, whole);
    if (args->up != nullptr) check_disjoint(y, up);
    p.rows = gate.rows;
    p.cols = gate.cols;
    p.ld_gate = gate.ld;
    p.ld_up = up.ld;
    p.ld_y = y.ld;
    arb_operands& o = call.operands;
    o = arb_operands{};
    o.struct_size = sizeof o;
    o.gate = gate.data;
    o.up = up.data;
    o.y = y.data;
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
  }

  // A run's up must be an address of its own: a plan of one fused tensor (up NULL) would
  // have to derive it from each run's gate. Its two halves as views plan the same problem.
  void plan_slots(const void* raw_args, const arb_problem&, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_swiglu_args*>(raw_args);
    if (args->up == nullptr)
      fail(ARB_ERR_UNSUPPORTED, "a swiglu plan takes gate and up as two tensors; for one fused gate/up output, pass "
                                "its two halves as views (gate = [..., :n], up = [..., n:], row stride 2n)");
    slots[0] = {"gate", args->gate, offsetof(arb_operands, gate)};
    slots[1] = {"up", args->up, offsetof(arb_operands, up)};
    slots[2] = {"y", args->y, offsetof(arb_operands, y), true};
  }

 private:
  // y of a fused call: gate's shape with its last dimension halved.
  static void check_half_shape(const DLTensor* y, const DLTensor* gate) {
    bool same = y->ndim == gate->ndim && y->ndim >= 1;
    for (int i = 0; same && i < y->ndim; ++i)
      same = y->shape[i] == (i + 1 == y->ndim ? gate->shape[i] / 2 : gate->shape[i]);
    if (!same) invalid_argument("y must have the shape of gate with its last dimension halved (up is NULL: gate holds both halves)");
  }
};

}  // namespace

namespace {
constinit const Swiglu kSwiglu;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& swiglu_op() { return kSwiglu; }

}  // namespace arbiter
