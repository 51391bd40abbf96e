// Reading a whole text file (configs, tuning tables, shape suites, kernel manifests and their
// sources): the one place that opens them, so that what may be read (and how much) is decided
// once, for the host and the plugins alike. Only a regular file (or a link to one) is read,
// and only up to a size limit: /dev/zero, a FIFO or a directory named as a config is an
// immediate error, never a hang or a read that fills memory.
#pragma once

#include "arbiter_base/input_error.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace arbiter {

// The most bytes read_text_file reads unless told otherwise: far more than any config, table,
// suite or manifest the project writes (a tuning table of 100,000 entries is some 30 MiB),
// far less than what would exhaust memory.
inline constexpr size_t kTextFileLimit = size_t(64) << 20;

// The file's bytes. Throws InputError("cannot read <what> '<path>': <why>") if it cannot be
// read, is not a regular file, or holds more than `limit` bytes.
inline std::string read_text_file(const std::string& path, const char* what, size_t limit = kTextFileLimit) {
  auto refuse = [&](const std::string& why) -> InputError {
    return InputError(std::string("cannot read ") + what + " '" + path + "': " + why);
  };
  // Non-blocking, so that opening a FIFO without a writer returns at once; only regular
  // files are read past the fstat below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw refuse(std::strerror(errno));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_on_exit{fd};
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw refuse(std::strerror(errno));
  if (S_ISDIR(status.st_mode)) throw refuse("it is a directory");
  if (!S_ISREG(status.st_mode)) throw refuse("not a regular file (a FIFO, a device or a socket)");
  if (static_cast<unsigned long long>(status.st_size) > limit)
    throw refuse(std::to_string(status.st_size) + " bytes, more than the limit of " + std::to_string(limit));
  std::string text(static_cast<size_t>(status.st_size), '\0');
  size_t done = 0;
  for (;;) {
    if (done == text.size()) {
      if (text.size() > limit) throw refuse("it grew past the limit of " + std::to_string(limit) + " bytes while read");
      text.resize(text.size() + 4096);  // a file that grows while it is read: up to the limit + 1
    }
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw refuse(std::strerror(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace arbiter
