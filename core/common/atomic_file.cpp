#include "common/atomic_file.hpp"

#include "common/failure.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

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

// "<target>.tmp-<pid>-": the prefix of this process's temporaries for `target`.
std::string temporary_prefix(const fs::path& target, long pid) { return fmt::format("{}.tmp-{}-", target.string(), pid); }

// Removes temporaries for `target` that writers killed between naming and renaming left
// behind: those whose process no longer exists.
void remove_stray_temporaries(const fs::path& target) {
  std::error_code ec;
  const std::string stem = target.filename().string() + ".tmp-";
  for (const auto& entry : fs::directory_iterator(target.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + stem.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

// The target's permission bits, kept (0644 for a new file); a target with no write bit, or
// one this process may not write, is refused (rename() would replace it all the same).
mode_t kept_mode(const fs::path& target, arb_status status) {
  struct stat existing {};
  if (::stat(target.c_str(), &existing) != 0) return 0644;
  if (!S_ISREG(existing.st_mode)) fail(status, fmt::format("cannot replace '{}': not a regular file", target.string()));
  if ((existing.st_mode & 0222) == 0 || ::access(target.c_str(), W_OK) != 0)
    fail(status, fmt::format("'{}' is read-only (mode {:04o}): it is not replaced; make it writable to update it",
                             target.string(), existing.st_mode & 07777));
  return existing.st_mode & 07777;
}

}  // namespace

void check_writable(const std::string& path, arb_status status) {
  const fs::path target = fs::absolute(path);
  kept_mode(target, status);
  fs::path folder = target.parent_path();
  std::error_code ec;
  while (!fs::exists(folder, ec) && folder.has_relative_path()) folder = folder.parent_path();
  if (!fs::is_directory(folder, ec))
    fail(status, fmt::format("cannot write '{}': '{}' is not a folder", target.string(), folder.string()));
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    fail(status, fmt::format("cannot write '{}': the folder '{}' is not writable: {}", target.string(), folder.string(),
                             std::strerror(errno)));
}

void write_file_atomically(const std::string& path, std::string_view text, arb_status status) {
  const fs::path target = fs::absolute(path);
  const mode_t mode = kept_mode(target, status);
  remove_stray_temporaries(target);

  std::random_device random;
  const std::string temporary = temporary_prefix(target, static_cast<long>(::getpid())) + fmt::format("{:08x}", random());
  // Unnamed until it is whole; a folder whose file system has no O_TMPFILE gets a named one.
  // (Naming it goes through /proc/self/fd.)
  int fd = ::access("/proc/self/fd", X_OK) == 0
               ? ::open(target.parent_path().c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode)
               : -1;
  const bool unnamed = fd >= 0;
  if (!unnamed) fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) io_error(status, "cannot create", unnamed ? target.parent_path().string() : temporary);
  bool named = !unnamed;
  try {
    write_all(fd, text, temporary, status);
    if (::fchmod(fd, mode) != 0) io_error(status, "cannot set the mode of", temporary);  // the umask trimmed it
    if (::fsync(fd) != 0) io_error(status, "cannot flush", temporary);
    if (unnamed) {
      const std::string self = fmt::format("/proc/self/fd/{}", fd);
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temporary.c_str(), AT_SYMLINK_FOLLOW) != 0)
        io_error(status, "cannot name", temporary);
      named = true;
    }
  } catch (...) {
    ::close(fd);
    if (named) ::unlink(temporary.c_str());
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
