// Fuzz target: shape suites (core/tune/shape_suite.hpp, format in docs/suite-format.md).
// Expected: a suite, or Failure with ARB_ERR_CONFIG (the file) or ARB_ERR_INVALID_ARGUMENT
// (a problem in it).
#include "common/failure.hpp"
#include "tune/shape_suite.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    arbiter::parse_suite(text, "fuzz-suite.toml");
  } catch (const arbiter::Failure& f) {
    if (f.status() != ARB_ERR_CONFIG && f.status() != ARB_ERR_INVALID_ARGUMENT) throw;
  }
  return 0;
}
