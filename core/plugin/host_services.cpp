#include "plugin/host_services.hpp"

#include "common/log.hpp"
#include "version.hpp"

namespace arbiter {
namespace {

void log_from_plugin(void*, int32_t level, const char* plugin, const char* message) {
  logger().log(to_spdlog_level(level), "[plugin {}] {}", plugin ? plugin : "?", message ? message : "");
}

}  // namespace

const arb_host_api* host_services() {
  static const arb_host_api api = {
      sizeof(arb_host_api), ARB_PLUGIN_ABI_MAJOR, ARB_PLUGIN_ABI_MINOR, ARBITER_VERSION_STRING, nullptr,
      &log_from_plugin,
  };
  return &api;
}

}  // namespace arbiter
