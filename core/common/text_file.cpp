#include "common/text_file.hpp"

#include "arbiter_base/text_file.hpp"
#include "common/failure.hpp"

namespace arbiter {

std::string read_text_file(const std::string& path, const char* what, arb_status status, size_t limit) {
  try {
    return read_text_file(path, what, limit);
  } catch (const InputError& e) {
    fail(status, e.what());
  }
}

}  // namespace arbiter
