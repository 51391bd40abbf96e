// Colon-separated path lists (ARBITER_PLUGIN_PATH, ARBITER_GENERATED_PATH, ...), read the same
// way by the host and the plugins: empty items are skipped, as the shell does for PATH.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

inline std::vector<std::string> split_path_list(const char* list) {
  std::vector<std::string> out;
  if (list == nullptr) return out;
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string_view item = rest.substr(0, colon);
    if (!item.empty()) out.emplace_back(item);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return out;
}

}  // namespace arbiter
