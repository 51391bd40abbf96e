// The calling thread's last error message (arb_last_error) and the status names. A fixed
// thread-local buffer: recording an error or clearing it never allocates.
#pragma once

#include <arbiter/types.h>

namespace arbiter {

namespace detail {
// The buffer itself, declared here so that clearing it inlines into every call's success path.
extern constinit thread_local char last_error_buffer[4096];
}

arb_status set_last_error(arb_status status, const char* message) noexcept;
inline void clear_last_error() noexcept { detail::last_error_buffer[0] = '\0'; }
const char* last_error() noexcept;
const char* status_string(int32_t status) noexcept;

}  // namespace arbiter
