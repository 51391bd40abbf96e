// One double-quoted string literal that is valid both as a TOML basic string (the tuning
// table) and as a JSON string (`arbiter try`): quotes, backslashes and control characters
// escaped, everything else (UTF-8 included) kept as is.
#pragma once

#include <string>
#include <string_view>

namespace arbiter {

std::string quoted(std::string_view text);

}  // namespace arbiter
