#include "plugin/plugin_file.hpp"

#include "arbiter_base/sha256.hpp"
#include "plugin/file_hash_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

FileIdentity identity_of(const struct stat& st) {
  FileIdentity id;
  id.device = st.st_dev;
  id.inode = st.st_ino;
  id.size = st.st_size;
  id.modified = st.st_mtim;
  id.changed = st.st_ctim;
  return id;
}

auto tie_identity(const FileIdentity& id) {
  return std::make_tuple(id.device, id.inode, id.size, id.modified.tv_sec, id.modified.tv_nsec, id.changed.tv_sec,
                         id.changed.tv_nsec);
}

// A descriptor closed on every way out.
struct OpenFile {
  explicit OpenFile(int descriptor) : fd(descriptor) {}
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int fd;
};

// Who may have written something with this owner and mode, or "".
std::string foreign_writer(const struct stat& st, bool directory) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) return fmt::format("owned by another user (uid {})", st.st_uid);
  if ((st.st_mode & S_IWOTH) != 0 && !(directory && (st.st_mode & S_ISVTX) != 0)) return "writable by every user";
  return "";
}

}  // namespace

bool FileIdentity::operator==(const FileIdentity& other) const { return tie_identity(*this) == tie_identity(other); }

bool FileIdentityLess::operator()(const FileIdentity& a, const FileIdentity& b) const {
  return tie_identity(a) < tie_identity(b);
}

std::string insecure_file_reason(const fs::path& file) {
  std::error_code ec;
  fs::path path = fs::absolute(file, ec);
  if (ec) return "";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";  // the loader reports a missing file
  if (std::string who = foreign_writer(st, false); !who.empty()) return "the file " + path.string() + " is " + who;
  // The folders the file is reached through: whoever may write one may replace the file.
  for (fs::path dir = path.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) == 0)
      if (std::string who = foreign_writer(st, true); !who.empty()) return "the folder " + dir.string() + " is " + who;
    if (dir == dir.root_path()) break;
  }
  return "";
}

bool file_identity(const fs::path& file, FileIdentity& identity) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return false;
  identity = identity_of(st);
  return true;
}

HashedFile hash_file(const fs::path& file) {
  static std::mutex mutex;
  static std::map<FileIdentity, std::string, FileIdentityLess> known;
  HashedFile out;
  const time_t opened = ::time(nullptr);  // before the open: the file hash cache's racy rule
  const OpenFile fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) {
    out.error = "cannot open " + file.string();
    return out;
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    out.error = "not a regular file";
    return out;
  }
  out.identity = identity_of(st);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(out.identity); it != known.end()) {
      out.sha256 = it->second;
      return out;
    }
  }
  const bool cacheable = cacheable_file(fd.fd, st);
  if (std::string remembered = cacheable ? FileHashCache::of_process().lookup(out.identity) : "";
      !remembered.empty()) {
    out.sha256 = std::move(remembered);
    std::lock_guard<std::mutex> lock(mutex);
    known[out.identity] = out.sha256;
    return out;
  }
  Sha256 hash;
  std::vector<unsigned char> buffer(1 << 20);
  for (ssize_t got; (got = ::read(fd.fd, buffer.data(), buffer.size())) != 0;) {
    if (got < 0) {
      out.error = "cannot read " + file.string();
      return out;
    }
    hash.update(buffer.data(), static_cast<size_t>(got));
  }
  out.sha256 = hash.hex_digest();
  if (cacheable) FileHashCache::of_process().remember(out.identity, out.sha256, opened);
  std::lock_guard<std::mutex> lock(mutex);
  known[out.identity] = out.sha256;
  return out;
}

}  // namespace arbiter
