// The SHA-256 of plugin files, remembered across processes, so that a context does not read
// and hash some 17 MB of plugins every time a program starts (it was 97% of a context's cost).
//
// An entry is keyed by what the kernel changes whenever the bytes can have changed: device,
// inode, size, modification time and status-change time (ctime, which no user can set). So
// the cache says nothing a file says about itself: it is the host's own earlier reading of
// the same bytes. Entries for files changed in the last seconds are not kept: file times tick
// coarsely, and a file rewritten within one tick of its hashing would keep its old key (git's
// "racily clean" case).
//
// Only files the cache can key safely are remembered or looked up: owned by this user or root,
// writable by no group or other user (whoever can write a file can also change its bytes
// through a shared mapping without moving its times), on a local filesystem of a type whose
// times the kernel keeps (ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, ZFS, F2FS), never a network
// or FUSE filesystem, whose server reports whatever times it likes.
//
// The cache lives in $ARBITER_CACHE_DIR, else $XDG_CACHE_HOME/arbiter, else ~/.cache/arbiter
// (ARBITER_CACHE_DIR="" turns it off), as the file `file-hashes`. It is read only when this
// user alone can have written it and the folder it is in; a file that does not parse is
// ignored and rewritten. Losing it costs one hashing of each plugin, nothing else.
#pragma once

#include "plugin/plugin_file.hpp"

#include <sys/stat.h>

#include <ctime>
#include <map>
#include <mutex>
#include <string>

namespace arbiter {

// Whether the open file `fd` (with its fstat `st`) may be keyed by the cache (above).
bool cacheable_file(int fd, const struct stat& st);

class FileHashCache {
 public:
  // The cache in `folder` (made, 0700, if missing); "" is a cache that is off.
  explicit FileHashCache(std::string folder);
  FileHashCache(const FileHashCache&) = delete;
  FileHashCache& operator=(const FileHashCache&) = delete;

  // The process's cache, in the folder the environment names (above).
  static FileHashCache& of_process();

  // The remembered hash of the file with this identity, or "".
  std::string lookup(const FileIdentity& identity);

  // Remembers a hash just computed, and writes the cache file (atomically), unless the file
  // changed too recently to be keyed safely: `now` is a time taken before the file was opened.
  void remember(const FileIdentity& identity, const std::string& sha256, time_t now);

  // The cache file's path, or "" when the cache is off or unusable.
  std::string path();

 private:
  void load();

  std::string folder_, path_;
  std::mutex mutex_;
  bool loaded_ = false, usable_ = false;
  std::map<FileIdentity, std::string, FileIdentityLess> entries_;
};

}  // namespace arbiter
