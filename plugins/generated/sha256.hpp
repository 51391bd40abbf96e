// SHA-256 (FIPS 180-4), for source hashes and compile-cache keys. Small and dependency-free.
#pragma once

#include <string>
#include <string_view>

namespace arbiter::generated {

// Lower-case hex digest of the bytes.
std::string sha256_hex(std::string_view bytes);

}  // namespace arbiter::generated
