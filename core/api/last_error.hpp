// The calling thread's last error message (arb_last_error) and the status names. A fixed
// thread-local buffer: recording an error or clearing it never allocates.
#pragma once

#include <arbiter/types.h>

namespace arbiter {

arb_status set_last_error(arb_status status, const char* message) noexcept;
void clear_last_error() noexcept;
const char* last_error() noexcept;
const char* status_string(int32_t status) noexcept;

}  // namespace arbiter
