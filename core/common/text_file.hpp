// Reading a whole text file (configs, tuning tables, shape suites): the one place that
// opens them, so that what may be read (and how much) is decided once.
#pragma once

#include <arbiter/types.h>

#include <string>

namespace arbiter {

// The file's bytes. Throws Failure(status, "cannot read <what> '<path>'") if it cannot be read.
std::string read_text_file(const std::string& path, const char* what, arb_status status);

}  // namespace arbiter
