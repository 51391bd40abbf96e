// Helpers shared by the test suites.
#pragma once

#include "arbiter_base/sha256.hpp"
#include "arbiter_base/text_file.hpp"
#include "common/failure.hpp"
#include "config/config.hpp"
#include "context.hpp"
#include "problem/problem_text.hpp"

#include <arbiter/arbiter.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace arbiter::test {

inline std::string plugin_file(const std::string& name) {
  return std::string(ARBITER_TEST_PLUGIN_DIR) + "/arbiter_" + name + ".so";
}
inline std::string fixture_file(const std::string& name) {
  return std::string(ARBITER_TEST_FIXTURE_DIR) + "/arbiter_" + name + ".so";
}

// TOML for a context that loads exactly these plugin files (no default search).
inline std::string config_loading(const std::vector<std::string>& files, const std::string& extra = "") {
  std::string toml = "log_level = \"error\"\n[plugins]\nsearch_default_paths = false\npaths = [";
  for (size_t i = 0; i < files.size(); ++i) toml += (i ? ", \"" : "\"") + files[i] + "\"";
  return toml + "]\n" + extra;
}

// The SHA-256 of a file, as the host computes it for plugins.
inline std::string file_sha256(const std::string& path) { return sha256_hex(read_text_file(path, "plugin")); }

// TOML that trusts these plugin files by path and content ([[plugins.trust]]): their kernels
// run without the gate (AI-generated ones excepted).
inline std::string trusting(const std::vector<std::string>& files) {
  std::string toml;
  for (const std::string& file : files)
    toml += "[[plugins.trust]]\npath = \"" + file + "\"\nsha256 = \"" + file_sha256(file) + "\"\n";
  return toml;
}

// The shipped CPU plugins.
inline std::vector<std::string> shipped_plugins() {
  std::vector<std::string> files = {plugin_file("cpu")};
#ifdef ARBITER_TEST_HAVE_OPENBLAS
  files.push_back(plugin_file("openblas"));
#endif
  return files;
}

// The small-gemm kernel dispatch prefers on this CPU.
inline std::string preferred_small_gemm() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? "cpu.gemm_small_avx512" : "cpu.gemm_small_avx2";
}

// Shadow checks of every call are on in the tests unless the config says otherwise.
inline std::unique_ptr<Context> make_context(const std::string& toml) {
  Config config = parse_config(toml, "<test>", "");
  if (!config.verify.shadow_one_in) config.verify.shadow_one_in = 1;
  return std::make_unique<Context>(std::move(config));
}

// One context with the shipped plugins, shared by every test of the binary that needs no other.
inline Context& shipped_context() {
  static const auto context = make_context(config_loading(shipped_plugins()));
  return *context;
}

// parse_problem's message for a text it refuses (ARB_ERR_INVALID_ARGUMENT), or "" when it accepts.
inline std::string problem_text_error(const char* text) {
  try {
    parse_problem(text);
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

// Smooth, non-repeating test data: scale sin(step i + 0.3).
inline std::vector<float> wave(size_t size, float step, float scale) {
  std::vector<float> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = scale * std::sin(step * static_cast<float>(i) + 0.3f);
  return v;
}

inline const PluginRecord* plugin_named(const Context& context, const std::string& name) {
  for (const auto& p : context.registry().plugins())
    if (p->name == name) return p.get();
  return nullptr;
}

inline const PluginRecord* plugin_at_path(const Context& context, const std::string& path) {
  for (const auto& p : context.registry().plugins())
    if (p->path == path) return p.get();
  return nullptr;
}

// A context over the shipped plugins (and `extra` config), created through the public API.
struct PublicContext {
  explicit PublicContext(const std::string& extra = "") {
    const std::string toml = config_loading(shipped_plugins(), extra);
    arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
    options.config_toml = toml.c_str();
    REQUIRE(arb_context_create(&options, &ctx) == ARB_OK);
  }
  ~PublicContext() { arb_context_destroy(ctx); }
  PublicContext(const PublicContext&) = delete;
  arb_context ctx = nullptr;
};

// Does this thread's last error contain `needle`?
inline bool last_error_says(const char* needle) { return std::string(arb_last_error()).find(needle) != std::string::npos; }

// arb_plan_explain's text, sized by a first call.
inline std::string plan_explanation(arb_plan plan) {
  size_t length = 0;
  arb_plan_explain(plan, nullptr, 0, &length);
  std::string text(length, '\0');
  REQUIRE(arb_plan_explain(plan, text.data(), text.size(), &length) == ARB_OK);
  text.resize(length - 1);
  return text;
}

// A C API call returns `status`, and its message contains `needle`.
#define CHECK_STATUS(call, status, needle)                                              \
  do {                                                                                  \
    CHECK((call) == (status));                                                          \
    CHECK_MESSAGE(arbiter::test::last_error_says(needle), "last error: ", arb_last_error()); \
  } while (0)

// A 1-D or 2-D DLTensor over caller-owned storage for the public-API tests.
struct Tensor {
  Tensor(void* data, std::vector<int64_t> shape, DLDataType dtype = {kDLFloat, 32, 1},
         std::vector<int64_t> strides = {})
      : shape_(std::move(shape)), strides_(std::move(strides)) {
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int>(shape_.size());
    t.dtype = dtype;
    t.shape = shape_.data();
    t.strides = strides_.empty() ? nullptr : strides_.data();
    t.byte_offset = 0;
  }
  Tensor(const Tensor&) = delete;
  DLTensor t{};

 private:
  std::vector<int64_t> shape_, strides_;
};

// A fresh, empty folder for one test, removed with everything in it afterwards.
struct TempDir {
  explicit TempDir(const std::string& prefix = "arbiter-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (std::filesystem::path(path) / name).string(); }
  std::string path;
};

// Sets an environment variable for one scope (plugins read theirs when they load), then
// restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace arbiter::test
