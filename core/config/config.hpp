// The runtime configuration: what the TOML file says, as typed structs.
// configs/default.toml documents every key; the same text is embedded in the library.
#pragma once

#include <arbiter/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// What dispatch does when neither an override nor the tuning table decides.
enum class OnMiss {
  heuristic,  // the highest-priority verified kernel whose supports() accepts
  nearest,    // the kernel of the nearest tuned shape of the same class, else heuristic
  error       // a miss is an error (ARB_ERR_UNSUPPORTED)
};

// What the tuning table is for (table.policy).
enum class TablePolicy {
  replay,        // use entries, never tune, never write (production)
  tune_missing,  // a problem without an entry is tuned now and written
  retune,        // every problem is tuned again on first sight (entries are incumbents)
  strict         // a problem without an entry is an error
};

struct IntRange {
  int64_t lo = 0, hi = 0;  // inclusive
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
};

// [[dispatch.override]]: problems matching every given field go to `kernel`.
struct OverrideRule {
  arb_op op = ARB_OP_INVALID;
  std::optional<arb_dtype> dtype;
  std::optional<DLDeviceType> device;
  // Ranges of the op's sizes (m, n, k; rows, cols) by name; a size not named matches any.
  std::map<std::string, IntRange, std::less<>> sizes;
  std::optional<IntRange> size(std::string_view name) const {
    const auto it = sizes.find(name);
    return it == sizes.end() ? std::nullopt : std::optional<IntRange>(it->second);
  }
  std::string kernel;  // "<plugin>.<kernel>"
  std::string origin;  // "file:line", for explain
};

// [[plugins.trust]]: a plugin file the operator vouches for, by path and content.
struct TrustedPlugin {
  std::string path;
  std::string sha256;  // lower-case hex, as `arbiter plugins` prints it
};

struct PluginsConfig {
  std::vector<std::string> paths;   // folders or files, searched first
  bool search_default_paths = true; // then ARBITER_PLUGIN_PATH, then the install's folder
  std::vector<std::string> enable;  // if not empty: only these plugins
  std::vector<std::string> disable;
  std::map<std::string, int32_t> priority;  // overrides a plugin's own priority
  std::vector<TrustedPlugin> trust;         // run without the gate (never AI-generated kernels)
  std::map<std::string, std::string> choose;  // name -> the file that wins when several have it
  bool allow_insecure_files = false;  // load files (or folders) others could have written
  // Load each untrusted plugin file first in a probe process (plugin/plugin_probe.hpp), which
  // may take this long; files shipped in the install's own folder and trusted ones are not probed.
  bool probe = true;
  int probe_time_limit_s = 20;
};

struct DispatchConfig {
  OnMiss on_miss = OnMiss::heuristic;
  std::vector<OverrideRule> overrides;  // first match wins
};

struct TableConfig {
  std::string path;  // the tuning table; "" for none
  TablePolicy policy = TablePolicy::replay;
  int64_t max_file_mib = 64;  // a larger table file is refused, never read (tables are text)
  size_t max_file_bytes() const { return static_cast<size_t>(max_file_mib) << 20; }
};

// Which kernels' verification launches them in a sandbox process (verify/kernel_sandbox.hpp).
enum class VerifySandbox {
  untrusted,  // every gated CPU kernel of a plugin from outside the install's own folder, and
              // every AI-generated one
  all,        // every gated CPU kernel
  off
};

struct VerifyConfig {
  bool allow_tf32 = false;  // admit TF32 kernels for f32 problems (at a TF32 tolerance)
  // A verdict read from the tuning table is verified again in this process before the
  // kernel's first dispatch (false: the table's word is taken, for a table this operator wrote).
  bool recheck_table_verdicts = true;
  int trials = 3;
  // Shadow checks of live calls (verify/shadow_check.hpp): about one call in N is re-checked
  // against the oracle, and a kernel found wrong is quarantined. Unset or 0: off (the
  // default); `arbiter run` and the tests turn it on when the config leaves it unset.
  std::optional<int64_t> shadow_one_in;
  int64_t shadow_rate() const { return shadow_one_in.value_or(0); }
  // The first calls of every new problem through dispatch to a gated kernel are checked the
  // same way, whatever shadow_one_in says: the gate's last step, on the application's own
  // call path and data.
  int first_calls_checked = 3;
  VerifySandbox sandbox = VerifySandbox::untrusted;
  int time_limit_s = 120;     // for one sandboxed verification, the plugin's load included
  int after_return_ms = 250;  // how long after a sandboxed launch its operands are read again
};

struct TuneConfig {
  int budget_ms = 200;        // per problem, for the measurement phase
  int min_samples = 20;
  int warmup = 2;             // launches
  double screen_factor = 1.5;
  std::string cache = "cold";  // "cold": rotate buffers past the LLC; "warm": one set
  std::vector<std::string> exclude;  // "<plugin>.<kernel>": never verified or timed by the tuner
};

// What serves CUDA problems (cuda.device): a GPU when the machine has a usable one, the
// SIMT emulator (the CUDA plugins' own sources run on the CPU: correctness, never speed), or
// nothing.
enum class CudaDeviceKind { gpu, emulated, off };

struct CudaConfig {
  CudaDeviceKind device = CudaDeviceKind::gpu;
};

struct Config {
  std::string source;  // where it came from, for messages
  arb_log_level log_level = ARB_LOG_WARN;
  PluginsConfig plugins;
  DispatchConfig dispatch;
  TableConfig table;
  VerifyConfig verify;
  TuneConfig tune;
  CudaConfig cuda;
};

std::string_view table_policy_name(TablePolicy policy);

// Parses TOML text. `source` names it in messages; relative paths in it resolve against
// `base_dir`. Throws Failure(ARB_ERR_CONFIG, "source:line:column: what") on syntax errors,
// unknown keys, wrong types and bad values.
Config parse_config(std::string_view toml, const std::string& source, const std::string& base_dir);
Config load_config_file(const std::string& path);
Config default_config();
std::string_view default_config_text();  // configs/default.toml, embedded at build time

}  // namespace arbiter
