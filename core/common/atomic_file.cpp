#include "common/atomic_file.hpp"

#include "common/failure.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace arbiter {
namespace {

[[noreturn]] void io_error(arb_status status, const std::string& what, const std::string& path) {
  fail(status, fmt::format("{} '{}': {}", what, path, std::strerror(errno)));
}

void write_all(int fd, std::string_view text, const std::string& path, arb_status status) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error(status, "cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view text, arb_status status) {
  const std::filesystem::path target = std::filesystem::absolute(path);
  std::random_device random;
  const std::string temporary =
      fmt::format("{}.tmp-{}-{:08x}", target.string(), static_cast<long>(::getpid()), random());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_error(status, "cannot create", temporary);
  try {
    write_all(fd, text, temporary, status);
    if (::fsync(fd) != 0) io_error(status, "cannot flush", temporary);
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    errno = saved;
    io_error(status, "cannot replace", target.string());
  }
  // Make the rename itself durable.
  const int dir = ::open(target.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace arbiter
