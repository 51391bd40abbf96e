// Code a plugin brings beside its file. A plugin's entry may dlopen libraries of its own (a
// "sidecar"), and its kernels may run code from them; hashing only the plugin file would let
// a swapped sidecar keep the plugin's identity, its trust and its table verdicts. The host
// therefore diffs the process's link map across the load and the entry call and hashes every
// new object that is not in one of the system's library folders into the plugin's identity.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace arbiter {

// A shared object mapped into the process: the name the loader found it by, and its real path.
struct MappedObject {
  std::string loaded_as;
  std::string real_path;
  bool operator<(const MappedObject& other) const { return real_path < other.real_path; }
};

// Every shared object with a file in the process's link map now (the program and the vDSO
// excluded).
std::set<MappedObject> mapped_objects();

// Is the object in one of the dynamic loader's own folders (/lib, /usr/lib, /lib64,
// /usr/lib64, those /etc/ld.so.conf lists and those of the libraries in ldconfig's cache) or
// below one through folders only root can write, by the name it was loaded as or its real
// path, and not in the folder of `plugin_file` or below it? Such objects are the system's,
// and only root could have put them there; everything else a plugin maps is part of the plugin.
bool in_system_library_folder(const MappedObject& object, const std::string& plugin_file);

struct CompanionObject {
  std::string path;    // real path
  std::string sha256;  // of its content as read now; "" if it could not be read
};

// The objects of `after` that are neither in `before`, nor the plugin file itself, nor the
// system's; merged with those recorded for an earlier load of the same plugin file in this
// process (a second load maps nothing new: the first one's companions are still there).
std::vector<std::string> companions_of(const std::string& plugin_file, const std::set<MappedObject>& before,
                                       const std::set<MappedObject>& after);

// Hashes each companion (cached per unchanged file, like the plugin's own hash).
std::vector<CompanionObject> hash_companions(const std::vector<std::string>& paths);

// The plugin's identity for trust, verdicts and tuning-table entries: its file's SHA-256 when
// it maps nothing else, else the SHA-256 of the file's hash and its companions' hashes (in a
// fixed order), so that changing any of them changes the identity.
std::string plugin_identity(const std::string& file_sha256, const std::vector<CompanionObject>& companions);

}  // namespace arbiter
