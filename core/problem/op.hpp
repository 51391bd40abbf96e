// What the runtime knows about one op, in one place (docs/architecture.md, "Ops"): its
// name and sizes, its problem text, validation, cost, operand layout, the shapes the gate
// verifies it on, and how the C API's args struct becomes a problem. Everything outside
// core/problem/ops/ asks the op table (op_table.hpp) instead of branching on an op code;
// adding an op is one Op in core/problem/ops/, its line in op_table.cpp, and its kernels.
#pragma once

#include "problem/input_draw.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"

#include <arbiter/arbiter.h>
#include <arbiter/plugin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace arbiter {

// A problem and the data of one call, as the C API builds them from an args struct.
struct Call {
  arb_problem problem;
  arb_operands operands;
};

// One tensor of a plan's runs (arb_plan_operands.tensors[i]), in the order of the op's args
// struct. name is null past the op's last tensor; tensor is null when the problem does not
// use it (no bias, beta = 0, no residual).
struct PlanSlot {
  const char* name = nullptr;
  const DLTensor* tensor = nullptr;  // as given at the plan's creation
  size_t offset = 0;                 // of its address in arb_operands
  bool output = false;               // written by the op
  int same_as = -1;                  // the slot whose memory it must be (gemm in place: c is d), or -1
  // A slot the run leaves NULL whose address the op still has: derived_bytes past slot
  // derived_from's address (mlp's up in a fused gate/up weight), stored at `offset`; or -1.
  int derived_from = -1;
  uint64_t derived_bytes = 0;
};
using PlanSlots = std::array<PlanSlot, ARB_PLAN_MAX_TENSORS>;

// One size of a problem (m, rows...). Override ranges, the nearest-shape distance and the
// verification shapes range over an op's sizes, in this order.
struct SizeField {
  const char* name;
  int64_t arb_problem::*member;
};
inline constexpr size_t kMaxSizes = 6;

// One size per SizeField, in the op's order.
struct Sizes {
  int64_t value[kMaxSizes] = {};
};

// One row stride of a problem (elements), and the least it may be: its operand's columns.
struct StrideField {
  const char* name;
  int64_t arb_problem::*member;
  int64_t least;
};

// A problem's sizes for verification, with what the shape is for ("edge: a single row").
struct SizedShape {
  Sizes sizes;
  std::string label;
};

// An operand as the kernel sees it in memory: rows x cols with row stride ld (elements).
struct OperandLayout {
  const char* name;  // the arb_operands field it is passed in
  bool input;        // read by the kernel
  bool output;       // written by the kernel
  int64_t rows, cols, ld;
  // int32 indices (rope's positions), drawn in [0, max_position), rather than values of the
  // problem's dtype.
  bool index = false;
};

// Bytes per element of an operand: 4 for indices, the problem's dtype otherwise.
inline size_t operand_element_bytes(bool index, const arb_problem& problem) {
  return index ? sizeof(int32_t) : dtype_size(problem.dtype);
}

class Op {
 public:
  virtual ~Op() = default;

  virtual arb_op code() const = 0;
  virtual const char* name() const = 0;
  virtual const std::vector<SizeField>& sizes() const = 0;

  // The words of arb_problem the op's problems may set (problem.hpp): the header and the op's
  // fields (problem_words.hpp). Every other word of its problems is zero, and the selection
  // cache hashes and compares these alone.
  virtual ProblemWords problem_words() const = 0;

  // Fields beyond the zero fill that every problem of the op has (gemm: batch = 1).
  virtual void set_defaults(arb_problem&) const {}

  // Problem text (docs/problem-syntax.md): the op's fields of the canonical key (between the
  // dtype and "align="), of the class key (no sizes, no strides), and the reading of them.
  // read_fields takes every field it knows from `fields` and sets the problem's strides (a
  // new row-stride field of arb_problem also goes into stride_alignment, problem.cpp).
  virtual std::string key_fields(const arb_problem& problem) const = 0;
  virtual std::string class_fields(const arb_problem& problem) const = 0;
  virtual void read_fields(ProblemFields& fields, ParsedProblem& parsed) const = 0;

  // Throws Failure(ARB_ERR_INVALID_ARGUMENT) if a field of the op is out of range.
  virtual void validate(const arb_problem& problem) const = 0;

  // Cost (problem_cost.hpp): math flops (0 for ops bound by memory), the bytes every kernel
  // must move, and the fp64 reference's work in multiply-adds (what verification can afford).
  virtual double flops(const arb_problem& problem) const = 0;
  virtual double bytes_moved(const arb_problem& problem) const = 0;
  virtual double reference_cost(const arb_problem& problem) const = 0;

  // Rounding exposure (the tolerance model, verify/accuracy.hpp): how many terms each output
  // element sums (gemm k; a row's cols for rmsnorm and softmax), and by how much an epilogue
  // can widen the sum's relative error (1: none).
  virtual int64_t accumulated_terms(const arb_problem& problem) const = 0;
  virtual double epilogue_error_factor(const arb_problem&) const { return 1.0; }
  // A floor under the tolerance for error that honest f32 math makes beyond the sum (rope:
  // angles computed as f32 products); 0 for none.
  virtual double error_floor(const arb_problem&) const { return 0.0; }
  // A result near zero by cancellation is judged against a scale of its rounding error
  // (verify/accuracy.hpp): the op on its inputs' absolute values, or, for an op whose output is
  // this input plus a term (mlp: y = x + the block's), |input| + |output - input|, the terms'
  // own sizes. nullptr: the former. (A chain with a nonlinearity on absolute inputs grows like
  // the product of its sums' lengths: no scale of anything.)
  virtual const char* residual_input() const { return nullptr; }
  // With residual_input: the term's own scale, per output element (rows x cols, row-major):
  // the magnitudes of the products its last sum adds (mlp: |down| |h|, h computed in fp64 from
  // the inputs), so that the term's cancellation inside that sum is judged on what was summed.
  // false: |output - input| stands in for it.
  virtual bool residual_term_scale(const arb_problem&, const arb_operands&, std::vector<double>&) const { return false; }

  // The operands of a problem, in the order the buffers are laid out.
  virtual std::vector<OperandLayout> operands(const arb_problem& problem) const = 0;

  // Verification: a problem with new sizes and the smallest row strides that keep its
  // alignment class; the problem's own sizes brought down to what the reference affords;
  // and the edge shapes around those.
  virtual arb_problem resized(const arb_problem& problem, const Sizes& sizes) const = 0;
  virtual Sizes verification_sizes(const arb_problem& problem) const = 0;
  virtual std::vector<SizedShape> edge_shapes(const Sizes& verified) const = 0;
  // The row strides the gate draws independently (verification_shapes.cpp); tie_strides
  // then restores the ones the problem ties together (gemm in place: ldc = ldd).
  virtual std::vector<StrideField> strides(const arb_problem& problem) const = 0;
  virtual void tie_strides(arb_problem&) const {}
  // Input draws beyond the two ordinary ones (input_draw.hpp) that the gate runs kernels
  // on: the magnitudes and special values where kernels of this op go wrong.
  virtual std::vector<InputDraw> hard_inputs(const arb_problem& problem) const = 0;

  // An ordinary problem of the op in problem text after "<op> <dtype>", for trying a kernel
  // that claims no shapes of its own.
  virtual const char* example_fields() const = 0;

  // The scalars of arb_operands the op reads, as text for reports ("alpha 1 beta 0.5"; ""
  // for none).
  virtual std::string scalars_text(const arb_operands&) const { return ""; }

  // The C API: `args` points to the op's args struct (arbiter.h). Throws Failure naming the
  // argument at fault.
  virtual void build_call(const void* args, Call& call) const = 0;
  // A plan's tensors, from the same args once build_call has accepted them (plan.hpp).
  virtual void plan_slots(const void* args, const arb_problem& problem, PlanSlots& slots) const = 0;

  // A composite op (mlp) is also the chain of single-op calls that computes it, and that chain
  // competes with its fused kernels (core/composite/chain_plugin.hpp). chain_bytes: the
  // intermediates the chain keeps between its calls (SIZE_MAX past the address space).
  // chain_steps writes the calls, in order, over `intermediates` (chain_bytes of them,
  // 256-byte aligned), into steps (room for kMaxChainSteps) and returns how many.
  static constexpr int kMaxChainSteps = 5;
  virtual bool composite() const { return false; }
  virtual size_t chain_bytes(const arb_problem&) const { return 0; }
  virtual int chain_steps(const arb_problem&, const arb_operands&, void* /*intermediates*/, Call* /*steps*/) const {
    return 0;
  }
};

}  // namespace arbiter
