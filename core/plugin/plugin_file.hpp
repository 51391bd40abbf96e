// What the host checks about a plugin file before it runs any of its code: that it is safe to
// load (ld.so secure-mode style: no one else can have put it there or changed it), and what
// its content is (SHA-256, read by the host: a plugin's identity never rests on its own word).
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

namespace arbiter {

// Why the file, or a folder above it, could have been written by someone other than this
// user or root: world-writable (a folder: without the sticky bit), or owned by another
// non-root user. "" if neither.
std::string insecure_file_reason(const std::filesystem::path& file);

struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  timespec modified{}, changed{};
  bool operator==(const FileIdentity& other) const;
};

// An order on identities, for maps keyed by them.
struct FileIdentityLess {
  bool operator()(const FileIdentity& a, const FileIdentity& b) const;
};

struct HashedFile {
  std::string sha256;     // "" when the file could not be read
  std::string error;      // why not
  FileIdentity identity;  // of the bytes hashed
};

// Reads the file once and hashes it. The hash of an unchanged file (same device, inode, size,
// modification and status-change times) is computed once per process, and remembered across
// processes by the file hash cache (file_hash_cache.hpp).
HashedFile hash_file(const std::filesystem::path& file);

// The file's identity now (to tell that it changed between hashing and loading).
bool file_identity(const std::filesystem::path& file, FileIdentity& identity);

}  // namespace arbiter
