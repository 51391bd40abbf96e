// Launch geometry as formulas of the problem, as a manifest writes it:
//   grid = ["ceil_div(n, 8)", "m"]    block = ["256"]    shared_bytes = "0"
// Integers, + - * / % (integer division), parentheses, ceil_div(a, b), min(a, b), max(a, b),
// and the problem's fields: m n k lda ldb ldc ldd rows cols ld_x ld_y ld_residual,
// dtype_bytes. Parsed once at load into a flat postfix program (no recursion at evaluation,
// however long the formula); evaluated at launch without allocating, every operation checked:
// a formula that overflows int64 or divides by zero for a problem has no value, and says why.
#pragma once

#include <arbiter/plugin.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace arbiter::generated {

class Formula {
 public:
  // Parentheses and calls nested deeper than this are refused at parse time: the parser
  // recurses once per level, and no launch formula needs more.
  static constexpr int kMaxNesting = 64;

  // Throws std::invalid_argument naming the position of the error: bad syntax, an unknown
  // name, a literal beyond int64, nesting deeper than kMaxNesting.
  static Formula parse(const std::string& text);

  // The value for the problem, or std::nullopt with `why` naming the formula, the operation
  // that overflowed int64 or divided by zero, and the values of the fields the formula uses.
  std::optional<int64_t> evaluate(const arb_problem& problem, std::string& why) const;
  // The same, throwing std::range_error with that message when there is no value.
  int64_t evaluate(const arb_problem& problem) const;

  const std::string& text() const { return text_; }

  // One step of the postfix program: push a number or a field, or combine the top two values.
  struct Step {
    enum Kind : uint8_t { number, field, dtype_bytes, add, sub, mul, div, mod, ceil_div, min, max } kind = number;
    int64_t value = 0;                      // number
    int64_t arb_problem::*member = nullptr;  // field
    uint32_t begin = 0, end = 0;            // the part of the text whose value this step leaves
  };

 private:
  std::string describe_failure(const Step& step, int64_t a, int64_t b, const char* failure,
                               const arb_problem& problem) const;

  std::string text_;
  std::vector<Step> steps_;   // empty only in a default-constructed formula, whose value is 0
  uint32_t fields_used_ = 0;  // a bit per field name, for error messages
};

// A launch's grid, block and dynamic shared memory, in the ranges CUDA accepts.
struct LaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  size_t shared_bytes = 0;
};

// What CUDA launches at most (the CUDA programming guide's limits for every architecture;
// shared memory: the most any GPU gives one block, sm_90's 227 KiB).
constexpr int64_t kMaxGrid[3] = {2147483647, 65535, 65535};
constexpr int64_t kMaxBlock[3] = {1024, 1024, 64};
constexpr int64_t kMaxBlockThreads = 1024;
constexpr int64_t kMaxSharedBytes = 227 * 1024;

// The launch the formulas give for a problem, or std::nullopt with `why`: a formula without a
// value (overflow, division by zero), a dimension below 1 or above CUDA's limit, more than
// 1024 threads in a block, shared_bytes negative or above 227 KiB.
std::optional<LaunchDims> launch_dims(const Formula (&grid)[3], const Formula (&block)[3], const Formula& shared_bytes,
                                      const arb_problem& problem, std::string& why);

}  // namespace arbiter::generated
