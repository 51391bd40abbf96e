// The cheating gallery's verdicts, shared by the CPU gallery (fixtures/cheaters.cpp) and its
// CUDA form (fixtures/generated_cheaters): each cheat and the gate checks that must catch
// it, no more and no fewer. Checked on a tile-aligned problem (softmax f32 rows=4 cols=64),
// where only the edge shapes expose aligned_only.
#pragma once

#include <map>
#include <set>
#include <string>

namespace arbiter::test {

inline const std::map<std::string, std::set<std::string>>& cheater_expectations() {
  static const std::map<std::string, std::set<std::string>> expected = {
      {"writes_nothing", {"unwritten_output", "accuracy"}},
      {"writes_constant", {"accuracy"}},
      {"one_distribution", {"accuracy"}},
      {"aligned_only", {"unwritten_output", "accuracy"}},
      {"writes_past_end", {"guard"}},
      {"changes_input", {"input_modified"}},
      {"racy", {"rerun_differs"}},
      {"caches_by_pointer", {"stale_result"}},
      {"low_precision", {"accuracy"}},
  };
  return expected;
}

}  // namespace arbiter::test
