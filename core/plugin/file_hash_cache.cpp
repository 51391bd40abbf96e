#include "plugin/file_hash_cache.hpp"

#include "common/atomic_file.hpp"
#include "common/failure.hpp"
#include "common/log.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <sstream>

namespace arbiter {
namespace {

constexpr const char* kHeader = "arbiter file hashes 1";
// A file changed this recently is not remembered: its times may not move at its next change.
constexpr time_t kRacySeconds = 3;
// More entries than any install has plugin files; past it the cache starts again.
constexpr size_t kMaxEntries = 1024;

using Entries = std::map<FileIdentity, std::string, FileIdentityLess>;

std::string cache_folder() {
  if (const char* dir = std::getenv("ARBITER_CACHE_DIR")) return dir;  // "" turns the cache off
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/') return std::string(xdg) + "/arbiter";
  if (const char* home = std::getenv("HOME"); home && home[0] == '/') return std::string(home) + "/.cache/arbiter";
  return "";
}

// Only this user (or root) can have written it: owned by this user or root, and not writable
// by group or others.
bool written_by_this_user_only(const struct stat& st) {
  return (st.st_uid == ::geteuid() || st.st_uid == 0) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The entries of the cache file's text; false if any line does not parse.
bool parse(const std::string& text, Entries& entries) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    unsigned long long dev, ino, mtime_s, mtime_ns, ctime_s, ctime_ns;
    long long size;
    std::string sha256, extra;
    if (!(fields >> dev >> ino >> size >> mtime_s >> mtime_ns >> ctime_s >> ctime_ns >> sha256) || (fields >> extra) ||
        size < 0 || mtime_ns >= 1000000000ULL || ctime_ns >= 1000000000ULL || !is_sha256_hex(sha256))
      return false;
    FileIdentity id;
    id.device = static_cast<dev_t>(dev);
    id.inode = static_cast<ino_t>(ino);
    id.size = static_cast<off_t>(size);
    id.modified = {static_cast<time_t>(mtime_s), static_cast<long>(mtime_ns)};
    id.changed = {static_cast<time_t>(ctime_s), static_cast<long>(ctime_ns)};
    entries[id] = sha256;
  }
  return true;
}

std::string format(const Entries& entries) {
  std::string text = std::string(kHeader) + "\n";
  for (const auto& [id, sha256] : entries)
    text += fmt::format("{} {} {} {} {} {} {} {}\n", static_cast<unsigned long long>(id.device),
                        static_cast<unsigned long long>(id.inode), static_cast<long long>(id.size),
                        static_cast<long long>(id.modified.tv_sec), id.modified.tv_nsec,
                        static_cast<long long>(id.changed.tv_sec), id.changed.tv_nsec, sha256);
  return text;
}

// The folder, made if missing (0700), and writable by this user alone.
bool usable_folder(const std::string& folder) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = folder.find('/', slash + 1);
    const std::string part = folder.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  return ::stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && written_by_this_user_only(st);
}

}  // namespace

bool cacheable_file(int fd, const struct stat& st) {
  if (!written_by_this_user_only(st)) return false;
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case EXT4_SUPER_MAGIC:  // ext2 and ext3 too
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case TMPFS_MAGIC:
    case OVERLAYFS_SUPER_MAGIC:
    case 0x2fc12fc1UL:  // ZFS
    case F2FS_SUPER_MAGIC:
      return true;
    default:
      return false;
  }
}

FileHashCache::FileHashCache(std::string folder) : folder_(std::move(folder)) {}

FileHashCache& FileHashCache::of_process() {
  static FileHashCache* instance = new FileHashCache(cache_folder());  // never destroyed: used during exit
  return *instance;
}

std::string FileHashCache::lookup(const FileIdentity& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  load();
  auto it = entries_.find(id);
  return it == entries_.end() ? std::string() : it->second;
}

void FileHashCache::remember(const FileIdentity& id, const std::string& sha256, time_t now) {
  if (id.modified.tv_sec + kRacySeconds > now || id.changed.tv_sec + kRacySeconds > now) return;
  std::lock_guard<std::mutex> lock(mutex_);
  load();
  if (!usable_) return;
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_[id] = sha256;
  try {
    write_file_atomically(path_, format(entries_), ARB_ERR_PLUGIN);
  } catch (const Failure& e) {
    logger().debug("file hash cache not written: {}", e.what());
    usable_ = false;  // no second try in this process
  }
}

std::string FileHashCache::path() {
  std::lock_guard<std::mutex> lock(mutex_);
  load();
  return usable_ ? path_ : std::string();
}

void FileHashCache::load() {
  if (loaded_) return;
  loaded_ = true;
  if (folder_.empty() || folder_[0] != '/' || !usable_folder(folder_)) return;
  path_ = folder_ + "/file-hashes";
  usable_ = true;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
  if (fd < 0) {
    if (errno != ENOENT) usable_ = false;  // a link, or unreadable: left alone
    return;                                // none yet: written at the first hash
  }
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && written_by_this_user_only(st) && st.st_size < (1 << 20)) {
    text.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    for (ssize_t n; done < text.size() && (n = ::read(fd, text.data() + done, text.size() - done)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      done += static_cast<size_t>(n);
    }
    text.resize(done);
  } else {
    usable_ = false;  // another's file, or not a file: neither read nor replaced
    logger().debug("file hash cache '{}' ignored: not a regular file that this user alone can write", path_);
  }
  ::close(fd);
  if (usable_ && !parse(text, entries_)) entries_.clear();  // corrupt: rebuilt as hashes come
}

}  // namespace arbiter
