// Internal error type: a status plus a message. Thrown inside the runtime and turned into
// an arb_status and arb_last_error() at the C ABI edge (core/api); never crosses it.
#pragma once

#include <arbiter/types.h>

#include <stdexcept>
#include <string>

namespace arbiter {

class Failure : public std::runtime_error {
 public:
  Failure(arb_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  arb_status status() const noexcept { return status_; }

 private:
  arb_status status_;
};

[[noreturn]] inline void fail(arb_status status, const std::string& message) { throw Failure(status, message); }

}  // namespace arbiter
