#include "plugin/companion_objects.hpp"

#include "arbiter_base/sha256.hpp"
#include "plugin/plugin_file.hpp"

#include <glob.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

std::string real_path_of(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

// The real path of a plugin file, or the path as given if it cannot be resolved.
std::string plugin_real_path(const std::string& plugin_file) {
  const std::string real = real_path_of(plugin_file);
  return real.empty() ? plugin_file : real;
}

int collect_object(dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == '\0') return 0;  // the program itself
  std::string real = real_path_of(name);
  if (!real.empty())  // the vDSO and objects whose file is gone have none
    static_cast<std::set<MappedObject>*>(out)->insert(MappedObject{name, std::move(real)});
  return 0;
}

// /etc/ld.so.conf and the files it includes (glob patterns, relative to /etc), one folder per
// line; '#' starts a comment. "hwcap" lines of old glibc are skipped.
void read_loader_config(const fs::path& file, std::vector<std::string>& folders, int depth) {
  if (depth > 8) return;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    const auto first = line.find_first_not_of(" \t"), last = line.find_last_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first, last - first + 1);
    if (line.rfind("include", 0) == 0 && line.size() > 7 && (line[7] == ' ' || line[7] == '\t')) {
      std::string pattern = line.substr(line.find_first_not_of(" \t", 7));
      if (pattern.front() != '/') pattern = (file.parent_path() / pattern).string();
      glob_t matches{};
      if (::glob(pattern.c_str(), 0, nullptr, &matches) == 0)
        for (size_t i = 0; i < matches.gl_pathc; ++i) read_loader_config(matches.gl_pathv[i], folders, depth + 1);
      ::globfree(&matches);
    } else if (line.front() == '/') {
      folders.push_back(line);
    }
  }
}

// A folder owned by root that neither its group nor others may write.
bool only_root_can_write(const std::string& folder) {
  struct stat st {};
  return ::stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// The folders of the libraries /etc/ld.so.cache lists (ldconfig's cache: it also knows
// folders that alternatives point into, such as Debian's openblas-pthread). The cache's
// strings are NUL-terminated; its paths are the ones that start with '/'.
void read_loader_cache(const fs::path& file, std::vector<std::string>& folders) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> seen;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\0', at), text.size());
    if (text[at] == '/' && end > at + 1) {
      const std::string folder = fs::path(text.substr(at, end - at)).parent_path().string();
      if (seen.insert(folder).second) folders.push_back(folder);
    }
    at = end + 1;
  }
}

// The loader's folders that only root can change, by real path.
const std::set<std::string>& system_library_folders() {
  static const std::set<std::string> folders = [] {
    std::vector<std::string> candidates = {"/lib", "/lib64", "/usr/lib", "/usr/lib64"};
    read_loader_config("/etc/ld.so.conf", candidates, 0);
    read_loader_cache("/etc/ld.so.cache", candidates);
    std::set<std::string> safe;
    for (const std::string& folder : candidates) {
      const std::string real = real_path_of(folder);
      if (!real.empty() && real != "/" && only_root_can_write(real)) safe.insert(real);
    }
    return safe;
  }();
  return folders;
}

}  // namespace

std::set<MappedObject> mapped_objects() {
  std::set<MappedObject> objects;
  ::dl_iterate_phdr(collect_object, &objects);
  return objects;
}

bool in_system_library_folder(const MappedObject& object, const std::string& plugin_file) {
  const std::string plugin_folder = fs::path(plugin_real_path(plugin_file)).parent_path().string();
  // By the folder of the name it was loaded as, and of its real file: a system folder's
  // symlink may point elsewhere, but only root could have made it. Subfolders count when every
  // folder on the way is root's alone (RUNPATHs into Debian's openblas-pthread, say).
  for (const std::string& name : {object.loaded_as, object.real_path}) {
    const fs::path path(name);
    if (!path.is_absolute()) continue;
    const std::string real_folder = real_path_of(path.parent_path().string());
    if (real_folder.empty()) continue;
    for (fs::path folder = real_folder; !folder.empty(); folder = folder.parent_path()) {
      const std::string text = folder.string();
      if (text == plugin_folder) break;  // beside the plugin (or below it): the plugin's
      if (system_library_folders().count(text) > 0) return true;
      if (!only_root_can_write(text) || folder == folder.root_path()) break;
    }
  }
  return false;
}

std::vector<std::string> companions_of(const std::string& plugin_file, const std::set<MappedObject>& before,
                                       const std::set<MappedObject>& after) {
  static std::mutex mutex;
  static std::map<std::string, std::set<std::string>> recorded;  // plugin real path -> companions seen
  const std::string plugin = plugin_real_path(plugin_file);
  std::set<std::string> found;
  for (const MappedObject& object : after)
    if (before.count(object) == 0 && object.real_path != plugin && !in_system_library_folder(object, plugin))
      found.insert(object.real_path);
  std::lock_guard<std::mutex> lock(mutex);
  std::set<std::string>& all = recorded[plugin];
  all.insert(found.begin(), found.end());
  return {all.begin(), all.end()};
}

std::vector<CompanionObject> hash_companions(const std::vector<std::string>& paths) {
  std::vector<CompanionObject> companions;
  for (const std::string& path : paths) companions.push_back({path, hash_file(path).sha256});
  return companions;
}

std::string plugin_identity(const std::string& file_sha256, const std::vector<CompanionObject>& companions) {
  if (companions.empty()) return file_sha256;
  std::vector<std::string> hashes;
  for (const CompanionObject& c : companions) hashes.push_back(c.sha256.empty() ? "unreadable " + c.path : c.sha256);
  std::sort(hashes.begin(), hashes.end());  // content, not place: a relocated install keeps its identity
  Sha256 identity;
  identity.update("arbiter plugin identity 1\nfile " + file_sha256 + "\n");
  for (const std::string& h : hashes) identity.update("companion " + h + "\n");
  return identity.hex_digest();
}

}  // namespace arbiter
