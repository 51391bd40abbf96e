// Launch geometry as formulas of the problem, as a manifest writes it:
//   grid = ["ceil_div(n, 8)", "m"]    block = ["256"]    shared_bytes = "0"
// Integers, + - * / % (integer division), parentheses, ceil_div(a, b), min(a, b), max(a, b),
// and the problem's fields: m n k lda ldb ldc ldd rows cols ld_x ld_y ld_residual,
// dtype_bytes. Parsed once at load; evaluated at launch without allocating.
#pragma once

#include <arbiter/plugin.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace arbiter::generated {

class Formula {
 public:
  // Throws std::invalid_argument naming the position of the error.
  static Formula parse(const std::string& text);
  int64_t evaluate(const arb_problem& problem) const;
  const std::string& text() const { return text_; }

  struct Node;  // the parsed expression (launch_geometry.cpp)

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace arbiter::generated
