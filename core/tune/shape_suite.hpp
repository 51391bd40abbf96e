// Shape suites (bench/suites/*.toml): named lists of problems taken from real models, each
// saying where it comes from, read by `arbiter verify|tune --suite`, arb_tune and the
// benchmarks. docs/suite-format.md describes the format.
#pragma once

#include "problem/problem_text.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

struct SuiteProblem {
  std::string text;  // as written in the suite
  ParsedProblem parsed;
  std::string origin;
};

struct ShapeSuite {
  std::string name, description, origin;
  std::vector<SuiteProblem> problems;
};

// Throws Failure (ARB_ERR_CONFIG for the file, ARB_ERR_INVALID_ARGUMENT for a problem) with
// the file, line and column.
ShapeSuite load_suite(const std::string& path);
// The same from the file's text; `source` names it in messages.
ShapeSuite parse_suite(std::string_view text, const std::string& source);

}  // namespace arbiter
