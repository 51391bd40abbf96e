#include "config/toml_section.hpp"

#include "common/failure.hpp"

#include <sstream>

namespace arbiter {

toml::table parse_toml(std::string_view text, const std::string& source, arb_status status) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    fail(status, toml_position(source, e.source().begin) + ": " + std::string(e.description()));
  }
}

std::string toml_position(const std::string& source, const toml::source_position& position) {
  std::ostringstream out;
  out << source << ':' << position.line << ':' << position.column;
  return out.str();
}

const toml::node* Section::find(std::string_view key) {
  seen_.insert(std::string(key));
  return table_.get(key);
}

std::optional<std::string> Section::string(std::string_view key) {
  const toml::node* node = find(key);
  if (node == nullptr) return std::nullopt;
  if (!node->is_string()) wrong_type(*node, key, "a string");
  return node->as_string()->get();
}

std::optional<bool> Section::boolean(std::string_view key) {
  const toml::node* node = find(key);
  if (node == nullptr) return std::nullopt;
  if (!node->is_boolean()) wrong_type(*node, key, "true or false");
  return node->as_boolean()->get();
}

std::optional<int64_t> Section::integer(std::string_view key) {
  const toml::node* node = find(key);
  if (node == nullptr) return std::nullopt;
  if (!node->is_integer()) wrong_type(*node, key, "an integer");
  return node->as_integer()->get();
}

std::optional<double> Section::number(std::string_view key) {
  const toml::node* node = find(key);
  if (node == nullptr) return std::nullopt;
  if (!node->is_number()) wrong_type(*node, key, "a number");
  return node->value<double>();
}

std::vector<std::string> Section::strings(std::string_view key) {
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

std::string Section::required_string(std::string_view key) {
  auto v = string(key);
  if (!v) missing(key);
  return *v;
}

double Section::required_number(std::string_view key) {
  auto v = number(key);
  if (!v) missing(key);
  return *v;
}

int64_t Section::required_integer(std::string_view key) {
  auto v = integer(key);
  if (!v) missing(key);
  return *v;
}

bool Section::required_boolean(std::string_view key) {
  auto v = boolean(key);
  if (!v) missing(key);
  return *v;
}

void Section::error(const toml::node& node, const std::string& what) const {
  fail(status_, toml_position(source_, node.source().begin) + ": " + what);
}

void Section::wrong_type(const toml::node& node, std::string_view key, const std::string& expected) const {
  error(node, "'" + qualified(key) + "' must be " + expected);
}

void Section::missing(std::string_view key) const { error(table_, "'" + qualified(key) + "' is missing"); }

std::string Section::qualified(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void Section::finish() const {
  for (const auto& [key, node] : table_) {
    if (seen_.count(std::string(key.str())) == 0)
      fail(status_, toml_position(source_, key.source().begin) + ": unknown key '" + qualified(key.str()) + "'");
  }
}

const toml::table* subtable(Section& parent, std::string_view key) {
  const toml::node* node = parent.find(key);
  if (node == nullptr) return nullptr;
  if (!node->is_table()) parent.wrong_type(*node, key, "a table");
  return node->as_table();
}

}  // namespace arbiter
