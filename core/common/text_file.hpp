// The host's side of the shared file reader (arbiter_base/text_file.hpp): a file that cannot
// be read becomes Failure(status) with the status the caller chose.
#pragma once

#include "arbiter_base/text_file.hpp"

#include <arbiter/types.h>

#include <string>

namespace arbiter {

// The file's bytes. Throws Failure(status, "cannot read <what> '<path>'") if it cannot be read,
// is not a regular file or is larger than `limit` bytes.
std::string read_text_file(const std::string& path, const char* what, arb_status status,
                           size_t limit = kTextFileLimit);

}  // namespace arbiter
