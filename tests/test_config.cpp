// Configuration: the embedded default, every key, and errors with file, line and column.
#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "config/config.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

using namespace arbiter;

namespace {

// The message of the config error that parsing `toml` raises ("" if none).
std::string error_of(const std::string& toml) {
  try {
    parse_config(toml, "test.toml", "/base");
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_CONFIG);
    return e.what();
  }
  return "";
}

// Every default of a configuration, "section.key" -> its value as TOML writes it.
std::map<std::string, std::string> defaults_of(const Config& c) {
  auto quoted = [](std::string_view text) { return "\"" + std::string(text) + "\""; };
  auto list = [&](const std::vector<std::string>& items) {
    std::string out = "[";
    for (const std::string& item : items) out += (out.size() > 1 ? ", " : "") + quoted(item);
    return out + "]";
  };
  auto boolean = [](bool b) { return std::string(b ? "true" : "false"); };
  std::ostringstream factor;
  factor << c.tune.screen_factor;
  const char* on_miss = c.dispatch.on_miss == OnMiss::heuristic ? "heuristic"
                        : c.dispatch.on_miss == OnMiss::nearest ? "nearest"
                                                                 : "error";
  const char* cuda = c.cuda.device == CudaDeviceKind::gpu ? "gpu" : c.cuda.device == CudaDeviceKind::emulated ? "emulated" : "off";
  return {{"log_level", quoted(log_level_name(c.log_level))},
          {"plugins.paths", list(c.plugins.paths)},
          {"plugins.search_default_paths", boolean(c.plugins.search_default_paths)},
          {"plugins.enable", list(c.plugins.enable)},
          {"plugins.disable", list(c.plugins.disable)},
          {"dispatch.on_miss", quoted(on_miss)},
          {"table.path", quoted(c.table.path)},
          {"table.policy", quoted(table_policy_name(c.table.policy))},
          {"plugins.allow_insecure_files", boolean(c.plugins.allow_insecure_files)},
          {"verify.recheck_table_verdicts", boolean(c.verify.recheck_table_verdicts)},
          {"verify.allow_tf32", boolean(c.verify.allow_tf32)},
          {"verify.trials", std::to_string(c.verify.trials)},
          {"verify.first_calls_checked", std::to_string(c.verify.first_calls_checked)},
          {"tune.budget_ms", std::to_string(c.tune.budget_ms)},
          {"tune.min_samples", std::to_string(c.tune.min_samples)},
          {"tune.warmup", std::to_string(c.tune.warmup)},
          {"tune.screen_factor", factor.str()},
          {"tune.cache", quoted(c.tune.cache)},
          {"tune.exclude", list(c.tune.exclude)},
          {"cuda.device", quoted(cuda)}};
}

// The defaults docs/config-reference.md states: "section.key" -> the default column's value.
std::map<std::string, std::string> documented_defaults() {
  std::ifstream file(ARBITER_TEST_SOURCE_DIR "/docs/config-reference.md");
  REQUIRE(file);
  std::map<std::string, std::string> out;
  const std::regex heading(R"(^### `\[?([a-z_.]+)\]?`)"), row(R"(^\| `([a-z0-9_]+)` \| [^|]+ \| `([^`]*)` \|)"),
      bare_row(R"(^\| [a-z ]+ \| `([^`]*)` \|)");
  std::string section, line;
  std::smatch m;
  while (std::getline(file, line)) {
    if (line.rfind("## ", 0) == 0) section.clear();
    if (std::regex_search(line, m, heading)) section = m[1];
    else if (section == "log_level" && std::regex_search(line, m, bare_row)) out["log_level"] = m[1];
    else if (!section.empty() && std::regex_search(line, m, row)) out[section + "." + std::string(m[1])] = m[2];
  }
  return out;
}

}  // namespace

TEST_CASE("each default is said once: the built-in values, an empty config, configs/default.toml and the reference agree") {
  const std::map<std::string, std::string> built_in = defaults_of(Config{});
  CHECK(defaults_of(parse_config("", "empty.toml", "/base")) == built_in);
  CHECK(defaults_of(default_config()) == built_in);
  const std::map<std::string, std::string> documented = documented_defaults();
  for (const auto& [key, value] : built_in) {
    CAPTURE(key);
    REQUIRE_MESSAGE(documented.count(key) == 1, "docs/config-reference.md gives no default for it");
    CHECK(documented.at(key) == value);
  }
}

TEST_CASE("the embedded default is configs/default.toml and parses to the documented defaults") {
  const Config config = default_config();
  CHECK(config.source == "<embedded default>");
  CHECK(config.log_level == ARB_LOG_WARN);
  CHECK(config.plugins.search_default_paths);
  CHECK(config.plugins.paths.empty());
  CHECK(config.dispatch.on_miss == OnMiss::heuristic);
  CHECK(config.dispatch.overrides.empty());
  CHECK(config.table.path.empty());
  std::ifstream file(ARBITER_TEST_SOURCE_DIR "/configs/default.toml");
  REQUIRE(file);
  const std::string on_disk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  CHECK(on_disk == std::string(default_config_text()));
}

TEST_CASE("every key is read") {
  const Config config = parse_config(R"(
log_level = "debug"
[plugins]
paths = ["relative/dir", "/abs/file.so"]
search_default_paths = false
enable = ["cpu", "reference"]
disable = ["openblas"]
[plugins.priority]
reference = 7
cpu = -3
[dispatch]
on_miss = "error"
[[dispatch.override]]
op = "gemm"
dtype = "bf16"
device = "cpu"
m = [1, 64]
n = 4096
kernel = "cpu.gemm_small_avx2"
[[dispatch.override]]
op = "softmax"
cols = [1, 1024]
kernel = "reference.softmax"
[table]
path = "tables/t.toml"
[tune]
exclude = ["cuda.gemm_wgmma_sm90"]
)",
                                     "cfg.toml", "/etc/arbiter");
  CHECK(config.log_level == ARB_LOG_DEBUG);
  REQUIRE(config.plugins.paths.size() == 2);
  CHECK(config.plugins.paths[0] == "/etc/arbiter/relative/dir");  // relative to the config's folder
  CHECK(config.plugins.paths[1] == "/abs/file.so");
  CHECK_FALSE(config.plugins.search_default_paths);
  CHECK(config.plugins.enable == std::vector<std::string>{"cpu", "reference"});
  CHECK(config.plugins.disable == std::vector<std::string>{"openblas"});
  CHECK(config.plugins.priority.at("reference") == 7);
  CHECK(config.plugins.priority.at("cpu") == -3);
  CHECK(config.dispatch.on_miss == OnMiss::error);
  REQUIRE(config.dispatch.overrides.size() == 2);
  const OverrideRule& rule = config.dispatch.overrides[0];
  CHECK(rule.op == ARB_OP_GEMM);
  CHECK(rule.dtype == ARB_DTYPE_BF16);
  CHECK(rule.device == kDLCPU);
  CHECK(rule.size("m")->lo == 1);
  CHECK(rule.size("m")->hi == 64);
  CHECK(rule.size("n")->lo == 4096);
  CHECK(rule.size("n")->hi == 4096);
  CHECK_FALSE(rule.size("k").has_value());
  CHECK(rule.kernel == "cpu.gemm_small_avx2");
  CHECK(rule.origin == "cfg.toml:13:1");
  CHECK(config.dispatch.overrides[1].size("cols")->hi == 1024);
  CHECK(config.table.path == "/etc/arbiter/tables/t.toml");
  CHECK(config.tune.exclude == std::vector<std::string>{"cuda.gemm_wgmma_sm90"});
}

TEST_CASE("config errors name file, line and column") {
  CHECK(error_of("log_level = \"warn\"\nlog_levle = \"info\"\n") == "test.toml:2:1: unknown key 'log_levle'");
  CHECK(error_of("[plugins]\n  enabel = []\n") == "test.toml:2:3: unknown key 'plugins.enabel'");
  CHECK(error_of("[plugins]\npaths = \"one\"\n") == "test.toml:2:9: 'plugins.paths' must be an array of strings");
  CHECK(error_of("[plugins]\npaths = [\"a\", 3]\n") == "test.toml:2:15: 'plugins.paths' must be an array of strings");
  CHECK(error_of("[plugins.priority]\ncpu = \"high\"\n") == "test.toml:2:7: 'plugins.priority.cpu' must be an integer");
  CHECK(error_of("[dispatch]\non_miss = \"guess\"\n").find("test.toml:2:11: 'dispatch.on_miss' must be") == 0);
  CHECK(error_of("log_level = \"loud\"\n").find("test.toml:1:13: 'log_level' must be one of") == 0);
  CHECK(error_of("plugins = 3\n") == "test.toml:1:11: 'plugins' must be a table");
  CHECK(error_of("[dispatch]\nbogus = 1\n") == "test.toml:2:1: unknown key 'dispatch.bogus'");
  CHECK(error_of("[table]\npath = 1\n") == "test.toml:2:8: 'table.path' must be a string");
  CHECK(error_of("[tune]\nexclude = [\"nodot\"]\n") ==
        "test.toml:2:11: 'tune.exclude' takes kernel names \"<plugin>.<kernel>\", not \"nodot\"");
  // TOML syntax errors come from toml++ with their position.
  CHECK(error_of("[plugins\npaths = []\n").find("test.toml:1:") == 0);
  CHECK(error_of("a = = 1\n").find("test.toml:1:") == 0);
}

TEST_CASE("override rules are validated") {
  CHECK(error_of("[[dispatch.override]]\nkernel = \"cpu.x\"\n").find("test.toml:1:1: 'dispatch.override' needs 'op'") == 0);
  CHECK(error_of("[[dispatch.override]]\nop = \"conv\"\nkernel = \"cpu.x\"\n").find("test.toml:2:6: unknown op 'conv'") == 0);
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\n").find("needs 'kernel = \"<plugin>.<kernel>\"'") != std::string::npos);
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\nkernel = \"nodot\"\n").find("needs 'kernel") != std::string::npos);
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\nm = [9, 2]\nkernel = \"a.b\"\n") ==
        "test.toml:3:5: 'dispatch.override.m': low end above high end");
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\nm = [1, 2, 3]\nkernel = \"a.b\"\n").find("test.toml:3:5:") == 0);
  CHECK(error_of("[[dispatch.override]]\nop = \"softmax\"\nm = 3\nkernel = \"a.b\"\n").find("'m' does not apply to softmax (its sizes: rows, cols)") !=
        std::string::npos);
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\ncols = 3\nkernel = \"a.b\"\n").find("'cols' does not apply to gemm (its sizes: m, n, k)") != std::string::npos);
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\ndtype = \"f64\"\nkernel = \"a.b\"\n").find("test.toml:3:9: unknown dtype") == 0);
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\nkernel = \"a.b\"\ntypo = 1\n") ==
        "test.toml:4:1: unknown key 'dispatch.override.typo'");
  CHECK(error_of("[dispatch]\noverride = 3\n").find("test.toml:2:12: 'dispatch.override' must be an array of tables") == 0);
}

TEST_CASE("a config file that cannot be read is a config error naming it") {
  try {
    load_config_file("/nonexistent/dir/arbiter.toml");
    FAIL("expected an error");
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_CONFIG);
    CHECK(std::string(e.what()).find("/nonexistent/dir/arbiter.toml") != std::string::npos);
  }
  const std::string path = "config_error_test.toml";
  {
    std::ofstream out(path);
    out << "[plugins]\n\nsearch_default_path = true\n";
  }
  try {
    load_config_file(path);
    FAIL("expected an error");
  } catch (const Failure& e) {
    CHECK(std::string(e.what()) == path + ":3:1: unknown key 'plugins.search_default_path'");
  }
  std::remove(path.c_str());
}
