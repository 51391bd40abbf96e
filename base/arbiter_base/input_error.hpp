// The error the shared readers throw: a file that cannot be read, or text that does not parse.
// The message names the source (and line and column where there is one); the host turns it into
// its caller's status (a config or a tuning-table error), a plugin into its own error.
#pragma once

#include <stdexcept>

namespace arbiter {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace arbiter
