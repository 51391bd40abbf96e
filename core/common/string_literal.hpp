// One double-quoted string literal that is valid both as a TOML basic string (the tuning
// table) and as a JSON string (`arbiter try`): quotes, backslashes and control characters
// escaped, everything else (UTF-8 included) kept as is.
//
// Not named `quoted`: a call quoted(s) on a std::string finds std::quoted by argument-dependent
// lookup wherever <iomanip> is in sight, as an exact match that wins; std::quoted escapes only
// quotes and backslashes. With g++ 13's headers it was, and tables were written with raw
// newlines that no TOML reader accepts.
#pragma once

#include <string>
#include <string_view>

namespace arbiter {

std::string string_literal(std::string_view text);

}  // namespace arbiter
