// Strict reading of one TOML table (toml++): typed getters that remember which keys were
// consumed, and finish() that rejects whatever is left. Every error names the source, line
// and column, with the status the caller chose (config or tuning-table errors).
#pragma once

#include <arbiter/types.h>

#include <toml++/toml.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// A whole TOML document; a syntax error becomes Failure(status) at "source:line:column".
toml::table parse_toml(std::string_view text, const std::string& source, arb_status status);

// "source:line:column"
std::string toml_position(const std::string& source, const toml::source_position& position);

class Section {
 public:
  Section(const toml::table& table, std::string path, const std::string& source, arb_status status)
      : table_(table), path_(std::move(path)), source_(source), status_(status) {}

  const toml::node* find(std::string_view key);
  std::optional<std::string> string(std::string_view key);
  std::optional<bool> boolean(std::string_view key);
  std::optional<int64_t> integer(std::string_view key);
  std::optional<double> number(std::string_view key);  // integer or float
  std::vector<std::string> strings(std::string_view key);
  // A key that must be present, else an error at the table.
  std::string required_string(std::string_view key);
  double required_number(std::string_view key);
  int64_t required_integer(std::string_view key);
  bool required_boolean(std::string_view key);

  [[noreturn]] void error(const toml::node& node, const std::string& what) const;
  [[noreturn]] void wrong_type(const toml::node& node, std::string_view key, const std::string& expected) const;
  std::string qualified(std::string_view key) const;
  // Rejects keys nobody asked for (typos, keys of another version).
  void finish() const;

 private:
  [[noreturn]] void missing(std::string_view key) const;

  const toml::table& table_;
  std::string path_;
  const std::string& source_;
  arb_status status_;
  std::set<std::string> seen_;
};

// A sub-table, or nullptr if absent; anything else under that key is a type error.
const toml::table* subtable(Section& parent, std::string_view key);

}  // namespace arbiter
