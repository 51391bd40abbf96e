#include "common/text_file.hpp"

#include "common/failure.hpp"

#include <fstream>
#include <sstream>

namespace arbiter {

std::string read_text_file(const std::string& path, const char* what, arb_status status) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(status, std::string("cannot read ") + what + " '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace arbiter
