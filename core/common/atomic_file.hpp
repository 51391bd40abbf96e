// Writing a file so that readers see the old content or the new, never half of either: a
// temporary file beside the target, flushed, renamed over it, the folder flushed. A writer
// killed at any point leaves the previous file (and perhaps a stray temporary).
#pragma once

#include <arbiter/types.h>

#include <string>
#include <string_view>

namespace arbiter {

// Throws Failure(status, "<what> '<path>': <errno text>") when a step fails; the temporary
// is removed then.
void write_file_atomically(const std::string& path, std::string_view text, arb_status status);

}  // namespace arbiter
