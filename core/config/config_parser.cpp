// TOML -> Config. Every key is checked: unknown keys, wrong types and bad values are
// reported with file, line and column, and fail context creation.
#include "common/failure.hpp"
#include "common/names.hpp"
#include "config/config.hpp"

#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

// A "source:line:column" prefix for a position in the document.
std::string where(const std::string& source, const toml::source_position& pos) {
  std::ostringstream out;
  out << source << ':' << pos.line << ':' << pos.column;
  return out.str();
}

[[noreturn]] void config_error(const std::string& source, const toml::source_position& pos, const std::string& what) {
  fail(ARB_ERR_CONFIG, where(source, pos) + ": " + what);
}

// One TOML table being read: typed getters that remember which keys were consumed, and
// finish() that rejects whatever is left.
class Section {
 public:
  Section(const toml::table& table, std::string path, const std::string& source)
      : table_(table), path_(std::move(path)), source_(source) {}

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

  // An inclusive range: an integer n (meaning [n, n]) or an array [lo, hi].
  std::optional<IntRange> range(std::string_view key) {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    if (node->is_integer()) {
      const int64_t v = node->as_integer()->get();
      return IntRange{v, v};
    }
    const toml::array* array = node->as_array();
    if (array == nullptr || array->size() != 2 || !(*array)[0].is_integer() || !(*array)[1].is_integer())
      wrong_type(*node, key, "an integer or an array [low, high] of two integers");
    IntRange r{(*array)[0].as_integer()->get(), (*array)[1].as_integer()->get()};
    if (r.lo > r.hi) error(*node, "'" + qualified(key) + "': low end above high end");
    return r;
  }

  [[noreturn]] void error(const toml::node& node, const std::string& what) const {
    config_error(source_, node.source().begin, what);
  }

  [[noreturn]] void wrong_type(const toml::node& node, std::string_view key, const std::string& expected) const {
    error(node, "'" + qualified(key) + "' must be " + expected);
  }

  std::string qualified(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  // Rejects keys nobody asked for (typos, keys of another version).
  void finish() const {
    for (const auto& [key, node] : table_) {
      if (seen_.count(std::string(key.str())) == 0)
        config_error(source_, key.source().begin, "unknown key '" + qualified(key.str()) + "'");
    }
  }

 private:
  const toml::table& table_;
  std::string path_;
  const std::string& source_;
  std::set<std::string> seen_;
};

// A sub-table, or nullptr if absent; anything else under that key is a type error.
const toml::table* subtable(Section& parent, std::string_view key) {
  const toml::node* node = parent.find(key);
  if (node == nullptr) return nullptr;
  if (!node->is_table()) parent.wrong_type(*node, key, "a table");
  return node->as_table();
}

std::string resolve_path(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute() || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

void read_plugins(Section& root, const std::string& source, const std::string& base_dir, PluginsConfig& out) {
  const toml::table* table = subtable(root, "plugins");
  if (table == nullptr) return;
  Section s(*table, "plugins", source);
  for (const std::string& path : s.strings("paths")) out.paths.push_back(resolve_path(path, base_dir));
  if (auto v = s.boolean("search_default_paths")) out.search_default_paths = *v;
  out.enable = s.strings("enable");
  out.disable = s.strings("disable");
  if (const toml::table* priorities = subtable(s, "priority")) {
    Section p(*priorities, "plugins.priority", source);
    for (const auto& [key, node] : *priorities) {
      const std::string name(key.str());
      const int64_t value = *p.integer(name);
      if (value < INT32_MIN || value > INT32_MAX) p.error(node, "'plugins.priority." + name + "' out of range");
      out.priority[name] = static_cast<int32_t>(value);
    }
    p.finish();
  }
  s.finish();
}

OverrideRule read_override(const toml::table& table, const std::string& source) {
  Section s(table, "dispatch.override", source);
  OverrideRule rule;
  rule.origin = where(source, table.source().begin);
  const std::optional<std::string> op = s.string("op");
  if (!op) s.error(table, "'dispatch.override' needs 'op'");
  if (auto parsed = parse_op(*op)) {
    rule.op = *parsed;
  } else {
    s.error(*s.find("op"), "unknown op '" + *op + "' (gemm, rmsnorm, softmax)");
  }
  if (auto dtype = s.string("dtype")) {
    rule.dtype = parse_dtype(*dtype);
    if (!rule.dtype) s.error(*s.find("dtype"), "unknown dtype '" + *dtype + "' (f32, f16, bf16)");
  }
  if (auto device = s.string("device")) {
    rule.device = parse_device(*device);
    if (!rule.device) s.error(*s.find("device"), "unknown device '" + *device + "' (cpu, cuda)");
  }
  rule.m = s.range("m");
  rule.n = s.range("n");
  rule.k = s.range("k");
  rule.rows = s.range("rows");
  rule.cols = s.range("cols");
  const std::optional<std::string> kernel = s.string("kernel");
  if (!kernel || kernel->find('.') == std::string::npos || kernel->front() == '.')
    s.error(table, "'dispatch.override' needs 'kernel = \"<plugin>.<kernel>\"'");
  rule.kernel = *kernel;
  if (rule.op == ARB_OP_GEMM && (rule.rows || rule.cols))
    s.error(table, "'rows' and 'cols' apply to rmsnorm and softmax, not gemm");
  if (rule.op != ARB_OP_GEMM && (rule.m || rule.n || rule.k))
    s.error(table, "'m', 'n' and 'k' apply to gemm only");
  s.finish();
  return rule;
}

void read_dispatch(Section& root, const std::string& source, DispatchConfig& out) {
  const toml::table* table = subtable(root, "dispatch");
  if (table == nullptr) return;
  Section s(*table, "dispatch", source);
  if (auto on_miss = s.string("on_miss")) {
    if (*on_miss == "heuristic") {
      out.on_miss = OnMiss::heuristic;
    } else if (*on_miss == "error") {
      out.on_miss = OnMiss::error;
    } else {
      s.error(*s.find("on_miss"), "'dispatch.on_miss' must be \"heuristic\" or \"error\", not \"" + *on_miss + "\"");
    }
  }
  if (const toml::node* node = s.find("override")) {
    const toml::array* rules = node->as_array();
    if (rules == nullptr) s.wrong_type(*node, "override", "an array of tables ([[dispatch.override]])");
    for (const toml::node& item : *rules) {
      if (!item.is_table()) s.wrong_type(item, "override", "an array of tables ([[dispatch.override]])");
      out.overrides.push_back(read_override(*item.as_table(), source));
    }
  }
  s.finish();
}

void read_table(Section& root, const std::string& source, const std::string& base_dir, TableConfig& out) {
  const toml::table* table = subtable(root, "table");
  if (table == nullptr) return;
  Section s(*table, "table", source);
  if (auto path = s.string("path")) out.path = resolve_path(*path, base_dir);
  s.finish();
}

}  // namespace

Config parse_config(std::string_view toml_text, const std::string& source, const std::string& base_dir) {
  toml::table document;
  try {
    document = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    config_error(source, e.source().begin, std::string(e.description()));
  }
  Config config;
  config.source = source;
  Section root(document, "", source);
  if (auto level = root.string("log_level")) {
    auto parsed = parse_log_level(*level);
    if (!parsed)
      root.error(*root.find("log_level"), "'log_level' must be one of trace, debug, info, warn, error, off");
    config.log_level = *parsed;
  }
  read_plugins(root, source, base_dir, config.plugins);
  read_dispatch(root, source, config.dispatch);
  read_table(root, source, base_dir, config.table);
  root.finish();
  return config;
}

Config load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ARB_ERR_CONFIG, "cannot read config file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  const fs::path parent = fs::absolute(fs::path(path)).parent_path();
  return parse_config(text.str(), path, parent.string());
}

Config default_config() { return parse_config(default_config_text(), "<embedded default>", ""); }

}  // namespace arbiter
