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

// Shard `index` (0-based) of `count` (`arbiter tune --shard=I/N`, docs/tuning.md): the
// problems' distinct keys (problem_key) sorted, the key of rank r going to shard r mod
// `count`, each problem with its key (so a key listed twice is tuned by one shard only), in
// the order of `problems`. The split depends on the set of keys, not on their order; the
// shards of one `count` are disjoint and together are `problems`; their numbers of distinct
// keys differ by at most one. Requires index < count.
std::vector<SuiteProblem> suite_shard(const std::vector<SuiteProblem>& problems, size_t index, size_t count);

}  // namespace arbiter
