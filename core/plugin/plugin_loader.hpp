// Loads one plugin file: dlopen (RTLD_NOW | RTLD_LOCAL) through Boost.DLL, finds
// arbiter_plugin_entry, negotiates the ABI, validates the descriptor and every kernel.
#pragma once

#include "plugin/plugin_record.hpp"

#include <filesystem>

namespace arbiter {

// Never throws: a plugin that cannot be used comes back rejected, with the reason (loader
// message, missing symbol, versions, the plugin's own error...).
std::unique_ptr<PluginRecord> load_plugin(const std::filesystem::path& path);

// Plugin and kernel names: [a-z0-9_-]+ for plugins, [A-Za-z0-9_.:=,-]+ for kernels.
bool valid_plugin_name(const char* name);
bool valid_kernel_name(const char* name);

}  // namespace arbiter
