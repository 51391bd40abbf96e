#include "plugin/kernel_registry.hpp"

#include "common/log.hpp"
#include "plugin/plugin_loader.hpp"
#include "plugin/plugin_probe.hpp"
#include "plugin/plugin_search.hpp"
#include "problem/op_table.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

bool contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Why config keeps `name` from loading, or "".
std::string disabled_reason(const PluginsConfig& config, const std::string& name) {
  if (contains(config.disable, name)) return "disabled by config (plugins.disable)";
  if (!config.enable.empty() && !contains(config.enable, name)) return "not in config's plugins.enable";
  return "";
}

// Why a loaded plugin's CUDA kernels cannot serve this context's CUDA device, or "".
std::string device_mismatch(const PluginRecord& plugin, bool emulated_cuda) {
  bool cuda = false;
  for (const KernelRecord& k : plugin.kernels) cuda |= k.abi.device_type == kDLCUDA;
  if (!cuda) return "";
  if (emulated_cuda && !plugin.emulated)
    return "built for a GPU, and this context's CUDA device is the SIMT emulator (cuda.device = \"emulated\")";
  if (!emulated_cuda && plugin.emulated)
    return "built for the SIMT emulator, and this context's CUDA device is not (cuda.device = \"emulated\" uses it)";
  return "";
}

bool same_path(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec) && !ec;
}

// The first load of an untrusted file runs in a probe process; not for files shipped in the
// install's own folders (plugins/ and plugins-emulated/: they are part of the installation,
// like libarbiter itself) or files the config trusts by path and hash.
PluginProbe probe_for(const PluginsConfig& config, const PluginCandidate& candidate) {
  if (!config.probe || shipped_with_install(candidate.origin)) return {};
  return [&config](const fs::path& path, const std::string& sha256) -> std::string {
    for (const TrustedPlugin& trusted : config.trust)
      if (trusted.sha256 == sha256 && same_path(trusted.path, path.string())) return "";
    return probe_plugin(path, sha256, config.probe_time_limit_s);
  };
}

}  // namespace

KernelRegistry::KernelRegistry(const PluginsConfig& config, bool emulated_cuda,
                               std::vector<std::unique_ptr<PluginRecord>> built_ins) {
  plugins_.push_back(load_builtin_oracle());
  oracle_ = plugins_.front().get();
  if (oracle_->state == PluginState::loaded)
    if (std::string why = disabled_reason(config, oracle_->name); !why.empty()) {
      oracle_->state = PluginState::disabled;  // for dispatch; it still verifies
      oracle_->reason = why + "; as the oracle it still verifies the other kernels";
    }
  for (std::unique_ptr<PluginRecord>& built_in : built_ins) {
    if (std::string why = disabled_reason(config, built_in->name); !why.empty()) {
      built_in->state = PluginState::disabled;
      built_in->reason = why;
    }
    plugins_.push_back(std::move(built_in));
  }

  for (const PluginCandidate& candidate : find_plugin_files(config, emulated_cuda, notes_)) {
    // A file named like a disabled plugin is not even opened.
    const std::string file_name = plugin_name_from_file(candidate.path);
    if (!file_name.empty()) {
      if (std::string why = disabled_reason(config, file_name); !why.empty()) {
        auto record = std::make_unique<PluginRecord>();
        record->path = candidate.path.string();
        record->origin = candidate.origin;
        record->name = file_name;
        record->state = PluginState::disabled;
        record->reason = why;
        plugins_.push_back(std::move(record));
        continue;
      }
    }
    std::unique_ptr<PluginRecord> record =
        load_plugin(candidate.path, candidate.origin, config.allow_insecure_files, probe_for(config, candidate));
    if (record->name.empty()) record->name = file_name;  // rejected before it could say; "" if unnamed file
    if (record->state == PluginState::loaded) {
      if (std::string why = disabled_reason(config, record->name); !why.empty()) {
        record->state = PluginState::disabled;
        record->reason = why;
      } else if (std::string mismatch = device_mismatch(*record, emulated_cuda); !mismatch.empty()) {
        record->state = PluginState::rejected;
        record->reason = mismatch;
        logger().info("plugin '{}' at {}: {}", record->name, record->path, record->reason);
      }
    }
    plugins_.push_back(std::move(record));
  }
  resolve_duplicate_names(config);
  for (auto& record : plugins_) {
    if (record->state != PluginState::loaded && record.get() != oracle_) {
      record->kernels.clear();
      record->keep_alive.reset();
    }
    if (record->origin != "built-in" && record->state == PluginState::loaded) apply_trust(config, *record);
    if (auto it = config.priority.find(record->name); it != config.priority.end()) record->priority = it->second;
  }
  for (const std::string& note : notes_) logger().info("{}", note);

  by_op_.resize(op_code_limit());  // the loader admits only kernels of known ops
  for (const auto& plugin : plugins_) {
    if (plugin->state != PluginState::loaded) continue;
    for (const KernelRecord& kernel : plugin->kernels) by_op_.at(static_cast<size_t>(kernel.abi.op)).push_back(&kernel);
  }
  for (auto& list : by_op_) {
    std::stable_sort(list.begin(), list.end(), [](const KernelRecord* a, const KernelRecord* b) {
      if (a->plugin->priority != b->plugin->priority) return a->plugin->priority > b->plugin->priority;
      if (a->abi.priority != b->abi.priority) return a->abi.priority > b->abi.priority;
      return a->name < b->name;
    });
  }
}

// Two loaded plugins with one name: the oracle's name is never taken by a file; an installed
// plugin is not replaced by one found on a user path unless plugins.choose says so; between
// user paths the first in search order wins. The losers are rejected naming both paths.
void KernelRegistry::resolve_duplicate_names(const PluginsConfig& config) {
  auto installed = [](const PluginRecord& r) { return shipped_with_install(r.origin); };
  auto lose = [](PluginRecord& record, std::string reason) {
    record.state = PluginState::rejected;
    record.reason = std::move(reason);
    logger().warn("plugin '{}' at {}: {}", record.name, record.path, record.reason);
  };
  for (auto& record : plugins_)
    if (record.get() != oracle_ && record->state == PluginState::loaded && record->name == oracle_->name)
      lose(*record, "the name '" + record->name + "' is the verification oracle's, built into " + oracle_->path +
                        ": no plugin file can replace it");
  for (auto& built_in : plugins_) {
    if (built_in.get() == oracle_ || built_in->origin != "built-in") continue;
    for (auto& record : plugins_)
      if (record->origin != "built-in" && record->state == PluginState::loaded && record->name == built_in->name)
        lose(*record, "the name '" + record->name + "' is that of a plugin built into libarbiter: no plugin file can "
                          "replace it");
  }
  std::map<std::string, std::vector<PluginRecord*>> by_name;
  for (auto& record : plugins_)
    if (record.get() != oracle_ && record->state == PluginState::loaded) by_name[record->name].push_back(record.get());
  for (auto& [name, records] : by_name) {
    if (records.size() < 2) continue;
    PluginRecord* winner = nullptr;
    std::string rule;
    if (auto chosen = config.choose.find(name); chosen != config.choose.end()) {
      for (PluginRecord* r : records)
        if (same_path(r->path, chosen->second)) winner = r;
      rule = "plugins.choose." + name + " picks " + chosen->second;
      if (winner == nullptr) {
        for (PluginRecord* r : records)
          lose(*r, rule + ", which is not among the files found with this name; none is loaded");
        continue;
      }
    } else {
      for (PluginRecord* r : records)
        if (winner == nullptr && installed(*r)) winner = r;
      if (winner != nullptr) {
        rule = "the installed plugin '" + name + "' at " + winner->path +
               " is not replaced by a file of the same name (plugins.choose." + name + " = \"<path>\" picks one)";
      } else {
        winner = records.front();
        rule = "duplicate of plugin '" + name + "' already loaded from " + winner->path +
               " (the first found in search order wins; plugins.choose." + name + " picks another)";
      }
    }
    for (PluginRecord* r : records)
      if (r != winner) lose(*r, rule);
  }
}

// [[plugins.trust]]: a plugin whose file has the named path and SHA-256 runs its kernels
// without the gate (except AI-generated ones). A path whose content differs is not trusted,
// and the notes say so.
void KernelRegistry::apply_trust(const PluginsConfig& config, PluginRecord& record) {
  for (const TrustedPlugin& trusted : config.trust) {
    if (!same_path(record.path, trusted.path)) continue;
    if (record.sha256 == trusted.sha256) {
      record.trust = ARB_PLUGIN_TRUST_CONFIG;
      return;
    }
    notes_.push_back("plugins.trust names " + trusted.path + " with sha256 " + trusted.sha256 + ", but the file's is " +
                     record.sha256 + ": not trusted, its kernels are gated");
  }
}

const KernelRecord* KernelRegistry::oracle(int32_t op) const {
  if (oracle_ == nullptr) return nullptr;
  for (const KernelRecord& kernel : oracle_->kernels)
    if (kernel.abi.op == op) return &kernel;
  return nullptr;
}

KernelRegistry::~KernelRegistry() {
  for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it) (*it)->keep_alive.reset();
}

const std::vector<const KernelRecord*>& KernelRegistry::candidates(int32_t op) const {
  static const std::vector<const KernelRecord*> none;
  if (op < 0 || static_cast<size_t>(op) >= by_op_.size()) return none;
  return by_op_[static_cast<size_t>(op)];
}

const KernelRecord* KernelRegistry::find(std::string_view full_name) const {
  for (const auto& plugin : plugins_)
    for (const KernelRecord& kernel : plugin->kernels)
      if (kernel.name == full_name) return &kernel;
  return nullptr;
}

}  // namespace arbiter
