// arbiter: header-only C++ layer for plugin authors, over the C ABI of plugin.h.
//
// A plugin describes itself with a Plugin and its Kernels, and exports the entry with
// ARBITER_PLUGIN. This header turns C++ callables into the C function pointers of the
// ABI and catches every exception at the plugin's edge, so nothing C++ crosses it:
//
//   bool fits(const arb_problem& p, arbiter::plugin::Why& why) {
//     if (p.dtype != ARB_DTYPE_F32) return why.no("f32 only");
//     return true;
//   }
//   void run(const arbiter::plugin::Launch& l) { ... l.operands.x ... }
//
//   ARBITER_PLUGIN(arbiter::plugin::Plugin("mine", "1.0.0")
//                      .kernel(arbiter::plugin::Kernel("softmax_naive", ARB_OP_SOFTMAX)
//                                  .supports(fits)
//                                  .launch(run)))
//
// Build ids: define ARBITER_PLUGIN_BUILD_ID (the CMake helper arbiter_add_plugin sets it
// to a hash of the sources) or call Plugin::build_id.
#pragma once

#include <arbiter/plugin.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifndef ARBITER_PLUGIN_BUILD_ID
#define ARBITER_PLUGIN_BUILD_ID __DATE__ " " __TIME__
#endif

namespace arbiter::plugin {

// Throw from a launch to report a specific status; any other std::exception reports
// ARB_ERR_KERNEL, std::bad_alloc ARB_ERR_OUT_OF_MEMORY.
class Error : public std::runtime_error {
 public:
  Error(arb_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  arb_status status() const noexcept { return status_; }

 private:
  arb_status status_;
};

namespace detail {
inline void write_message(char* buffer, size_t capacity, const char* message) {
  if (buffer == nullptr || capacity == 0) return;
  std::snprintf(buffer, capacity, "%s", message);
}
}  // namespace detail

// Where a supports() predicate writes why it refused a problem (no allocation).
class Why {
 public:
  Why(char* buffer, size_t capacity) : buffer_(buffer), capacity_(capacity) {}
  // Records a printf-style reason and returns false, for `return why.no("...")`.
  __attribute__((format(printf, 2, 3))) bool no(const char* format, ...) {
    if (buffer_ != nullptr && capacity_ > 0) {
      va_list args;
      va_start(args, format);
      std::vsnprintf(buffer_, capacity_, format, args);
      va_end(args);
    }
    return false;
  }

 private:
  char* buffer_;
  size_t capacity_;
};

// Everything one launch receives.
struct Launch {
  const arb_problem& problem;
  const arb_operands& operands;
  void* workspace;
  size_t workspace_bytes;
  void* stream;
};

using SupportsFn = std::function<bool(const arb_problem&, Why&)>;
using LaunchFn = std::function<void(const Launch&)>;
using WorkspaceFn = std::function<size_t(const arb_problem&)>;

namespace detail {
// The host's services, as offered to the most recent entry call (contexts may call the
// entry from several threads at once). The host keeps them alive for the whole process.
inline std::atomic<const arb_host_api*>& host_slot() {
  static std::atomic<const arb_host_api*> host{nullptr};
  return host;
}
}  // namespace detail

inline const arb_host_api* host_api() { return detail::host_slot().load(std::memory_order_acquire); }

// Logs through the host (if it offers logging); `plugin` names the sender.
__attribute__((format(printf, 3, 4))) inline void log(arb_log_level level, const char* plugin,
                                                      const char* format, ...) {
  const arb_host_api* host = host_api();
  if (host == nullptr || !ARB_HAS_FIELD(arb_host_api, host, log) || host->log == nullptr) return;
  char message[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  host->log(host->host_ctx, level, plugin, message);
}

class Kernel {
 public:
  Kernel(std::string name, arb_op op, DLDeviceType device = kDLCPU) : name_(std::move(name)) {
    c_.struct_size = sizeof(arb_kernel);
    c_.op = op;
    c_.device_type = device;
  }
  Kernel& supports(SupportsFn fn) { supports_ = std::move(fn); return *this; }
  Kernel& launch(LaunchFn fn) { launch_ = std::move(fn); return *this; }
  Kernel& workspace(WorkspaceFn fn) { workspace_ = std::move(fn); return *this; }
  Kernel& priority(int32_t priority) { c_.priority = priority; return *this; }
  Kernel& provenance(arb_provenance provenance) { c_.provenance = provenance; return *this; }
  Kernel& nondeterministic() { c_.flags |= ARB_KERNEL_FLAG_NONDETERMINISTIC; return *this; }
  Kernel& tf32() { c_.flags |= ARB_KERNEL_FLAG_TF32; return *this; }

 private:
  friend class Plugin;

  // Fixes the C view; called once the kernel sits at its final address.
  const arb_kernel* finish() {
    if (!supports_ || !launch_) throw std::logic_error("kernel '" + name_ + "' needs supports() and launch()");
    c_.name = name_.c_str();
    c_.ctx = this;
    c_.supports = &supports_trampoline;
    c_.workspace_size = workspace_ ? &workspace_trampoline : nullptr;
    c_.launch = &launch_trampoline;
    return &c_;
  }

  static int32_t supports_trampoline(void* ctx, const arb_problem* problem, char* why,
                                     size_t capacity) noexcept {
    try {
      Why reason(why, capacity);
      return static_cast<Kernel*>(ctx)->supports_(*problem, reason) ? 1 : 0;
    } catch (const std::exception& e) {
      detail::write_message(why, capacity, e.what());
    } catch (...) {
      detail::write_message(why, capacity, "supports() threw an unknown exception");
    }
    return 0;
  }

  static arb_status workspace_trampoline(void* ctx, const arb_problem* problem, size_t* bytes) noexcept {
    try {
      *bytes = static_cast<Kernel*>(ctx)->workspace_(*problem);
      return ARB_OK;
    } catch (...) {
      return ARB_ERR_KERNEL;
    }
  }

  static arb_status launch_trampoline(void* ctx, const arb_problem* problem, const arb_operands* operands,
                                      void* workspace, size_t workspace_bytes, void* stream, char* err,
                                      size_t err_capacity) noexcept {
    try {
      static_cast<Kernel*>(ctx)->launch_(Launch{*problem, *operands, workspace, workspace_bytes, stream});
      return ARB_OK;
    } catch (const Error& e) {
      detail::write_message(err, err_capacity, e.what());
      return e.status();
    } catch (const std::bad_alloc&) {
      detail::write_message(err, err_capacity, "out of memory");
      return ARB_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
      detail::write_message(err, err_capacity, e.what());
    } catch (...) {
      detail::write_message(err, err_capacity, "launch threw an unknown exception");
    }
    return ARB_ERR_KERNEL;
  }

  std::string name_;
  SupportsFn supports_;
  LaunchFn launch_;
  WorkspaceFn workspace_;
  arb_kernel c_{};
};

class Plugin {
 public:
  Plugin(std::string name, std::string version) : name_(std::move(name)), version_(std::move(version)) {}
  Plugin& build_id(std::string id) { build_id_ = std::move(id); return *this; }
  Plugin& description(std::string text) { description_ = std::move(text); return *this; }
  Plugin& provenance(arb_provenance provenance) { provenance_ = provenance; return *this; }
  Plugin& priority(int32_t priority) { priority_ = priority; return *this; }
  Plugin& runtime_version(std::string version) { runtime_version_ = std::move(version); return *this; }
  Plugin& kernel(Kernel kernel) {
    kernels_.push_back(std::make_unique<Kernel>(std::move(kernel)));
    return *this;
  }

  // The C descriptor; pointers into this object, which must not move afterwards.
  // Called once, by the entry, when the plugin is built.
  const arb_plugin_descriptor* descriptor() {
    c_kernels_.clear();
    for (auto& k : kernels_) c_kernels_.push_back(k->finish());
    c_.struct_size = sizeof(arb_plugin_descriptor);
    c_.abi_major = ARB_PLUGIN_ABI_MAJOR;
    c_.abi_minor = ARB_PLUGIN_ABI_MINOR;
    c_.name = name_.c_str();
    c_.version = version_.c_str();
    c_.build_id = build_id_.c_str();
    c_.description = description_.c_str();
    c_.provenance = provenance_;
    c_.priority = priority_;
    c_.kernels = c_kernels_.data();
    c_.kernel_count = c_kernels_.size();
    c_.runtime_version = runtime_version_.c_str();
    return &c_;
  }

 private:
  std::string name_, version_, build_id_ = ARBITER_PLUGIN_BUILD_ID, description_, runtime_version_;
  arb_provenance provenance_ = ARB_PROVENANCE_HAND_TUNED;
  int32_t priority_ = 0;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<const arb_kernel*> c_kernels_;
  arb_plugin_descriptor c_{};
};

namespace detail {
// Lets ARBITER_PLUGIN take a builder chain (an lvalue) or a factory call (a prvalue).
inline Plugin take(Plugin& plugin) { return std::move(plugin); }
inline Plugin take(Plugin&& plugin) { return std::move(plugin); }

// The body of arbiter_plugin_entry: checks the host, builds the plugin once, answers.
template <typename MakePlugin>
arb_status entry(const arb_host_api* host, const arb_plugin_descriptor** out, char* err, size_t capacity,
                 MakePlugin make_plugin) noexcept {
  if (host == nullptr || out == nullptr) {
    write_message(err, capacity, "arbiter_plugin_entry: null host or descriptor pointer");
    return ARB_ERR_INVALID_ARGUMENT;
  }
  if (!ARB_HAS_FIELD(arb_host_api, host, abi_minor)) {
    write_message(err, capacity, "host API struct too small to carry a version");
    return ARB_ERR_VERSION;
  }
  if (host->abi_major != ARB_PLUGIN_ABI_MAJOR) {
    char message[160];
    std::snprintf(message, sizeof message, "plugin built for plugin ABI %d.%d, host offers %u.%u",
                  ARB_PLUGIN_ABI_MAJOR, ARB_PLUGIN_ABI_MINOR, host->abi_major, host->abi_minor);
    write_message(err, capacity, message);
    return ARB_ERR_VERSION;
  }
  host_slot().store(host, std::memory_order_release);
  try {
    // Built once, thread-safely; a throwing build is retried on the next call.
    static Plugin plugin = make_plugin();
    static const arb_plugin_descriptor* const descriptor = plugin.descriptor();
    *out = descriptor;
    return ARB_OK;
  } catch (const Error& e) {
    write_message(err, capacity, e.what());
    return e.status();
  } catch (const std::exception& e) {
    write_message(err, capacity, e.what());
  } catch (...) {
    write_message(err, capacity, "plugin initialisation threw an unknown exception");
  }
  return ARB_ERR_PLUGIN;
}
}  // namespace detail

}  // namespace arbiter::plugin

// Defines the plugin's one exported symbol. `make_plugin_expr` builds the Plugin; it runs
// once, on the first entry call, and may throw to refuse loading (e.g. missing hardware).
#define ARBITER_PLUGIN(make_plugin_expr)                                                             \
  extern "C" ARB_PLUGIN_EXPORT arb_status arbiter_plugin_entry(                                      \
      const arb_host_api* host, const arb_plugin_descriptor** descriptor, char* err, size_t capacity) { \
    return ::arbiter::plugin::detail::entry(host, descriptor, err, capacity,                         \
                                            []() -> ::arbiter::plugin::Plugin {      \
      return ::arbiter::plugin::detail::take(make_plugin_expr);                                     \
    }); \
  }
