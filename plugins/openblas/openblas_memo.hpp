// What libopenblas said about itself the last time the plugin loaded it, remembered across
// processes so that the plugin's entry can describe OpenBLAS (its runtime_version names the
// version, build options and core: a tuning-table validator) without loading it. Loading
// libopenblas (36 MB, relocated, its constructor probing the CPU and starting threads) was
// most of a context's cost; the plugin now loads it at its first supports() or launch, and
// that load checks what the entry announced (openblas_library.hpp): the memo is a guess that
// is never believed past the first use.
//
// A memo holds for one situation, the key: the plugin file (real path and identity), the CPU
// (vendor, signature and the features the core decision reads), the environment that steers
// OpenBLAS's load (OPENBLAS_CORETYPE, the simulation hook, LD_LIBRARY_PATH) and the loader's
// cache (/etc/ld.so.cache's identity); and for one library file: the name the loader found it
// by and that file's identity (device, inode, size, modification and status-change times)
// now. It is kept only when every object the load mapped was a file only root can write (the
// host hashes any other into the plugin's identity, which a later load would escape).
//
// The file is `openblas-config` in the host's cache folder ($ARBITER_CACHE_DIR, else
// $XDG_CACHE_HOME/arbiter, else ~/.cache/arbiter; ARBITER_CACHE_DIR="" turns it off), read only
// when this user alone can have written it and its folder, replaced atomically.
#pragma once

#include "openblas_coretype.hpp"

#include <optional>
#include <string>
#include <vector>

namespace arbiter::plugins::openblas {

struct Memo {
  std::string loaded_as;  // the library's path as the loader found it (its link map name)
  std::string config;     // openblas_get_config()
  CoreDecision decision;  // action: what was done at that load (informational)
};

// The key of this process's situation (above), as text; "" when the plugin's own file cannot
// be found (then nothing is remembered).
std::string memo_key();

// The memo for `key` whose library file is unchanged, if the cache holds one.
std::optional<Memo> find_memo(const std::string& key);

// Remembers `memo` for `key` (replacing the key's earlier one); false when it was not kept:
// no cache folder, a field with a tab or newline, a library changed in the last seconds.
bool remember_memo(const std::string& key, const Memo& memo);

// Whether only root can have written the file at `path` (and every folder above its real path).
bool root_only_file(const std::string& path);

// The memo file's path ("" when the cache is off).
std::string memo_path();

}  // namespace arbiter::plugins::openblas
