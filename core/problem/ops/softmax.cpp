// softmax: y = exp(x - max) / sum(exp(x - max)) per row.
#include "problem/ops/ops.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/row_op.hpp"

#include "common/failure.hpp"


namespace arbiter {
namespace {

class Softmax final : public RowOp {
 public:
  arb_op code() const override { return ARB_OP_SOFTMAX; }
  ProblemWords problem_words() const override { return kSoftmaxProblemWords; }
  const char* name() const override { return "softmax"; }

  std::string key_fields(const arb_problem& p) const override {
    return fmt::format("rows={} cols={} ldx={} ldy={}", p.rows, p.cols, p.ld_x, p.ld_y);
  }
  std::string class_fields(const arb_problem&) const override { return ""; }
  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override { read_rows(fields, parsed.problem); }

  // x and y.
  double bytes_moved(const arb_problem& p) const override {
    return 2.0 * static_cast<double>(p.rows) * static_cast<double>(p.cols) * static_cast<double>(dtype_size(p.dtype));
  }

  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    return {{"x", true, false, p.rows, p.cols, p.ld_x}, {"y", false, true, p.rows, p.cols, p.ld_y}};
  }

  // Logits far from zero (a kernel that skips the max subtraction overflows), and masked
  // positions with the special rows (input_draw.hpp).
  std::vector<InputDraw> hard_inputs(const arb_problem&) const override {
    InputDraw large{"logits of magnitude 100"};
    large.low_scale = large.high_scale = 100.0;
    InputDraw huge{"logits of magnitude 1e4"};
    huge.low_scale = huge.high_scale = 1e4;
    InputDraw masked{"a quarter of the logits -inf, special rows"};
    masked.masked = 0.25;
    masked.special_rows = true;
    InputDraw log_probabilities{"logits all negative (log-probabilities)"};
    log_probabilities.one_signed = "x";
    log_probabilities.negative = true;
    return {large, huge, masked, log_probabilities};
  }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_softmax_args*>(raw_args);
    check_args(args, "arb_softmax", ARB_SOFTMAX_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    check_tensor(args->x, "x", p);
    check_tensor(args->y, "y", p);
    bind_rows(args->x, args->y, call);
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
  }

  void plan_slots(const void* raw_args, const arb_problem&, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_softmax_args*>(raw_args);
    slots[0] = {"x", args->x, offsetof(arb_operands, x)};
    slots[1] = {"y", args->y, offsetof(arb_operands, y), true};
  }
};

}  // namespace

namespace {
constinit const Softmax kSoftmax;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& softmax_op() { return kSoftmax; }

}  // namespace arbiter
