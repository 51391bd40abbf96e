#include "api/last_error.hpp"

#include <cstdio>

namespace arbiter {
namespace detail {
constinit thread_local char last_error_buffer[4096] = "";
}
using detail::last_error_buffer;

arb_status set_last_error(arb_status status, const char* message) noexcept {
  std::snprintf(last_error_buffer, sizeof last_error_buffer, "%s", message ? message : "");
  return status;
}

const char* last_error() noexcept { return last_error_buffer; }

const char* status_string(int32_t status) noexcept {
  switch (status) {
    case ARB_OK: return "ARB_OK";
    case ARB_ERR_INVALID_ARGUMENT: return "ARB_ERR_INVALID_ARGUMENT";
    case ARB_ERR_UNSUPPORTED: return "ARB_ERR_UNSUPPORTED";
    case ARB_ERR_CONFIG: return "ARB_ERR_CONFIG";
    case ARB_ERR_PLUGIN: return "ARB_ERR_PLUGIN";
    case ARB_ERR_KERNEL: return "ARB_ERR_KERNEL";
    case ARB_ERR_OUT_OF_MEMORY: return "ARB_ERR_OUT_OF_MEMORY";
    case ARB_ERR_VERSION: return "ARB_ERR_VERSION";
    case ARB_ERR_BUFFER_TOO_SMALL: return "ARB_ERR_BUFFER_TOO_SMALL";
    case ARB_ERR_INTERNAL: return "ARB_ERR_INTERNAL";
    case ARB_ERR_TABLE: return "ARB_ERR_TABLE";
  }
  return "ARB_ERR_UNKNOWN";
}

}  // namespace arbiter
