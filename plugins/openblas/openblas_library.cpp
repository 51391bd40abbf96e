#include "openblas_library.hpp"

#include "cpu_features.hpp"

#include <dlfcn.h>

#include <cstdlib>
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

}  // namespace

OpenBlasLibrary::OpenBlasLibrary() {
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
}

OpenBlasLibrary::~OpenBlasLibrary() { close(); }

void OpenBlasLibrary::open(const char* coretype) {
  // OpenBLAS reads OPENBLAS_CORETYPE in its constructor, during dlopen, and never again; the
  // variable is set only for that call (the user had not set it) so that child processes
  // decide for themselves. setenv is not safe against a concurrent getenv in another thread;
  // this runs once per plugin load, in the plugin's entry.
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

const OpenBlasLibrary& openblas_library() {
  static const OpenBlasLibrary library;  // a throwing load is retried on the next call
  return library;
}

}  // namespace arbiter::plugins::openblas
