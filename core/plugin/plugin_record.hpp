// What the host knows about one plugin file and its kernels, loaded or not.
#pragma once

#include <arbiter/arbiter.h>
#include <arbiter/plugin.h>

#include "plugin/companion_objects.hpp"

#include <memory>
#include <string>
#include <vector>

namespace arbiter {

enum class PluginState { loaded, disabled, rejected };

struct PluginRecord;

struct KernelRecord {
  std::string name;     // "<plugin>.<kernel>"
  arb_kernel abi{};     // the plugin's struct, widened to this host's layout (absent fields zero)
  int32_t provenance = ARB_PROVENANCE_UNSPECIFIED;  // resolved against the plugin's
  const PluginRecord* plugin = nullptr;
};

struct PluginRecord {
  std::string path;
  std::string origin;  // "built-in", "config", "ARBITER_PLUGIN_PATH", "install", "emulated"
  // The plugin's identity (trust, verdicts, table entries): file_sha256 when it maps no other
  // code, else the hash of that and its companions' (plugin/companion_objects.hpp).
  std::string sha256;
  std::string file_sha256;  // of the file, as the host read it before loading it; "" for the built-in oracle
  std::vector<CompanionObject> companions;  // objects of its own it mapped while loading
  arb_plugin_trust trust = ARB_PLUGIN_TRUST_NONE;  // set by the host (oracle) or the operator's config
  PluginState state = PluginState::rejected;
  std::string reason;  // why rejected or disabled
  std::string name, version, build_id, description;
  std::string runtime_version;  // of the library the plugin wraps; "" if none
  uint32_t abi_major = 0, abi_minor = 0;  // as the plugin declared
  uint32_t agreed_minor = 0;              // the minor both sides understand
  int32_t provenance = ARB_PROVENANCE_UNSPECIFIED;  // as declared: information, never a pass
  bool emulated = false;  // built for the SIMT emulator: it links libarbiter_emu (checked by the host)
  int32_t own_priority = 0;  // as the plugin declared
  int32_t priority = 0;      // effective (config may override)
  std::vector<KernelRecord> kernels;
  // Holds the library open; on reset calls the plugin's release() and then unloads.
  std::shared_ptr<void> keep_alive;
};

const char* state_name(PluginState state);

}  // namespace arbiter
