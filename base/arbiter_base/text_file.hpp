// Reading a whole text file (configs, tuning tables, shape suites, kernel manifests and their
// sources): the one place that opens them, so that what may be read (and how much) is decided
// once, for the host and the plugins alike.
#pragma once

#include "arbiter_base/input_error.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace arbiter {

// The file's bytes. Throws InputError("cannot read <what> '<path>'") if it cannot be read.
inline std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(std::string("cannot read ") + what + " '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace arbiter
