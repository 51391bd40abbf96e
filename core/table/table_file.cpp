#include "table/table_file.hpp"

#include "common/atomic_file.hpp"
#include "common/failure.hpp"
#include "common/text_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

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

// The first '\n' in `text` (npos if none): inline, as lines are short (memchr's call and
// set-up cost more than the search).
size_t newline(std::string_view text) {
  size_t i = 0;
#ifdef __SSE2__
  for (; i + 16 <= text.size(); i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
    if (const int mask = _mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')))) return i + __builtin_ctz(mask);
  }
#endif
  for (; i < text.size(); ++i)
    if (text[i] == '\n') return i;
  return std::string_view::npos;
}

}  // namespace

bool feed_table_file(const std::string& path, size_t limit, WrittenTableReader& reader) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_on_exit{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<unsigned long long>(st.st_size) > limit)
    return false;
  constexpr size_t kPiece = size_t(1) << 20;
  // A piece, after the unfinished line of the one before (not zeroed: read() fills it).
  size_t capacity = 2 * kPiece, carried = 0, total = 0;
  std::unique_ptr<char[]> buffer(new char[capacity]);
  for (;;) {
    if (capacity - carried < kPiece) {  // a line longer than a piece
      capacity *= 2;
      std::unique_ptr<char[]> larger(new char[capacity]);
      std::memcpy(larger.get(), buffer.get(), carried);
      buffer = std::move(larger);
    }
    ssize_t n;
    while ((n = ::read(fd, buffer.get() + carried, kPiece)) < 0 && errno == EINTR) {
    }
    if (n < 0) return false;
    total += static_cast<size_t>(n);
    if (total > limit) return false;  // grew while read
    std::string_view rest(buffer.get(), carried + static_cast<size_t>(n));
    for (size_t end; (end = newline(rest)) != std::string_view::npos; rest.remove_prefix(end + 1))
      if (!reader.line(rest.substr(0, end + 1))) return false;
    if (n == 0) return rest.empty() || reader.line(rest);
    reader.flush();
    std::memmove(buffer.get(), rest.data(), rest.size());
    carried = rest.size();
  }
}

TuningTable load_table_file(const std::string& path, size_t limit) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return TuningTable();
  TuningTable table;
  if (WrittenTableReader reader; feed_table_file(path, limit, reader) && reader.finish(table)) return table;
  return TuningTable::parse_general(read_text_file(path, "tuning table", ARB_ERR_TABLE, limit), path);
}

TuningTable load_table_file(const std::string& path, size_t limit, const std::vector<std::string>& keep) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return TuningTable();
  TuningTable table;
  if (WrittenTableReader reader(&keep); feed_table_file(path, limit, reader) && reader.finish(table)) return table;
  table = TuningTable::parse_general(read_text_file(path, "tuning table", ARB_ERR_TABLE, limit), path);
  table.keep_only(keep);
  return table;
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
