#include "plugin/kernel_registry.hpp"

#include "common/log.hpp"
#include "plugin/plugin_loader.hpp"
#include "plugin/plugin_search.hpp"
#include "problem/op_table.hpp"

#include <algorithm>

namespace arbiter {
namespace {

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

}  // namespace

KernelRegistry::KernelRegistry(const PluginsConfig& config, bool emulated_cuda) {
  for (const PluginCandidate& candidate : find_plugin_files(config, emulated_cuda, notes_)) {
    // A file named like a disabled plugin is not even opened.
    const std::string file_name = plugin_name_from_file(candidate.path);
    if (!file_name.empty()) {
      if (std::string why = disabled_reason(config, file_name); !why.empty()) {
        auto record = std::make_unique<PluginRecord>();
        record->path = candidate.path.string();
        record->name = file_name;
        record->state = PluginState::disabled;
        record->reason = why;
        plugins_.push_back(std::move(record));
        continue;
      }
    }
    std::unique_ptr<PluginRecord> record = load_plugin(candidate.path);
    if (record->name.empty()) record->name = file_name;  // rejected before it could say; "" if unnamed file
    if (record->state == PluginState::loaded) {
      if (std::string why = disabled_reason(config, record->name); !why.empty()) {
        record->state = PluginState::disabled;
        record->reason = why;
      } else if (std::string mismatch = device_mismatch(*record, emulated_cuda); !mismatch.empty()) {
        record->state = PluginState::rejected;
        record->reason = mismatch;
        logger().info("plugin '{}' at {}: {}", record->name, record->path, record->reason);
      } else {
        for (const auto& other : plugins_) {
          if (other->state == PluginState::loaded && other->name == record->name) {
            record->state = PluginState::rejected;
            record->reason = "duplicate of plugin '" + record->name + "' already loaded from " + other->path +
                             " (the first found in search order wins)";
            logger().warn("plugin '{}' at {}: {}", record->name, record->path, record->reason);
            break;
          }
        }
      }
      if (record->state != PluginState::loaded) {
        record->kernels.clear();
        record->keep_alive.reset();
      }
    }
    if (auto it = config.priority.find(record->name); it != config.priority.end()) record->priority = it->second;
    plugins_.push_back(std::move(record));
  }
  for (const std::string& note : notes_) logger().info("{}", note);

  by_op_.resize(op_code_limit());  // the loader admits only kernels of known ops
  for (const auto& plugin : plugins_)
    for (const KernelRecord& kernel : plugin->kernels) by_op_.at(static_cast<size_t>(kernel.abi.op)).push_back(&kernel);
  for (auto& list : by_op_) {
    std::stable_sort(list.begin(), list.end(), [](const KernelRecord* a, const KernelRecord* b) {
      if (a->plugin->priority != b->plugin->priority) return a->plugin->priority > b->plugin->priority;
      if (a->abi.priority != b->abi.priority) return a->abi.priority > b->abi.priority;
      return a->name < b->name;
    });
  }
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
