// Fuzz target: the problem syntax (core/problem/problem_text.hpp), the one line every tool,
// table key and suite uses. Expected: a problem, or Failure(ARB_ERR_INVALID_ARGUMENT). A
// problem that parses is also checked against its canonical key:
//   - parse_problem(problem_key(p)) gives p back (problem.hpp promises it);
//   - every integer the line gave (m=, lda=, align=, the N of device=cuda:N) is the key's, not
//     a value wrapped or truncated on the way (beta= is a float in the line and a flag in the key: not compared).
#include "common/failure.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

// The key=value words whose value is a whole integer, as the parser splits them; the N of
// device=cuda:N as "device:".
std::map<std::string, int64_t, std::less<>> integer_fields(std::string_view text) {
  std::map<std::string, int64_t, std::less<>> fields;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != '\t' && text[end] != '\n') ++end;
    const std::string_view word = text.substr(i, end - i);
    const size_t eq = word.find('=');
    int64_t value = 0;
    if (eq != std::string_view::npos) {
      std::string name(word.substr(0, eq));
      std::string_view v = word.substr(eq + 1);
      if (name == "device" && v.find(':') != std::string_view::npos) {
        name = "device:";
        v = v.substr(v.find(':') + 1);
      }
      const auto [last, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
      if (ec == std::errc() && last == v.data() + v.size()) fields.emplace(std::move(name), value);
    }
    i = end;
  }
  return fields;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  arbiter::ParsedProblem parsed;
  try {
    parsed = arbiter::parse_problem(text);
  } catch (const arbiter::Failure& f) {
    if (f.status() != ARB_ERR_INVALID_ARGUMENT) throw;
    return 0;
  }
  const std::string key = arbiter::problem_key(parsed.problem);
  const std::string again = arbiter::problem_key(arbiter::parse_problem(key).problem);
  if (again != key) finding("problem key does not read back:\n  " + key + "\n  " + again);
  const auto in_key = integer_fields(key);
  for (const auto& [name, value] : integer_fields(text)) {
    const auto it = in_key.find(name);
    if (name != "beta" && it != in_key.end() && it->second != value)
      finding("'" + name + "=" + std::to_string(value) + "' became '" + name + "=" + std::to_string(it->second) +
              "' in the key " + key);
  }
  return 0;
}
