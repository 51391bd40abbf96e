// TOML -> Config. Every key is checked: unknown keys, wrong types and bad values are
// reported with file, line and column, and fail context creation.
#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "common/text_file.hpp"
#include "config/config.hpp"
#include "config/toml_section.hpp"
#include "problem/op_table.hpp"

#include <fmt/format.h>

#include <cmath>

#include <filesystem>
#include <set>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

// An inclusive range: an integer n (meaning [n, n]) or an array [lo, hi].
std::optional<IntRange> read_range(Section& s, std::string_view key) {
  const toml::node* node = s.find(key);
  if (node == nullptr) return std::nullopt;
  if (node->is_integer()) {
    const int64_t v = node->as_integer()->get();
    return IntRange{v, v};
  }
  const toml::array* array = node->as_array();
  if (array == nullptr || array->size() != 2 || !(*array)[0].is_integer() || !(*array)[1].is_integer())
    s.wrong_type(*node, key, "an integer or an array [low, high] of two integers");
  IntRange r{(*array)[0].as_integer()->get(), (*array)[1].as_integer()->get()};
  if (r.lo > r.hi) s.error(*node, "'" + s.qualified(key) + "': low end above high end");
  return r;
}

std::string resolve_path(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute() || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

void read_plugins(Section& root, const std::string& source, const std::string& base_dir, PluginsConfig& out) {
  const toml::table* table = root.table("plugins");
  if (table == nullptr) return;
  Section s(*table, "plugins", source, ARB_ERR_CONFIG);
  for (const std::string& path : s.strings("paths")) out.paths.push_back(resolve_path(path, base_dir));
  if (auto v = s.boolean("search_default_paths")) out.search_default_paths = *v;
  out.enable = s.strings("enable");
  out.disable = s.strings("disable");
  if (auto v = s.boolean("allow_insecure_files")) out.allow_insecure_files = *v;
  if (auto v = s.boolean("probe")) out.probe = *v;
  if (auto v = s.integer("probe_time_limit_s")) {
    if (*v < 1 || *v > 3600) s.error_at("probe_time_limit_s", "'plugins.probe_time_limit_s' must be from 1 to 3600");
    out.probe_time_limit_s = static_cast<int>(*v);
  }
  if (const toml::node* trust = s.find("trust")) {
    const toml::array* items = trust->as_array();
    if (items == nullptr) s.wrong_type(*trust, "trust", "an array of tables ([[plugins.trust]])");
    for (const toml::node& item : *items) {
      if (!item.is_table()) s.wrong_type(item, "trust", "an array of tables ([[plugins.trust]])");
      Section t(*item.as_table(), "plugins.trust", source, ARB_ERR_CONFIG);
      TrustedPlugin trusted{resolve_path(t.required_string("path"), base_dir), t.required_string("sha256")};
      const bool hex = trusted.sha256.size() == 64 &&
                       trusted.sha256.find_first_not_of("0123456789abcdef") == std::string::npos;
      if (!hex) t.error_at("sha256", "'plugins.trust.sha256' must be 64 lower-case hex digits (`arbiter plugins` prints them)");
      t.finish();
      out.trust.push_back(std::move(trusted));
    }
  }
  if (const toml::table* choose = s.table("choose")) {
    Section c(*choose, "plugins.choose", source, ARB_ERR_CONFIG);
    for (const auto& [key, node] : *choose) out.choose[std::string(key.str())] = resolve_path(*c.string(key.str()), base_dir);
    c.finish();
  }
  if (const toml::table* priorities = s.table("priority")) {
    Section p(*priorities, "plugins.priority", source, ARB_ERR_CONFIG);
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
  Section s(table, "dispatch.override", source, ARB_ERR_CONFIG);
  OverrideRule rule;
  rule.origin = toml_position(source, table.source().begin);
  const std::optional<std::string> op = s.string("op");
  if (!op) s.error(table, "'dispatch.override' needs 'op'");
  if (auto parsed = parse_op(*op)) {
    rule.op = *parsed;
  } else {
    s.error_at("op", "unknown op '" + *op + "' (" + op_names() + ")");
  }
  if (auto dtype = s.string("dtype")) {
    rule.dtype = parse_dtype(*dtype);
    if (!rule.dtype) s.error_at("dtype", "unknown dtype '" + *dtype + "' (f32, f16, bf16)");
  }
  if (auto device = s.string("device")) {
    rule.device = parse_device(*device);
    if (!rule.device) s.error_at("device", "unknown device '" + *device + "' (cpu, cuda)");
  }
  // Sizes of every op are recognised, so that one of another op is named as such.
  const Op* rule_op = find_op(rule.op);
  for (const Op* any : all_ops())
    for (const SizeField& size : any->sizes()) {
      if (rule.sizes.count(size.name) != 0) continue;
      const std::optional<IntRange> range = read_range(s, size.name);
      if (!range) continue;
      bool own = false;
      for (const SizeField& f : rule_op->sizes()) own = own || std::string_view(f.name) == size.name;
      if (!own) {
        std::string names;
        for (const SizeField& f : rule_op->sizes()) names += (names.empty() ? "" : ", ") + std::string(f.name);
        s.error(table, fmt::format("'{}' does not apply to {} (its sizes: {})", size.name, rule_op->name(), names));
      }
      rule.sizes.emplace(size.name, *range);
    }
  const std::optional<std::string> kernel = s.string("kernel");
  if (!kernel || kernel->find('.') == std::string::npos || kernel->front() == '.')
    s.error(table, "'dispatch.override' needs 'kernel = \"<plugin>.<kernel>\"'");
  rule.kernel = *kernel;
  s.finish();
  return rule;
}

void read_dispatch(Section& root, const std::string& source, DispatchConfig& out) {
  const toml::table* table = root.table("dispatch");
  if (table == nullptr) return;
  Section s(*table, "dispatch", source, ARB_ERR_CONFIG);
  if (auto on_miss = s.string("on_miss")) {
    if (*on_miss == "heuristic") {
      out.on_miss = OnMiss::heuristic;
    } else if (*on_miss == "nearest") {
      out.on_miss = OnMiss::nearest;
    } else if (*on_miss == "error") {
      out.on_miss = OnMiss::error;
    } else {
      s.error_at("on_miss",
              "'dispatch.on_miss' must be \"heuristic\", \"nearest\" or \"error\", not \"" + *on_miss + "\"");
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
  const toml::table* table = root.table("table");
  if (table == nullptr) return;
  Section s(*table, "table", source, ARB_ERR_CONFIG);
  if (auto path = s.string("path")) out.path = resolve_path(*path, base_dir);
  if (auto policy = s.string("policy")) {
    bool known = false;
    for (TablePolicy p : {TablePolicy::replay, TablePolicy::tune_missing, TablePolicy::retune, TablePolicy::strict})
      if (*policy == table_policy_name(p)) {
        out.policy = p;
        known = true;
      }
    if (!known)
      s.error_at("policy", "'table.policy' must be \"replay\", \"tune-missing\", \"retune\" or \"strict\", not \"" +
                                     *policy + "\"");
  }
  if (auto mib = s.integer("max_file_mib")) {
    if (*mib < 1 || *mib > 65536) s.error_at("max_file_mib", "'table.max_file_mib' must be from 1 to 65536");
    out.max_file_mib = *mib;
  }
  s.finish();
}

void read_verify(Section& root, const std::string& source, VerifyConfig& out) {
  const toml::table* table = root.table("verify");
  if (table == nullptr) return;
  Section s(*table, "verify", source, ARB_ERR_CONFIG);
  if (s.find("allow_unverified") != nullptr)
    s.error_at("allow_unverified", "'verify.allow_unverified' was removed: a plugin's own word never skips the gate; "
                                   "trust a plugin by path and SHA-256 with [[plugins.trust]]");
  if (auto v = s.boolean("allow_tf32")) out.allow_tf32 = *v;
  if (auto v = s.boolean("recheck_table_verdicts")) out.recheck_table_verdicts = *v;
  if (auto v = s.integer("trials")) {
    if (*v < 3 || *v > 100) s.error_at("trials", "'verify.trials' must be from 3 to 100");
    out.trials = static_cast<int>(*v);
  }
  if (auto v = s.integer("shadow_one_in")) {
    if (*v < 0 || *v > (int64_t(1) << 40))
      s.error_at("shadow_one_in", "'verify.shadow_one_in' must be 0 (off) or the N of one call in N, up to 2^40");
    out.shadow_one_in = *v;
  }
  if (auto v = s.integer("first_calls_checked")) {
    if (*v < 0 || *v > 1000000)
      s.error_at("first_calls_checked", "'verify.first_calls_checked' must be from 0 (none) to 1000000");
    out.first_calls_checked = static_cast<int>(*v);
  }
  if (auto v = s.string("sandbox")) {
    if (*v == "untrusted") out.sandbox = VerifySandbox::untrusted;
    else if (*v == "all") out.sandbox = VerifySandbox::all;
    else if (*v == "off") out.sandbox = VerifySandbox::off;
    else s.error_at("sandbox", "'verify.sandbox' must be \"untrusted\", \"all\" or \"off\", not \"" + *v + "\"");
  }
  if (auto v = s.integer("time_limit_s")) {
    if (*v < 1 || *v > 86400) s.error_at("time_limit_s", "'verify.time_limit_s' must be from 1 to 86400");
    out.time_limit_s = static_cast<int>(*v);
  }
  if (auto v = s.integer("after_return_ms")) {
    if (*v < 0 || *v > 60000) s.error_at("after_return_ms", "'verify.after_return_ms' must be from 0 to 60000");
    out.after_return_ms = static_cast<int>(*v);
  }
  s.finish();
}

void read_tune(Section& root, const std::string& source, TuneConfig& out) {
  const toml::table* table = root.table("tune");
  if (table == nullptr) return;
  Section s(*table, "tune", source, ARB_ERR_CONFIG);
  auto bounded = [&](const char* key, int64_t lo, int64_t hi, int& field) {
    if (auto v = s.integer(key)) {
      if (*v < lo || *v > hi) s.error_at(key, fmt::format("'tune.{}' must be from {} to {}", key, lo, hi));
      field = static_cast<int>(*v);
    }
  };
  bounded("budget_ms", 1, 600000, out.budget_ms);
  bounded("min_samples", 20, 100000, out.min_samples);
  bounded("warmup", 1, 1000, out.warmup);
  if (const toml::node* node = s.find("screen_factor")) {
    if (!node->is_number()) s.wrong_type(*node, "screen_factor", "a number");
    out.screen_factor = node->value<double>().value_or(1.5);
    if (!(out.screen_factor >= 1.0) || std::isinf(out.screen_factor))  // NaN fails the first test
      s.error(*node, "'tune.screen_factor' must be a finite number of at least 1");
  }
  if (auto cache = s.string("cache")) {
    if (*cache != "cold" && *cache != "warm") s.error_at("cache", "'tune.cache' must be \"cold\" or \"warm\"");
    out.cache = *cache;
  }
  out.exclude = s.strings("exclude");
  for (const std::string& name : out.exclude)
    if (name.find('.') == std::string::npos || name.front() == '.')
      s.error_at("exclude", "'tune.exclude' takes kernel names \"<plugin>.<kernel>\", not \"" + name + "\"");
  s.finish();
}

void read_cuda(Section& root, const std::string& source, CudaConfig& out) {
  const toml::table* table = root.table("cuda");
  if (table == nullptr) return;
  Section s(*table, "cuda", source, ARB_ERR_CONFIG);
  if (auto device = s.string("device")) {
    if (*device == "gpu") out.device = CudaDeviceKind::gpu;
    else if (*device == "emulated") out.device = CudaDeviceKind::emulated;
    else if (*device == "off") out.device = CudaDeviceKind::off;
    else s.error_at("device", "'cuda.device' must be \"gpu\", \"emulated\" or \"off\", not \"" + *device + "\"");
  }
  s.finish();
}

}  // namespace

Config parse_config(std::string_view toml_text, const std::string& source, const std::string& base_dir) {
  const toml::table document = parse_toml(toml_text, source, ARB_ERR_CONFIG);
  Config config;
  config.source = source;
  Section root(document, "", source, ARB_ERR_CONFIG);
  if (auto level = root.string("log_level")) {
    auto parsed = parse_log_level(*level);
    if (!parsed)
      root.error_at("log_level", "'log_level' must be one of trace, debug, info, warn, error, off");
    config.log_level = *parsed;
  }
  read_plugins(root, source, base_dir, config.plugins);
  read_dispatch(root, source, config.dispatch);
  read_table(root, source, base_dir, config.table);
  read_verify(root, source, config.verify);
  read_tune(root, source, config.tune);
  read_cuda(root, source, config.cuda);
  root.finish();
  return config;
}

Config load_config_file(const std::string& path) {
  const std::string text = read_text_file(path, "config file", ARB_ERR_CONFIG);
  const fs::path parent = fs::absolute(fs::path(path)).parent_path();
  return parse_config(text, path, parent.string());
}

std::string_view table_policy_name(TablePolicy policy) {
  switch (policy) {
    case TablePolicy::tune_missing: return "tune-missing";
    case TablePolicy::retune: return "retune";
    case TablePolicy::strict: return "strict";
    default: return "replay";
  }
}

Config default_config() { return parse_config(default_config_text(), "<embedded default>", ""); }

}  // namespace arbiter
