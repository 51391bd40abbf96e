// Fuzz target: the runtime configuration (core/config/config.hpp), TOML through the strict
// reader and toml_screen. Expected: a Config, or Failure(ARB_ERR_CONFIG).
#include "common/failure.hpp"
#include "config/config.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    arbiter::parse_config(text, "fuzz.toml", "/fuzz");
  } catch (const arbiter::Failure& f) {
    if (f.status() != ARB_ERR_CONFIG) throw;
  }
  return 0;
}
