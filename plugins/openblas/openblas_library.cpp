#include "openblas_library.hpp"

#include "cpu_features.hpp"
#include "openblas_memo.hpp"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#ifndef ARBITER_OPENBLAS_SONAME
#define ARBITER_OPENBLAS_SONAME "libopenblas.so.0"
#endif
#ifndef ARBITER_OPENBLAS_PATH
#define ARBITER_OPENBLAS_PATH ARBITER_OPENBLAS_SONAME
#endif

namespace arbiter::plugins::openblas {
namespace {

// For tests only: the first load runs with OPENBLAS_CORETYPE set to this, as if OpenBLAS had
// chosen it itself, so that the override path runs on a CPU that OpenBLAS does know.
constexpr const char* simulate_variable = "ARBITER_OPENBLAS_SIMULATE_CORE";

template <typename Function>
Function symbol(void* handle, const char* name) {
  void* address = ::dlsym(handle, name);
  if (address == nullptr) throw std::runtime_error(std::string(ARBITER_OPENBLAS_SONAME " has no ") + name);
  return reinterpret_cast<Function>(address);
}

// The real paths of every object in the process's link map.
std::set<std::string> objects_in_process() {
  std::set<std::string> objects;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        char real[PATH_MAX];
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0' && ::realpath(info->dlpi_name, real) != nullptr)
          static_cast<std::set<std::string>*>(out)->insert(real);
        return 0;
      },
      &objects);
  return objects;
}

// The process's one library, loaded on the first call; throws when it cannot be.
const OpenBlasLibrary& load_library() {
  static std::mutex mutex;
  static std::unique_ptr<const OpenBlasLibrary> library;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!library) library = std::make_unique<const OpenBlasLibrary>();
  return *library;
}

bool root_only(const std::vector<std::string>& files, std::string* first_other = nullptr) {
  for (const std::string& file : files)
    if (!root_only_file(file)) {
      if (first_other != nullptr) *first_other = file;
      return false;
    }
  return true;
}

}  // namespace

OpenBlasLibrary::OpenBlasLibrary() {
  const std::set<std::string> mapped_before = objects_in_process();
  CoreSituation situation;
  if (const char* user = std::getenv("OPENBLAS_CORETYPE")) situation.user_coretype = user;
  std::string simulated;  // copied: setenv may move what getenv pointed to
  if (const char* value = std::getenv(simulate_variable); value != nullptr && !situation.user_coretype) simulated = value;

  // Loaded already (by the host: NumPy, another BLAS user)? Then its core is fixed.
  handle_ = ::dlopen(ARBITER_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  situation.loaded_before_plugin = handle_ != nullptr;
  if (handle_ != nullptr) {
    resolve();
    simulated.clear();
  } else {
    open(simulated.empty() ? nullptr : simulated.c_str());
  }
  situation.openblas_core = core();
  decision_ = decide_core(this_cpu_features(), situation);

  if (decision_.action == CoreAction::reload) {
    const std::string wanted = decision_.core;
    close();
    if (void* still = ::dlopen(ARBITER_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      handle_ = still;  // something else in the process holds it: its core stays
      resolve();
      decision_ = {CoreAction::keep, core(),
                   core() + ": OpenBLAS's own choice; the library stayed loaded (held elsewhere in the process), "
                            "so " + wanted + " could not be loaded"};
    } else {
      open(wanted.c_str());
      if (core() != wanted) {
        decision_.reason += "; but OpenBLAS runs " + core();
        decision_.core = core();
      }
    }
  }
  if (!simulated.empty())
    decision_.reason += std::string(" [OpenBLAS's first choice simulated: ") + simulate_variable + "=" + simulated + "]";
  loaded_before_plugin_ = situation.loaded_before_plugin;
  link_map* map = nullptr;
  if (::dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) loaded_as_ = map->l_name;
  for (const std::string& object : objects_in_process())
    if (mapped_before.count(object) == 0) mapped_.push_back(object);
}

OpenBlasLibrary::~OpenBlasLibrary() { close(); }

void OpenBlasLibrary::open(const char* coretype) {
  // OpenBLAS reads OPENBLAS_CORETYPE in its constructor, during dlopen, and never again; the
  // variable is set only for that call (the user had not set it) so that child processes
  // decide for themselves. setenv is not safe against a concurrent getenv in another thread;
  // this runs once per process, at the plugin's entry or (with a memo) at its first use, and
  // only when the core is overridden.
  if (coretype != nullptr) ::setenv("OPENBLAS_CORETYPE", coretype, 1);
  handle_ = ::dlopen(ARBITER_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  const char* first_error = handle_ == nullptr ? ::dlerror() : nullptr;
  const std::string error = first_error != nullptr ? first_error : "";
  if (handle_ == nullptr) handle_ = ::dlopen(ARBITER_OPENBLAS_PATH, RTLD_NOW | RTLD_LOCAL);  // the build's copy
  if (coretype != nullptr) ::unsetenv("OPENBLAS_CORETYPE");
  if (handle_ == nullptr) throw std::runtime_error("cannot load OpenBLAS: " + error);
  resolve();
}

void OpenBlasLibrary::close() {
  if (handle_ != nullptr) ::dlclose(handle_);
  handle_ = nullptr;
  sgemm = nullptr;
  get_config_ = nullptr;
  get_corename_ = nullptr;
}

void OpenBlasLibrary::resolve() {
  try {
    sgemm = symbol<decltype(sgemm)>(handle_, "cblas_sgemm");
    get_config_ = symbol<decltype(get_config_)>(handle_, "openblas_get_config");
    get_corename_ = symbol<decltype(get_corename_)>(handle_, "openblas_get_corename");
  } catch (...) {
    close();  // the constructor throws: no destructor will
    throw;
  }
}

std::string OpenBlasLibrary::config() const { return get_config_(); }
std::string OpenBlasLibrary::core() const { return get_corename_(); }

const Announcement& announcement() {
  static const Announcement announced = [] {  // a throwing load is retried on the next call
    Announcement a;
    void* present = ::dlopen(ARBITER_OPENBLAS_SONAME, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (present != nullptr) {
      ::dlclose(present);  // OpenBLAS is here already: using it costs nothing, and its core is fixed
    } else {
      a.memo_key = memo_key();
      if (std::optional<Memo> memo = find_memo(a.memo_key)) {
        a.config = memo->config;
        a.decision = memo->decision;
        a.deferred = true;
        return a;
      }
    }
    const OpenBlasLibrary& library = load_library();
    a.config = library.config();
    a.decision = library.decision();
    if (!library.loaded_before_plugin() && root_only(library.mapped()))
      remember_memo(a.memo_key, {library.loaded_as(), a.config, a.decision});
    return a;
  }();
  return announced;
}

const CheckedLibrary& openblas_library() {
  static const CheckedLibrary checked = [] {
    CheckedLibrary c;
    try {
      const Announcement& said = announcement();
      const OpenBlasLibrary& library = load_library();
      if (said.deferred) {
        // The host hashes what a plugin maps at its load into its identity; what is mapped
        // later escapes that, so it must be what only root could have put there.
        if (std::string other; !root_only(library.mapped(), &other)) {
          c.error = "OpenBLAS, loaded at first use, mapped " + other +
                    ", a file someone other than root could have written (not part of the plugin's identity)";
          return c;
        }
        if (library.config() != said.config || library.decision().core != said.decision.core) {
          c.error = "not what the plugin announced when it was loaded (" + memo_path() + "): OpenBLAS says '" +
                    library.config() + "', not '" + said.config + "'; tuned entries are validated by that, so " +
                    "the plugin refuses everything in this process";
          if (!library.loaded_before_plugin() && root_only(library.mapped()))
            remember_memo(said.memo_key, {library.loaded_as(), library.config(), library.decision()});
          return c;
        }
      }
      c.library = &library;
    } catch (const std::exception& e) {
      c.error = e.what();
    }
    return c;
  }();
  return checked;
}

}  // namespace arbiter::plugins::openblas
