// The runtime's logger: one process-wide spdlog logger named "arbiter" writing to stderr.
// Plugins log through the host API into the same logger. Never used on the hot path.
#pragma once

#include <arbiter/types.h>

#include <spdlog/logger.h>

namespace arbiter {

spdlog::logger& logger();
void set_log_level(arb_log_level level);
spdlog::level::level_enum to_spdlog_level(int32_t level);

}  // namespace arbiter
