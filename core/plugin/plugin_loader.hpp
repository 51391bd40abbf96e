// Loads one plugin file: checks who could have written it, hashes it, dlopen (RTLD_NOW |
// RTLD_LOCAL) through Boost.DLL, finds arbiter_plugin_entry, negotiates the ABI, validates
// the descriptor and every kernel.
#pragma once

#include "plugin/plugin_record.hpp"

#include <filesystem>
#include <functional>

namespace arbiter {

// Asked after the file is hashed and before any of its code runs here: "" to go on, or why the
// file must be rejected (plugin_probe.hpp loads it in another process first).
using PluginProbe = std::function<std::string(const std::filesystem::path& path, const std::string& sha256)>;

// Never throws: a plugin that cannot be used comes back rejected, with the reason (a file
// others could have written, the probe's answer, loader message, missing symbol, versions,
// the plugin's own error...). The host hashes the file before loading it (PluginRecord::sha256).
std::unique_ptr<PluginRecord> load_plugin(const std::filesystem::path& path, const std::string& origin = "config",
                                          bool allow_insecure_files = false, const PluginProbe& probe = {});

// The verification oracle (plugins/reference/reference_plugin.cpp), compiled into libarbiter
// so that no file on a search path can stand in for it; trusted as ARB_PLUGIN_TRUST_ORACLE.
std::unique_ptr<PluginRecord> load_builtin_oracle();
// Its entry function, defined by that source when it is built into the library.
arb_status builtin_oracle_entry(const arb_host_api* host, const arb_plugin_descriptor** descriptor, char* message,
                                size_t capacity) noexcept;

// What a plugin compiled into libarbiter reports as its path: "<libarbiter's file> (built in)",
// so that a packaged library's built-in plugins show where they came from.
std::string builtin_plugin_path();

// Plugin and kernel names: [a-z0-9_-]+ for plugins, [A-Za-z0-9_.:=,-]+ for kernels.
bool valid_plugin_name(const char* name);
bool valid_kernel_name(const char* name);

}  // namespace arbiter
