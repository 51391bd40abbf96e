#include "table/table_file.hpp"

#include "common/atomic_file.hpp"
#include "common/failure.hpp"
#include "common/text_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  fail(ARB_ERR_TABLE, fmt::format("{} '{}': {}", what, path, std::strerror(errno)));
}

// An exclusive advisory lock on "<path>.lock", held for the object's life.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : path_(path + ".lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) io_error("cannot open the lock file", path_);
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const int saved = errno;
        ::close(fd_);
        errno = saved;
        io_error("cannot lock", path_);
      }
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

TuningTable load_table_file(const std::string& path, size_t limit) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return TuningTable();
  return TuningTable::parse(read_text_file(path, "tuning table", ARB_ERR_TABLE, limit), path);
}

TuningTable open_table_for_update(const std::string& path, size_t limit) {
  TuningTable table = load_table_file(path, limit);
  check_writable(path, ARB_ERR_TABLE);
  return table;
}

void write_table_file(const std::string& path, const TuningTable& table) {
  write_file_atomically(path, table.to_toml(), ARB_ERR_TABLE);
}

void update_table_file(const std::string& path, const std::function<void(TuningTable&)>& update, size_t limit) {
  std::error_code ec;
  const fs::path parent = fs::absolute(path).parent_path();
  if (!fs::is_directory(parent, ec) && !fs::create_directories(parent, ec))
    fail(ARB_ERR_TABLE, fmt::format("cannot create the folder of the tuning table '{}': {}", path, ec.message()));
  FileLock lock(path);
  TuningTable table = load_table_file(path, limit);  // what other writers put there meanwhile
  update(table);
  write_table_file(path, table);
}

}  // namespace arbiter
