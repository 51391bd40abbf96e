// Strict reading of TOML with toml++, for every TOML the project reads (config, tuning tables,
// shape suites, kernel manifests): typed getters that remember which keys were consumed, and
// finish() that rejects whatever is left. Every error names the source, line and column.
// Header-only, because the generated plugin reads manifests and plugins cannot link core; and
// the one place that includes toml++, so that its configuration is the same everywhere.
#pragma once

#include "arbiter_base/input_error.hpp"
#include "arbiter_base/toml_screen.hpp"

#include <toml++/toml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// "source:line:column"
inline std::string toml_position(const std::string& source, const toml::source_position& position) {
  std::ostringstream out;
  out << source << ':' << position.line << ':' << position.column;
  return out.str();
}

// A whole document; a syntax error becomes InputError("source:line:column: description").
// Text that would reach one of toml++ 3.3.0's bugs is refused first (toml_screen.hpp).
inline toml::table parse_toml_document(std::string_view text, const std::string& source) {
  if (const std::optional<TomlScreenError> e = screen_toml(text))
    throw InputError(source + ':' + std::to_string(e->line) + ':' + std::to_string(e->column) + ": " + e->what);
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(toml_position(source, e.source().begin) + ": " + std::string(e.description()));
  }
}

// One table of a document (which must outlive the reader). `path` is the table's dotted name
// for messages ("" for the root), `source` the file's name. Errors go through raise(), which a host class overrides
// to throw its own status.
class StrictTable {
 public:
  StrictTable(const toml::table& table, std::string path, std::string source)
      : table_(table), path_(std::move(path)), source_(std::move(source)) {}
  virtual ~StrictTable() = default;
  StrictTable(const StrictTable&) = delete;
  StrictTable& operator=(const StrictTable&) = delete;

  const toml::table& node() const { return table_; }

  // The key's node (nullptr if absent), marked as consumed.
  const toml::node* find(std::string_view key) {
    seen_.insert(std::string(key));
    return table_.get(key);
  }
  std::optional<std::string> string(std::string_view key) {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    if (!node->is_string()) wrong_type(*node, key, "a string");
    return node->as_string()->get();
  }
  std::optional<bool> boolean(std::string_view key) {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    if (!node->is_boolean()) wrong_type(*node, key, "true or false");
    return node->as_boolean()->get();
  }
  std::optional<int64_t> integer(std::string_view key) {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    if (!node->is_integer()) wrong_type(*node, key, "an integer");
    return node->as_integer()->get();
  }
  // An integer or a float.
  std::optional<double> number(std::string_view key) {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    if (!node->is_number()) wrong_type(*node, key, "a number");
    return node->value<double>();
  }
  // An array of strings; empty if absent.
  std::vector<std::string> strings(std::string_view key) {
    std::vector<std::string> result;
    const toml::node* node = find(key);
    if (node == nullptr) return result;
    const toml::array* array = node->as_array();
    if (array == nullptr) wrong_type(*node, key, "an array of strings");
    for (const toml::node& item : *array) {
      if (!item.is_string()) wrong_type(item, key, "an array of strings");
      result.push_back(item.as_string()->get());
    }
    return result;
  }
  // A sub-table, or nullptr if absent; anything else under that key is a type error.
  const toml::table* table(std::string_view key) {
    const toml::node* node = find(key);
    if (node == nullptr) return nullptr;
    if (!node->is_table()) wrong_type(*node, key, "a table");
    return node->as_table();
  }

  // Keys that must be present, else an error at the table.
  std::string required_string(std::string_view key) { return required(string(key), key); }
  double required_number(std::string_view key) { return required(number(key), key); }
  int64_t required_integer(std::string_view key) { return required(integer(key), key); }
  bool required_boolean(std::string_view key) { return required(boolean(key), key); }
  std::vector<std::string> required_strings(std::string_view key) {
    if (table_.get(key) == nullptr) missing(key);
    return strings(key);
  }

  [[noreturn]] void error(const toml::node& node, const std::string& what) const {
    report(toml_position(source_, node.source().begin) + ": " + what);
  }
  // An error at the key's value (which must be present).
  [[noreturn]] void error_at(std::string_view key, const std::string& what) const {
    const toml::node* node = table_.get(key);
    error(node != nullptr ? *node : static_cast<const toml::node&>(table_), what);
  }
  [[noreturn]] void wrong_type(const toml::node& node, std::string_view key, const std::string& expected) const {
    error(node, "'" + qualified(key) + "' must be " + expected);
  }
  [[noreturn]] void missing(std::string_view key) const { error(table_, "'" + qualified(key) + "' is missing"); }
  std::string qualified(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  // Rejects keys nobody asked for (typos, keys of another version).
  void finish() const {
    for (const auto& [key, node] : table_)
      if (seen_.count(std::string(key.str())) == 0)
        report(toml_position(source_, key.source().begin) + ": unknown key '" + qualified(key.str()) + "'");
  }

 protected:
  // Throws the error; the host's override throws its own type with its caller's status.
  virtual void raise(const std::string& message) const { throw InputError(message); }

 private:
  [[noreturn]] void report(const std::string& message) const {
    raise(message);
    throw InputError(message);  // for an override that returned
  }
  template <class T>
  T required(std::optional<T> value, std::string_view key) const {
    if (!value) missing(key);
    return std::move(*value);
  }

  const toml::table& table_;
  std::string path_;
  std::string source_;
  std::set<std::string> seen_;
};

}  // namespace arbiter
