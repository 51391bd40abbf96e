#include "common/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include <memory>

namespace arbiter {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto log = std::make_shared<spdlog::logger>("arbiter", sink);
    log->set_pattern("[arbiter %l] %v");
    log->set_level(spdlog::level::warn);
    return log;
  }();
  return *instance;
}

spdlog::level::level_enum to_spdlog_level(int32_t level) {
  switch (level) {
    case ARB_LOG_TRACE: return spdlog::level::trace;
    case ARB_LOG_DEBUG: return spdlog::level::debug;
    case ARB_LOG_INFO: return spdlog::level::info;
    case ARB_LOG_WARN: return spdlog::level::warn;
    case ARB_LOG_ERROR: return spdlog::level::err;
    default: return spdlog::level::off;
  }
}

void set_log_level(arb_log_level level) { logger().set_level(to_spdlog_level(level)); }

}  // namespace arbiter
