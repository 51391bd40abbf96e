// How the inputs of a made-up problem are drawn (docs/verification.md, "Inputs"). The gate
// runs every kernel on the two ordinary distributions and on the op's hard ones: large and
// small magnitudes, outliers, and the special values whose answer the op defines.
#pragma once

#include <algorithm>
#include <string_view>

namespace arbiter {

struct InputDraw {
  enum class Base { uniform, normal };  // uniform in [-1, 1]; standard normal
  const char* name = "uniform[-1,1]";
  Base base = Base::uniform;
  // Every row of every input is multiplied by its own magnitude, log-uniform in [low, high].
  double low_scale = 1.0, high_scale = 1.0;
  // One element in each row of each input becomes +-outlier (0: none).
  double outlier = 0.0;
  // A fraction of the elements becomes -inf (ops for which -inf is a meaningful input:
  // softmax's masked positions), and, given enough rows, one row is all -inf, one holds a
  // NaN and one a +inf (their answers are NaN: docs/verification.md, "Special values").
  double masked = 0.0;
  bool special_rows = false;
  // Operands drawn with one sign only (comma-separated names, "*" for every input): their
  // values' magnitudes, negated when `negative`. Real data often is (activations after a
  // ReLU, probabilities, log-probabilities), and a kernel may take a shortcut only then.
  const char* one_signed = "";
  bool negative = false;
  // Index operands (rope's positions) are drawn uniformly in [index_low * max_position,
  // max_position): 0.75 keeps them in the top quarter, where tables of angles must reach.
  double index_low = 0.0;
};

// Is `operand` among the draw's one-signed operands?
inline bool drawn_one_signed(const InputDraw& draw, std::string_view operand) {
  const std::string_view list = draw.one_signed;
  if (list == "*") return true;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    if (list.substr(at, end - at) == operand) return true;
    at = end + 1;
  }
  return false;
}

inline constexpr InputDraw kUniformInputs{};
inline constexpr InputDraw kNormalInputs{"normal", InputDraw::Base::normal};

// What a pure output holds before a launch: NaN poison shows an element the kernel did not
// write; zeros and random values show a kernel that writes only when it sees the poison.
enum class OutputFill { nan, zeros, random };
inline const char* output_fill_name(OutputFill fill) {
  return fill == OutputFill::nan ? "NaN-filled" : fill == OutputFill::zeros ? "zero-filled" : "randomly filled";
}

}  // namespace arbiter
