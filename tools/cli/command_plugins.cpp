// arbiter plugins: what was found, loaded, disabled and rejected, and the kernels.
#include "cli.hpp"

#include "arbiter_base/abi_names.hpp"
#include "plugin/plugin_search.hpp"
#include "problem/op_table.hpp"

#include <fmt/format.h>

namespace arbiter::cli {
namespace {

// Declared provenance is shown beside each kernel; this says what the host makes of it.
std::string trust_text(const PluginRecord& plugin) {
  switch (plugin.trust) {
    case ARB_PLUGIN_TRUST_ORACLE: return "the verification oracle (built into libarbiter)";
    case ARB_PLUGIN_TRUST_CONFIG: return "trusted by plugins.trust (path and SHA-256): runs without the gate, "
                                         "except AI-generated kernels";
    case ARB_PLUGIN_TRUST_HOST: return "built into libarbiter: composite ops as chains of dispatched calls, each "
                                       "step's kernel gated for its own problem";
    default: return "none: every kernel passes the verification gate before it runs";
  }
}

}  // namespace

int command_plugins(const Arguments& args) {
  const auto context = make_context(args);
  const KernelRegistry& registry = context->registry();
  const std::string install_dir = install_plugin_dir().string();
  fmt::print("config: {}\n", context->config().source);
  if (context->config().plugins.search_default_paths) {
    fmt::print("search: config plugins.paths, then ARBITER_PLUGIN_PATH, then the install's folder ({})\n",
               install_dir.empty() ? "not found" : install_dir);
  } else {
    fmt::print("search: config plugins.paths only (plugins.search_default_paths = false)\n");
  }
  for (const std::string& note : registry.notes()) fmt::print("note:   {}\n", note);

  size_t loaded = 0;
  for (const auto& plugin : registry.plugins()) {
    if (plugin->state != PluginState::loaded) continue;
    ++loaded;
    fmt::print("\n{} {}  [{}]  priority {}  ABI {}.{} (agreed {}.{})  build {}\n  {}\n  {}\n", plugin->name,
               plugin->version, provenance_name(plugin->provenance), plugin->priority, plugin->abi_major,
               plugin->abi_minor, plugin->abi_major, plugin->agreed_minor, plugin->build_id, plugin->description,
               plugin->path);
    if (!plugin->runtime_version.empty()) fmt::print("  wraps: {}\n", plugin->runtime_version);
    fmt::print("  found: {}{}\n", plugin->origin, plugin->sha256.empty() ? "" : "  sha256 " + plugin->sha256);
    if (!plugin->companions.empty()) {
      fmt::print("  code:  the file (sha256 {}) and what it mapped beside it, all in the sha256 above:\n",
                 plugin->file_sha256);
      for (const CompanionObject& companion : plugin->companions)
        fmt::print("         {}  sha256 {}\n", companion.path,
                   companion.sha256.empty() ? "(unreadable)" : companion.sha256);
    }
    fmt::print("  trust: {}\n", trust_text(*plugin));
    for (const KernelRecord& kernel : plugin->kernels) {
      std::string flags;
      if (kernel.abi.flags & ARB_KERNEL_FLAG_NONDETERMINISTIC) flags = "  nondeterministic";
      fmt::print("    {:<8} {:<24} {:<5} {:<12} priority {}{}\n", op_name(kernel.abi.op), kernel.name,
                 device_name(kernel.abi.device_type), provenance_name(kernel.provenance), kernel.abi.priority, flags);
    }
  }
  if (loaded == 0) fmt::print("\nno plugin loaded\n");
  for (const auto& plugin : registry.plugins()) {
    if (plugin->state == PluginState::loaded) continue;
    fmt::print("\n{}: {}\n  {}{}\n  reason: {}\n", state_name(plugin->state), plugin->name.empty() ? "?" : plugin->name,
               plugin->path, plugin->sha256.empty() ? "" : "  sha256 " + plugin->sha256, plugin->reason);
  }
  return 0;
}

}  // namespace arbiter::cli
