#include "plugin/abi_negotiation.hpp"

#include <fmt/format.h>

namespace arbiter {

std::optional<std::string> abi_incompatibility(AbiVersion host, AbiVersion plugin) {
  if (host.major == plugin.major) return std::nullopt;
  return fmt::format("plugin ABI {}.{} is incompatible with the host's {}.{} (major versions differ)", plugin.major,
                     plugin.minor, host.major, host.minor);
}

}  // namespace arbiter
