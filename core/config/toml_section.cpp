#include "config/toml_section.hpp"

#include "common/failure.hpp"

namespace arbiter {

toml::table parse_toml(std::string_view text, const std::string& source, arb_status status) {
  try {
    return parse_toml_document(text, source);
  } catch (const InputError& e) {
    fail(status, e.what());
  }
}

void Section::raise(const std::string& message) const { fail(status_, message); }

}  // namespace arbiter
