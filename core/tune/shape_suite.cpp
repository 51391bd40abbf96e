#include "tune/shape_suite.hpp"

#include "common/failure.hpp"
#include "common/text_file.hpp"
#include "config/toml_section.hpp"
#include "problem/problem.hpp"

#include <algorithm>

namespace arbiter {

ShapeSuite load_suite(const std::string& path) {
  return parse_suite(read_text_file(path, "suite file", ARB_ERR_CONFIG), path);
}

ShapeSuite parse_suite(std::string_view text, const std::string& path) {
  const toml::table document = parse_toml(text, path, ARB_ERR_CONFIG);
  ShapeSuite suite;
  Section root(document, "", path, ARB_ERR_CONFIG);
  suite.name = root.required_string("name");
  suite.description = root.string("description").value_or("");
  suite.origin = root.string("origin").value_or("");
  if (const toml::node* node = root.find("problem")) {
    const toml::array* problems = node->as_array();
    if (problems == nullptr) root.wrong_type(*node, "problem", "an array of tables ([[problem]])");
    for (const toml::node& item : *problems) {
      if (!item.is_table()) root.wrong_type(item, "problem", "an array of tables ([[problem]])");
      Section s(*item.as_table(), "problem", path, ARB_ERR_CONFIG);
      SuiteProblem p;
      p.text = s.required_string("problem");
      p.origin = s.string("origin").value_or("");
      try {
        p.parsed = parse_problem(p.text);
      } catch (const Failure& f) {
        fail(ARB_ERR_INVALID_ARGUMENT, toml_position(path, s.find("problem")->source().begin) + ": " + f.what());
      }
      s.finish();
      suite.problems.push_back(std::move(p));
    }
  }
  root.finish();
  if (suite.problems.empty()) fail(ARB_ERR_CONFIG, path + ": the suite has no [[problem]]");
  return suite;
}

std::vector<SuiteProblem> suite_shard(const std::vector<SuiteProblem>& problems, size_t index, size_t count) {
  if (count == 0 || index >= count) fail(ARB_ERR_INVALID_ARGUMENT, "a shard index must be below the number of shards");
  std::vector<std::string> keys;
  keys.reserve(problems.size());
  for (const SuiteProblem& p : problems) keys.push_back(problem_key(p.parsed.problem));
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<SuiteProblem> shard;
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto rank = static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), keys[i]) - sorted.begin());
    if (rank % count == index) shard.push_back(problems[i]);
  }
  return shard;
}

}  // namespace arbiter
