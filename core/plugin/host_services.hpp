// The services the host offers to plugins (arb_host_api): one process-wide, immortal
// instance, so a plugin may keep the pointer for as long as it stays loaded.
#pragma once

#include <arbiter/plugin.h>

namespace arbiter {

const arb_host_api* host_services();

}  // namespace arbiter
