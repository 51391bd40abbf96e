// A count with its noun for reports: "1 shape", "6 shapes", "1 entry", "3 entries".
#pragma once

#include <string>
#include <string_view>

namespace arbiter {

// `plural` defaults to the singular with an s.
inline std::string counted(long long count, std::string_view singular, std::string_view plural = {}) {
  std::string text = std::to_string(count) + ' ';
  if (count == 1) return text.append(singular);
  if (plural.empty()) return text.append(singular).append("s");
  return text.append(plural);
}

}  // namespace arbiter
