#include "onednn_library.hpp"

#include "onednn_isa.hpp"

#include <dlfcn.h>

#include <cstdlib>

#ifndef ARBITER_ONEDNN_SONAME
#define ARBITER_ONEDNN_SONAME "libdnnl.so.2"
#endif
#ifndef ARBITER_ONEDNN_PATH
#define ARBITER_ONEDNN_PATH ARBITER_ONEDNN_SONAME
#endif

namespace arbiter::plugins::onednn {
namespace {

// oneDNN reads ONEDNN_<NAME> first, then DNNL_<NAME>.
std::string max_isa_setting() {
  for (const char* variable : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* value = std::getenv(variable); value != nullptr && *value != '\0')
      return std::string(variable) + "=" + value;
  return {};
}

}  // namespace

std::string Expectation::runtime_version() const {
  std::string text = "oneDNN " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) +
                     " (" ARBITER_ONEDNN_SONAME "), isa " + isa_name;
  if (!max_isa_variable.empty()) text += " (" + max_isa_variable + ")";
  return text;
}

const Expectation& expectation() {
  static const Expectation expected = [] {
    const std::string setting = max_isa_setting();
    const std::string value = setting.empty() ? std::string() : setting.substr(setting.find('=') + 1);
    const IsaChoice isa = expected_isa(this_cpu_isa_features(), setting.empty() ? nullptr : value.c_str());
    return Expectation{DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, DNNL_VERSION_PATCH, isa.value, isa.name, setting};
  }();
  return expected;
}

OneDnnLibrary::OneDnnLibrary() {
  handle_ = ::dlopen(ARBITER_ONEDNN_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* first = ::dlerror();
    error_ = std::string("cannot load oneDNN: ") + (first ? first : ARBITER_ONEDNN_SONAME);
    handle_ = ::dlopen(ARBITER_ONEDNN_PATH, RTLD_NOW | RTLD_LOCAL);  // the build's copy
    if (handle_ == nullptr) return;
    error_.clear();
  }
  // dlsym from this object also records that the plugin uses libdnnl, so that at exit the
  // plugin's destructors (which release primitives) run before libdnnl's.
#define ARBITER_ONEDNN_RESOLVE(name)                                                  \
  name = reinterpret_cast<decltype(&::name)>(::dlsym(handle_, #name));                \
  if (name == nullptr && error_.empty()) error_ = ARBITER_ONEDNN_SONAME " has no " #name;
  ARBITER_ONEDNN_FUNCTIONS(ARBITER_ONEDNN_RESOLVE)
#undef ARBITER_ONEDNN_RESOLVE
  if (!error_.empty()) return;

  // The entry announced a version and an ISA (runtime_version, part of every tuned entry's
  // validators); a library that differs would make those entries lie, so it is not used.
  const Expectation& expected = expectation();
  const dnnl_version_t* version = dnnl_version();
  if (version == nullptr || version->major != expected.major || version->minor != expected.minor ||
      version->patch != expected.patch) {
    error_ = "the plugin was built against oneDNN " + std::to_string(expected.major) + "." +
             std::to_string(expected.minor) + "." + std::to_string(expected.patch) + " but " ARBITER_ONEDNN_SONAME " is " +
             (version ? std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
                            std::to_string(version->patch)
                      : std::string("of no version")) +
             "; rebuild the plugin";
    return;
  }
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  if (isa != expected.isa) {
    error_ = "oneDNN runs isa " + isa_name(isa) + ", not the " + expected.isa_name +
             " the plugin announced when it was loaded (its runtime_version)";
    return;
  }
  if (const dnnl_status_t s = dnnl_engine_create(&engine_, dnnl_cpu, 0); s != dnnl_success) {
    engine_ = nullptr;
    error_ = std::string("oneDNN cannot create a CPU engine: ") + status_name(s);
  }
}

OneDnnLibrary::~OneDnnLibrary() {
  if (engine_ != nullptr) dnnl_engine_destroy(engine_);
  // handle_ stays open: unloading a library that runs OpenMP threads is not safe.
}

const char* OneDnnLibrary::status_name(dnnl_status_t status) {
  switch (status) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown status";
  }
}

const OneDnnLibrary& onednn_library() {
  static const OneDnnLibrary library;
  return library;
}

}  // namespace arbiter::plugins::onednn
