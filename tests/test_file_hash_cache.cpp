// The file hash cache (core/plugin/file_hash_cache.hpp): plugin hashes remembered across
// processes, keyed so that a changed file is never given its old hash, and a cache file that
// is corrupt or could have been written by someone else is never believed.
#include "plugin/file_hash_cache.hpp"
#include "plugin/plugin_file.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <ctime>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace arbiter;
using arbiter::test::TempDir;

namespace {

const std::string kHashA(64, 'a'), kHashB(64, 'b');

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

FileIdentity identity_of(const std::string& path) {
  FileIdentity id;
  REQUIRE(file_identity(path, id));
  return id;
}

// Late enough that a file written now is no longer "racy".
time_t later() { return ::time(nullptr) + 60; }

}  // namespace

TEST_CASE("file hash cache: a hash remembered by one process is found by the next") {
  TempDir dir;
  write(dir.file("plugin.so"), "plugin bytes");
  const FileIdentity id = identity_of(dir.file("plugin.so"));
  {
    FileHashCache first(dir.file("cache"));
    CHECK(first.lookup(id).empty());
    first.remember(id, kHashA, later());
    CHECK(first.path() == dir.file("cache") + "/file-hashes");
  }
  FileHashCache second(dir.file("cache"));  // a new process reads the file
  CHECK(second.lookup(id) == kHashA);
  struct stat st {};
  REQUIRE(::stat(dir.file("cache").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("file hash cache: a changed file is a different key, even with its old size and times") {
  TempDir dir;
  write(dir.file("plugin.so"), "plugin bytes");
  const FileIdentity before = identity_of(dir.file("plugin.so"));
  FileHashCache(dir.file("cache")).remember(before, kHashA, later());
  // The same size, and the modification time put back: only the status-change time (which no
  // user can set) and possibly the inode tell.
  write(dir.file("plugin.so"), "PLUGIN BYTES");
  struct timespec times[2] = {before.modified, before.modified};
  REQUIRE(::utimensat(AT_FDCWD, dir.file("plugin.so").c_str(), times, 0) == 0);
  FileIdentity after = identity_of(dir.file("plugin.so"));
  CHECK(after.size == before.size);
  CHECK(after.modified.tv_sec == before.modified.tv_sec);
  after.changed = before.changed;
  after.changed.tv_nsec = (before.changed.tv_nsec + 1) % 1000000000;  // the smallest change of ctime
  FileHashCache cache(dir.file("cache"));
  CHECK(cache.lookup(before) == kHashA);
  CHECK(cache.lookup(after).empty());
}

TEST_CASE("file hash cache: a file changed in the last seconds is not remembered") {
  TempDir dir;
  write(dir.file("plugin.so"), "plugin bytes");
  const FileIdentity id = identity_of(dir.file("plugin.so"));
  FileHashCache(dir.file("cache")).remember(id, kHashA, ::time(nullptr));
  CHECK(FileHashCache(dir.file("cache")).lookup(id).empty());
}

TEST_CASE("file hash cache: a corrupt cache file is ignored and rewritten") {
  TempDir dir;
  write(dir.file("plugin.so"), "plugin bytes");
  const FileIdentity id = identity_of(dir.file("plugin.so"));
  FileHashCache(dir.file("cache")).remember(id, kHashA, later());
  const std::string good = read(dir.file("cache/file-hashes"));
  const std::string line = good.substr(good.find('\n') + 1);
  for (const std::string& bad : {
           std::string("arbiter file hashes 2\n") + line,                      // another version
           good.substr(0, good.size() - 10),                                   // cut short
           good.substr(0, good.size() - 1) + " extra\n",                       // a field too many
           good.substr(0, good.size() - 2) + "G\n",                            // not hex
           std::string("arbiter file hashes 1\n1 2 -3 4 5 6 7 ") + kHashB + "\n",  // negative size
           std::string("arbiter file hashes 1\n1 2 3 4 1000000000 6 7 ") + kHashB + "\n",  // ns overflow
       }) {
    CAPTURE(bad);
    write(dir.file("cache/file-hashes"), bad);
    FileHashCache cache(dir.file("cache"));
    CHECK(cache.lookup(id).empty());
    cache.remember(id, kHashB, later());
    CHECK(FileHashCache(dir.file("cache")).lookup(id) == kHashB);
  }
}

TEST_CASE("file hash cache: a cache file or folder that others can write is neither read nor replaced") {
  TempDir dir;
  write(dir.file("plugin.so"), "plugin bytes");
  const FileIdentity id = identity_of(dir.file("plugin.so"));
  FileHashCache(dir.file("cache")).remember(id, kHashA, later());
  const std::string text = read(dir.file("cache/file-hashes"));

  REQUIRE(::chmod(dir.file("cache/file-hashes").c_str(), 0666) == 0);
  {
    FileHashCache cache(dir.file("cache"));
    CHECK(cache.lookup(id).empty());
    CHECK(cache.path().empty());
    cache.remember(id, kHashB, later());
    CHECK(read(dir.file("cache/file-hashes")) == text);
  }
  REQUIRE(::chmod(dir.file("cache/file-hashes").c_str(), 0644) == 0);
  REQUIRE(::chmod(dir.file("cache").c_str(), 0777) == 0);
  CHECK(FileHashCache(dir.file("cache")).lookup(id).empty());
  REQUIRE(::chmod(dir.file("cache").c_str(), 0700) == 0);
  CHECK(FileHashCache(dir.file("cache")).lookup(id) == kHashA);
}

TEST_CASE("file hash cache: off when its folder is empty, relative or cannot be made") {
  TempDir dir;
  write(dir.file("plugin.so"), "plugin bytes");
  const FileIdentity id = identity_of(dir.file("plugin.so"));
  for (const std::string& folder : {std::string(), std::string("relative/cache"), dir.file("plugin.so") + "/cache"}) {
    CAPTURE(folder);
    FileHashCache cache(folder);
    cache.remember(id, kHashA, later());
    CHECK(cache.lookup(id).empty());
    CHECK(cache.path().empty());
  }
}

TEST_CASE("file hash cache: hash_file gives a file's true hash whatever the cache holds") {
  // The process's cache is in the environment's folder; the true hash of fresh content is
  // computed (a file just written is never looked up under an old key).
  TempDir dir;
  write(dir.file("plugin.so"), "abc");
  const HashedFile hashed = hash_file(dir.file("plugin.so"));
  CHECK(hashed.sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  write(dir.file("plugin.so"), "abd");
  CHECK(hash_file(dir.file("plugin.so")).sha256 != hashed.sha256);
}

TEST_CASE("file hash cache: files others can write are never keyed by it") {
  // Whoever can write a file can change its bytes through a shared mapping without moving its
  // times: such files are hashed every time.
  TempDir dir;
  write(dir.file("plugin.so"), "plugin bytes");
  for (mode_t mode : {0664, 0646, 0666}) {
    CAPTURE(mode);
    REQUIRE(::chmod(dir.file("plugin.so").c_str(), mode) == 0);
    const int fd = ::open(dir.file("plugin.so").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    struct stat st {};
    REQUIRE(::fstat(fd, &st) == 0);
    CHECK_FALSE(cacheable_file(fd, st));
    ::close(fd);
  }
}
