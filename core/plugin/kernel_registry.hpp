// All plugins a context found, loaded, disabled or rejected, and the kernels it may use:
// config enable/disable and priorities applied, duplicate names resolved (the first one in
// search order wins, the others are rejected with a warning).
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
  // emulated builds of plugins (and, otherwise, only from builds for a GPU).
  KernelRegistry(const PluginsConfig& config, bool emulated_cuda);
  ~KernelRegistry();  // unloads the plugins, last loaded first
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  const std::vector<std::unique_ptr<PluginRecord>>& plugins() const { return plugins_; }
  // Usable kernels of one op in heuristic order: plugin priority, then kernel priority
  // (both higher first), then name.
  const std::vector<const KernelRecord*>& candidates(int32_t op) const;
  const KernelRecord* find(std::string_view full_name) const;
  // Discovery notes (missing paths), for `arbiter plugins`.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::vector<std::unique_ptr<PluginRecord>> plugins_;
  std::vector<std::vector<const KernelRecord*>> by_op_;  // indexed by arb_op (op_code_limit())
  std::vector<std::string> notes_;
};

}  // namespace arbiter
