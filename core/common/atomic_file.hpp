// Writing a file so that readers see the old content or the new, never half of either. The
// new content is written to an unnamed file in the target's folder (O_TMPFILE), flushed, given
// a temporary name and renamed over the target, and the folder flushed: a writer killed while
// writing leaves nothing behind, and one killed in the two calls between naming and renaming
// leaves a temporary that the next write to the same target removes. A target without write
// permission (a table made read-only on purpose) is never replaced; a replaced target keeps
// its permission bits.
#pragma once

#include <arbiter/types.h>

#include <string>
#include <string_view>

namespace arbiter {

// Throws Failure(status, "<what> '<path>': <why>") when a step fails; the temporary is
// removed then.
void write_file_atomically(const std::string& path, std::string_view text, arb_status status);

// Throws Failure(status) where write_file_atomically would refuse `path` now: a target that is
// not a regular file or is read-only, or a folder (or, for a folder still to be made, its
// nearest existing parent) that is not a folder this process may write. A check before long
// work; the write itself can still fail.
void check_writable(const std::string& path, arb_status status);

}  // namespace arbiter
