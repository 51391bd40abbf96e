// Where plugins are looked for, in order: the config's paths, ARBITER_PLUGIN_PATH
// (colon-separated), then the install's own plugin folder, found relative to the module
// that holds this code (libarbiter.so, or the arbiter program), so an install can move.
#pragma once

#include "config/config.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

struct PluginCandidate {
  std::filesystem::path path;
  std::string origin;  // "config", "ARBITER_PLUGIN_PATH", "install" or "emulated"
};

// Found in the install's own folders (plugins/ or plugins-emulated/): part of the
// installation, like libarbiter itself, rather than a file a user pointed at.
inline bool shipped_with_install(std::string_view origin) { return origin == "install" || origin == "emulated"; }

// Folders contribute their files named arbiter_<name>.so, sorted by name; files named
// directly are taken as they are. The same file reached twice is listed once.
// Paths that do not exist are skipped and reported in `notes`. With emulated_cuda the
// install's emulated builds (emulated_plugin_dir()) come first among the default paths, and
// replace every other plugin file of the same name.
std::vector<PluginCandidate> find_plugin_files(const PluginsConfig& config, bool emulated_cuda,
                                               std::vector<std::string>& notes);

// The plugin folder of this installation (or build tree), empty if none is found.
std::filesystem::path install_plugin_dir();
// Beside it, the plugins built for the SIMT emulator (<libdir>/arbiter/plugins-emulated),
// empty if there is no such folder.
std::filesystem::path emulated_plugin_dir();

// Where the install keeps a helper program (the plugin probe, the kernel sandbox): beside
// the plugin folder, <libdir>/arbiter/<name>; empty when there is no install folder.
std::filesystem::path helper_program_path(const std::string& name);

// "arbiter_cpu.so" -> "cpu"; "" if the file is not named like a plugin.
std::string plugin_name_from_file(const std::filesystem::path& path);

}  // namespace arbiter
