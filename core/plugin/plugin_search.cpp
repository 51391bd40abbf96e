#include "plugin/plugin_search.hpp"

#include "arbiter_base/path_list.hpp"
#include "version.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "arbiter_";
constexpr std::string_view kSuffix = ".so";

}  // namespace

std::string plugin_name_from_file(const fs::path& path) {
  const std::string file = path.filename().string();
  if (file.size() <= kPrefix.size() + kSuffix.size()) return "";
  if (file.compare(0, kPrefix.size(), kPrefix) != 0) return "";
  if (file.compare(file.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return "";
  return file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
}

namespace {

// The file this code was loaded from: libarbiter.so, or the program itself when it links
// the core statically. For the main program the loader records the name it was started by
// (argv[0]: "arbiter" when found through PATH), which says nothing about where it lies, so
// the kernel's /proc/self/exe is asked instead.
fs::path this_module_file() {
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(reinterpret_cast<const void*>(&this_module_file), &info, reinterpret_cast<void**>(&map),
                RTLD_DL_LINKMAP) == 0)
    return {};
  const bool main_program = map == nullptr || map->l_name == nullptr || map->l_name[0] == '\0';
  std::error_code ec;
  fs::path module = main_program || info.dli_fname == nullptr ? fs::read_symlink("/proc/self/exe", ec)
                                                              : fs::canonical(fs::path(info.dli_fname), ec);
  return ec ? fs::path() : module;
}

}  // namespace

fs::path install_plugin_dir() {
  const fs::path module = this_module_file();
  if (module.empty()) return {};
  std::error_code ec;
  for (const char* relative : {ARBITER_PLUGIN_DIR_FROM_LIBDIR, ARBITER_PLUGIN_DIR_FROM_BINDIR}) {
    const fs::path dir = (module.parent_path() / relative).lexically_normal();
    if (fs::is_directory(dir, ec)) return dir;
  }
  return {};
}

fs::path helper_program_path(const std::string& name) {
  const fs::path plugins = install_plugin_dir();
  return plugins.empty() ? fs::path() : plugins.parent_path() / name;
}

fs::path emulated_plugin_dir() {
  const fs::path plugins = install_plugin_dir();
  if (plugins.empty()) return {};
  std::error_code ec;
  const fs::path dir = plugins.parent_path() / "plugins-emulated";
  return fs::is_directory(dir, ec) ? dir : fs::path();
}

std::vector<PluginCandidate> find_plugin_files(const PluginsConfig& config, bool emulated_cuda,
                                               std::vector<std::string>& notes) {
  std::vector<std::pair<std::string, std::string>> roots;  // path, origin
  std::set<std::string> emulated_names;  // plugins the emulated folder replaces
  if (emulated_cuda && config.search_default_paths) {
    if (const fs::path dir = emulated_plugin_dir(); !dir.empty()) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(dir, ec))
        if (const std::string name = plugin_name_from_file(entry.path()); !name.empty()) emulated_names.insert(name);
    } else {
      notes.push_back("cuda.device is \"emulated\", but this installation has no emulated plugins (plugins-emulated)");
    }
  }
  for (const std::string& p : config.paths) roots.emplace_back(p, "config");
  if (!emulated_names.empty()) roots.emplace_back(emulated_plugin_dir().string(), "emulated");
  if (config.search_default_paths) {
    for (const std::string& p : split_path_list(std::getenv("ARBITER_PLUGIN_PATH")))
      roots.emplace_back(p, "ARBITER_PLUGIN_PATH");
    if (const fs::path dir = install_plugin_dir(); !dir.empty()) roots.emplace_back(dir.string(), "install");
  }

  std::vector<PluginCandidate> found;
  std::set<fs::path> seen;
  auto add = [&](const fs::path& file, const std::string& origin) {
    if (origin != "emulated" && emulated_names.count(plugin_name_from_file(file)) != 0) {
      notes.push_back("plugin " + file.string() + " (" + origin + "): its emulated build is used instead");
      return;
    }
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(file, ec);
    if (ec) canonical = file;
    if (seen.insert(canonical).second) found.push_back({canonical, origin});
  };
  for (const auto& [root, origin] : roots) {
    std::error_code ec;
    const fs::file_status status = fs::status(root, ec);
    if (fs::is_directory(status)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(root, ec))
        if (!plugin_name_from_file(entry.path()).empty()) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const fs::path& file : files) add(file, origin);
    } else if (fs::exists(status)) {
      add(root, origin);
    } else {
      notes.push_back("plugin path '" + root + "' (" + origin + ") does not exist");
    }
  }
  return found;
}

}  // namespace arbiter
