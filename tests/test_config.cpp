// Configuration: the embedded default, every key, and errors with file, line and column.
#include "common/failure.hpp"
#include "config/config.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

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

}  // namespace

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
  CHECK(rule.m->lo == 1);
  CHECK(rule.m->hi == 64);
  CHECK(rule.n->lo == 4096);
  CHECK(rule.n->hi == 4096);
  CHECK_FALSE(rule.k.has_value());
  CHECK(rule.kernel == "cpu.gemm_small_avx2");
  CHECK(rule.origin == "cfg.toml:13:1");
  CHECK(config.dispatch.overrides[1].cols->hi == 1024);
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
  CHECK(error_of("[[dispatch.override]]\nop = \"softmax\"\nm = 3\nkernel = \"a.b\"\n").find("apply to gemm only") !=
        std::string::npos);
  CHECK(error_of("[[dispatch.override]]\nop = \"gemm\"\ncols = 3\nkernel = \"a.b\"\n").find("not gemm") != std::string::npos);
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
