// Host buffers for every operand of a problem, laid out as the problem says (row strides
// included), with random inputs and NaN-poisoned outputs. Used to run a problem on made-up
// data: `arbiter run`, the tests, and the verification gate.
#pragma once

#include "device/host_buffer.hpp"
#include "problem/input_draw.hpp"
#include "problem/op.hpp"
#include "problem/operand_fields.hpp"

#include <arbiter/plugin.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// The two ordinary ways of drawing inputs (input_draw.hpp has the others).
enum class Distribution {
  uniform,  // uniform in [-1, 1]
  normal    // standard normal
};
const char* distribution_name(Distribution distribution);
const InputDraw& input_draw(Distribution distribution);

// The arb_operands of a problem whose buffers `find(name)` returns (every name of
// kOperandFields; nullptr for absent ones). C is D when c_is_d.
template <typename Find>
arb_operands operands_by_name(const arb_problem& problem, Find&& find, float alpha, float beta, float eps) {
  arb_operands o{};
  o.struct_size = sizeof o;
  for (const OperandField& field : kOperandFields) operand_field(o, field) = find(field.name);
  if (problem.c_is_d) o.c = o.d;
  o.alpha = alpha;
  o.beta = beta;
  o.eps = eps;
  return o;
}

// The pointer operands_by_name put in `o` for `name` (nullptr for an absent one or name).
void* operand_pointer(const arb_operands& o, std::string_view name);

class ProblemBuffers {
 public:
  // One operand: its buffer and its rows x cols view with row stride ld (elements).
  struct Operand {
    std::string name;
    bool is_output = false;  // written by the kernel (d; y; x when a residual is fused)
    bool is_input = false;   // read by the kernel
    int64_t rows = 0, cols = 0, ld = 0;
    bool index = false;  // int32 indices (rope's positions), not values of the dtype
    HostBuffer buffer;
  };

  ProblemBuffers(const arb_problem& problem, float alpha, float beta, float eps);

  // Fills inputs with random values of the dtype and poisons pure outputs with NaN.
  void randomize(uint64_t seed, Distribution distribution = Distribution::uniform);
  // The same with any input draw, and pure outputs filled as `fill` says.
  void randomize(uint64_t seed, const InputDraw& draw, OutputFill fill);
  // New values for the interior of every input (all but the first and last quarter of each
  // row's columns; every element of rows shorter than 4): new data that a kernel replaying
  // results by a fingerprint of the edges would not notice.
  void redraw_interior(uint64_t seed, const InputDraw& draw);

  // Pointers to this object's buffers, for a launch.
  arb_operands operands() const;
  // The same inputs with every sign cleared, and |alpha|, |beta|: the reference on them is the
  // scale of the rounding error a correct kernel may make (verify/accuracy.hpp).
  ProblemBuffers absolute_values() const;
  // For an output that is `input` plus a term (Op::residual_input): a copy whose outputs hold
  // |input| + |output - input|, the two terms' sizes, element by element.
  ProblemBuffers residual_scale(const std::string& input) const;

  const arb_problem& problem() const { return problem_; }
  const std::vector<Operand>& all() const { return operands_; }
  std::byte* buffer_data(size_t index) { return operands_.at(index).buffer.data(); }
  const Operand* find(const std::string& name) const;

  // Element (r, c) of an operand, widened to double.
  double element(const Operand& operand, int64_t r, int64_t c) const;

 private:
  Operand& add(const OperandLayout& layout);
  size_t element_bytes(const Operand& operand) const { return operand_element_bytes(operand.index, problem_); }
  // Indices drawn uniformly in [draw.index_low * max_position, max_position).
  void draw_indices(Operand& operand, uint64_t seed, const InputDraw& draw);
  void* pointer(const std::string& name) const;

  arb_problem problem_;
  float alpha_, beta_, eps_;
  std::vector<Operand> operands_;
};

}  // namespace arbiter
