// All plugins a context found, loaded, disabled or rejected, and the kernels it may use:
// the oracle built in first, then the files found; config enable/disable, trust and
// priorities applied, duplicate names resolved (resolve_duplicate_names), each loser
// rejected with both paths.
#pragma once

#include "config/config.hpp"
#include "plugin/plugin_record.hpp"

#include <memory>
#include <string_view>
#include <vector>

namespace arbiter {

class KernelRegistry {
 public:
  // emulated_cuda: the CUDA device is the SIMT emulator, so CUDA kernels come only from
  // emulated builds of plugins (and, otherwise, only from builds for a GPU). built_ins: plugins
  // compiled into libarbiter besides the oracle (the composite ops' chains), listed after it;
  // their names are theirs as the oracle's is, and config may disable them.
  KernelRegistry(const PluginsConfig& config, bool emulated_cuda,
                 std::vector<std::unique_ptr<PluginRecord>> built_ins = {});
  ~KernelRegistry();  // unloads the plugins, last loaded first
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  const std::vector<std::unique_ptr<PluginRecord>>& plugins() const { return plugins_; }
  // Usable kernels of one op in heuristic order: plugin priority, then kernel priority
  // (both higher first), then name.
  const std::vector<const KernelRecord*>& candidates(int32_t op) const;
  const KernelRecord* find(std::string_view full_name) const;
  // The oracle's kernel for an op (built into libarbiter; there even when config disables it
  // for dispatch), or nullptr.
  const KernelRecord* oracle(int32_t op) const;
  // Discovery notes (missing paths), for `arbiter plugins`.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void resolve_duplicate_names(const PluginsConfig& config);
  void apply_trust(const PluginsConfig& config, PluginRecord& record);

  std::vector<std::unique_ptr<PluginRecord>> plugins_;
  PluginRecord* oracle_ = nullptr;
  std::vector<std::vector<const KernelRecord*>> by_op_;  // indexed by arb_op (op_code_limit())
  std::vector<std::string> notes_;
};

}  // namespace arbiter
