#include "plugin/plugin_loader.hpp"

#include "common/log.hpp"
#include "plugin/abi_negotiation.hpp"
#include "plugin/host_services.hpp"
#include "plugin/plugin_file.hpp"
#include "problem/op_table.hpp"

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <mutex>
#include <set>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxKernels = 65536;

const char* or_empty(const char* s) { return s ? s : ""; }

// Copies a versioned struct the way its producer sized it into the host's layout:
// fields the producer did not know stay zero, fields the host does not know are dropped.
template <typename T>
T widen(const T* source) {
  T copy;
  std::memset(&copy, 0, sizeof copy);
  std::memcpy(&copy, source, source->struct_size < sizeof(T) ? source->struct_size : sizeof(T));
  copy.struct_size = sizeof(T);
  return copy;
}

// Fills kernels from the descriptor; returns why the plugin must be refused, or "".
std::string read_kernels(const arb_plugin_descriptor& d, PluginRecord& record) {
  if (d.kernel_count > kMaxKernels) return fmt::format("implausible kernel count {}", d.kernel_count);
  if (d.kernel_count > 0 && d.kernels == nullptr) return "kernel_count > 0 but kernels is NULL";
  std::set<std::string> names;
  for (size_t i = 0; i < d.kernel_count; ++i) {
    const arb_kernel* k = d.kernels[i];
    if (k == nullptr) return fmt::format("kernel #{} is NULL", i);
    if (k->struct_size < ARB_KERNEL_MIN_SIZE)
      return fmt::format("kernel #{}: struct_size {} is below the minimum {}", i, k->struct_size, ARB_KERNEL_MIN_SIZE);
    if (!valid_kernel_name(k->name)) return fmt::format("kernel #{}: invalid name '{}'", i, or_empty(k->name));
    if (!names.insert(k->name).second) return fmt::format("kernel name '{}' appears twice", k->name);
    if (find_op(k->op) == nullptr)
      return fmt::format("kernel '{}': unknown op {}", k->name, k->op);
    if (k->device_type != kDLCPU && k->device_type != kDLCUDA)
      return fmt::format("kernel '{}': unsupported device type {}", k->name, k->device_type);
    if (k->supports == nullptr || k->launch == nullptr)
      return fmt::format("kernel '{}': supports and launch are required", k->name);
    if (k->provenance < ARB_PROVENANCE_UNSPECIFIED || k->provenance > ARB_PROVENANCE_AI_GENERATED)
      return fmt::format("kernel '{}': unknown provenance {}", k->name, k->provenance);
    KernelRecord kernel;
    kernel.abi = widen(k);
    kernel.name = record.name + "." + k->name;
    kernel.provenance = kernel.abi.provenance != ARB_PROVENANCE_UNSPECIFIED ? kernel.abi.provenance : record.provenance;
    kernel.plugin = &record;
    record.kernels.push_back(std::move(kernel));
  }
  return "";
}

// Everything after a successful entry call; returns why the plugin must be refused, or "".
std::string read_descriptor(const arb_plugin_descriptor* d, PluginRecord& record) {
  if (d == nullptr) return "entry returned ARB_OK but no descriptor";
  if (d->struct_size < ARB_PLUGIN_DESCRIPTOR_MIN_SIZE)
    return fmt::format("descriptor struct_size {} is below the minimum {}", d->struct_size,
                       ARB_PLUGIN_DESCRIPTOR_MIN_SIZE);
  record.abi_major = d->abi_major;
  record.abi_minor = d->abi_minor;
  const AbiVersion host{ARB_PLUGIN_ABI_MAJOR, ARB_PLUGIN_ABI_MINOR}, plugin{d->abi_major, d->abi_minor};
  if (auto why = abi_incompatibility(host, plugin)) return *why;
  record.agreed_minor = agreed_minor(host, plugin);
  const arb_plugin_descriptor descriptor = widen(d);
  if (!valid_plugin_name(descriptor.name))
    return fmt::format("invalid plugin name '{}' (use [a-z0-9_-])", or_empty(descriptor.name));
  record.name = descriptor.name;
  record.version = or_empty(descriptor.version);
  record.build_id = or_empty(descriptor.build_id);
  record.description = or_empty(descriptor.description);
  record.runtime_version = or_empty(descriptor.runtime_version);  // zero (absent) in older layouts
  record.provenance = descriptor.provenance;
  record.own_priority = descriptor.priority;
  record.priority = descriptor.priority;
  if (record.provenance < ARB_PROVENANCE_REFERENCE || record.provenance > ARB_PROVENANCE_AI_GENERATED)
    return fmt::format("unknown provenance {}", record.provenance);
  return read_kernels(descriptor, record);
}

}  // namespace

bool valid_plugin_name(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 64) return false;
  for (const char* c = name; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-')) return false;
  return true;
}

bool valid_kernel_name(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 256) return false;
  for (const char* c = name; *c; ++c)
    if (!(std::isalnum(static_cast<unsigned char>(*c)) || std::strchr("_.:=,-", *c))) return false;
  return true;
}

const char* state_name(PluginState state) {
  switch (state) {
    case PluginState::loaded: return "loaded";
    case PluginState::disabled: return "disabled";
    default: return "rejected";
  }
}

namespace {

// `expected`: the plugin has nothing to offer on this host (its entry said ARB_ERR_UNSUPPORTED,
// as a CUDA plugin does without a GPU): worth an info line, not a warning every context.
void reject(PluginRecord& record, std::string reason, bool expected = false) {
  record.state = PluginState::rejected;
  record.reason = std::move(reason);
  record.kernels.clear();
  record.keep_alive.reset();  // release() if the entry succeeded, then unload
  logger().log(expected ? spdlog::level::info : spdlog::level::warn, "plugin '{}' rejected: {} (host plugin ABI {}.{})",
               record.path, record.reason, ARB_PLUGIN_ABI_MAJOR, ARB_PLUGIN_ABI_MINOR);
}

// Calls the plugin's entry and reads what it answers; `library` (may be null) stays open for
// as long as the record holds the plugin.
void run_entry(PluginRecord& record, arb_plugin_entry_fn entry, std::shared_ptr<void> library) {
  const arb_plugin_descriptor* descriptor = nullptr;
  char message[1024] = {0};
  arb_status status;
  try {
    status = entry(host_services(), &descriptor, message, sizeof message);
  } catch (const std::exception& e) {
    return reject(record, fmt::format("entry threw a C++ exception across the C ABI: {}", e.what()));
  } catch (...) {
    return reject(record, "entry threw a C++ exception across the C ABI");
  }
  message[sizeof message - 1] = '\0';
  if (status != ARB_OK)
    return reject(record, fmt::format("entry failed (status {}): {}", static_cast<int>(status), message),
                  status == ARB_ERR_UNSUPPORTED);

  // From here on the plugin's release() runs before the library is unloaded.
  void (*release)(void*) = nullptr;
  void* plugin_ctx = nullptr;
  if (descriptor != nullptr && descriptor->struct_size >= ARB_PLUGIN_DESCRIPTOR_MIN_SIZE) {
    if (ARB_HAS_FIELD(arb_plugin_descriptor, descriptor, release)) release = descriptor->release;
    if (ARB_HAS_FIELD(arb_plugin_descriptor, descriptor, plugin_ctx)) plugin_ctx = descriptor->plugin_ctx;
  }
  record.keep_alive = std::shared_ptr<void>(nullptr, [library, release, plugin_ctx](void*) {
    if (release != nullptr) release(plugin_ctx);
  });
  if (std::string why = read_descriptor(descriptor, record); !why.empty()) return reject(record, why);
  record.state = PluginState::loaded;
  logger().info("plugin '{}' {} loaded from {} ({} kernels, ABI {}.{})", record.name, record.version, record.path,
                record.kernels.size(), record.abi_major, record.abi_minor);
}

}  // namespace

std::unique_ptr<PluginRecord> load_plugin(const fs::path& path, const std::string& origin, bool allow_insecure_files,
                                          const PluginProbe& probe) {
  auto record = std::make_unique<PluginRecord>();
  record->path = path.string();
  record->origin = origin;

  std::error_code fs_error;
  if (!fs::is_regular_file(path, fs_error)) {
    reject(*record, "not a regular file");
    return record;
  }
  if (std::string why = insecure_file_reason(path); !why.empty() && !allow_insecure_files) {
    reject(*record, why + ": someone else could have put code there (plugins.allow_insecure_files = true loads it)");
    return record;
  }
  // The content is read before any of it runs; what is loaded must be what was hashed.
  const HashedFile hashed = hash_file(path);
  if (hashed.sha256.empty()) {
    reject(*record, hashed.error);
    return record;
  }
  record->file_sha256 = record->sha256 = hashed.sha256;
  if (probe) {
    if (std::string why = probe(path, hashed.sha256); !why.empty()) {
      reject(*record, why);
      return record;
    }
  }

  // One load at a time, so that what appears in the link map meanwhile is this plugin's.
  // Recursive: an entry that creates a context of its own waits for nothing.
  static std::recursive_mutex loading;
  const std::lock_guard<std::recursive_mutex> lock(loading);
  const std::set<MappedObject> mapped_before = mapped_objects();
  auto library = std::make_shared<boost::dll::shared_library>();
  std::error_code load_error;
  ::dlerror();  // clear, so the message read below is this load's
  library->load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, load_error);
  if (load_error || !library->is_loaded()) {
    const char* loader_message = ::dlerror();
    reject(*record, fmt::format("cannot load: {}", loader_message ? loader_message : load_error.message()));
    return record;
  }
  FileIdentity now;
  if (!file_identity(path, now) || !(now == hashed.identity)) {
    reject(*record, "the file changed while it was being loaded");
    return record;
  }
  if (!library->has(ARB_PLUGIN_ENTRY_SYMBOL)) {
    reject(*record, fmt::format("no '{}' symbol: not an arbiter plugin", ARB_PLUGIN_ENTRY_SYMBOL));
    return record;
  }
  auto entry = library->get<std::remove_pointer_t<arb_plugin_entry_fn>>(ARB_PLUGIN_ENTRY_SYMBOL);
  // An emulated build depends on libarbiter_emu: its own symbol scope resolves the marker.
  const bool emulated = library->has("arbiter_emulator_build");
  run_entry(*record, entry, library);
  record->emulated = emulated;
  if (record->state == PluginState::loaded) {
    record->companions = hash_companions(companions_of(path.string(), mapped_before, mapped_objects()));
    record->sha256 = plugin_identity(record->file_sha256, record->companions);
    for (const CompanionObject& companion : record->companions)
      logger().info("plugin '{}' mapped {} (sha256 {}): part of its identity", record->name, companion.path,
                    companion.sha256.empty() ? "unreadable" : companion.sha256);
  }
  return record;
}

std::string builtin_plugin_path() {
  Dl_info info{};
  const bool found = ::dladdr(reinterpret_cast<const void*>(&builtin_oracle_entry), &info) != 0 && info.dli_fname;
  return fmt::format("{} (built in)", found ? info.dli_fname : "libarbiter");
}

std::unique_ptr<PluginRecord> load_builtin_oracle() {
  auto record = std::make_unique<PluginRecord>();
  record->path = builtin_plugin_path();
  record->origin = "built-in";
  run_entry(*record, &builtin_oracle_entry, nullptr);
  if (record->state == PluginState::loaded) {
    record->trust = ARB_PLUGIN_TRUST_ORACLE;
    for (KernelRecord& kernel : record->kernels) kernel.provenance = ARB_PROVENANCE_REFERENCE;
  }
  return record;
}

}  // namespace arbiter
