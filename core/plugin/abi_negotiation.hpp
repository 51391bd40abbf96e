// Version negotiation between the host and a plugin (ABI rule 2, docs/architecture.md):
// equal major required; across minors each side uses only what the older one knows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace arbiter {

struct AbiVersion {
  uint32_t major = 0;
  uint32_t minor = 0;
};

// Why the two cannot work together, or nothing when they can.
std::optional<std::string> abi_incompatibility(AbiVersion host, AbiVersion plugin);

// The minor version both sides understand.
inline uint32_t agreed_minor(AbiVersion host, AbiVersion plugin) {
  return host.minor < plugin.minor ? host.minor : plugin.minor;
}

}  // namespace arbiter
