// Files are files (issue: hostile files): text is read only from regular files and only up to
// a limit (base/arbiter_base/text_file.hpp); a file is replaced only whole, never when it is
// read-only, with its mode kept, and without temporaries left behind
// (core/common/atomic_file.hpp).
#include "arbiter_base/text_file.hpp"
#include "common/atomic_file.hpp"
#include "common/failure.hpp"
#include "config/config.hpp"
#include "table/tuning_table.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace arbiter;
namespace fs = std::filesystem;

namespace {

std::string read_error(const std::string& path, size_t limit = kTextFileLimit) {
  try {
    read_text_file(path, "test file", limit);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A fresh folder of this test's own.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("arbiter-files-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string contents(const fs::path& path) { return read_text_file(path.string(), "test file"); }

int files_in(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("files: only a regular file is read, and only up to the limit, at once") {
  const fs::path dir = scratch("read");
  write(dir / "a.toml", "a = 1\n");
  CHECK(contents(dir / "a.toml") == "a = 1\n");
  fs::create_symlink(dir / "a.toml", dir / "link.toml");
  CHECK(contents(dir / "link.toml") == "a = 1\n");  // a link to a regular file is one

  CHECK(read_error(dir.string()).find("it is a directory") != std::string::npos);
  CHECK(read_error("/dev/zero").find("not a regular file") != std::string::npos);
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  CHECK(read_error((dir / "fifo").string()).find("not a regular file") != std::string::npos);  // no writer: no hang
  CHECK(read_error((dir / "missing").string()).find("No such file") != std::string::npos);
  CHECK(read_error((dir / "a.toml").string(), 5) ==
        "cannot read test file '" + (dir / "a.toml").string() + "': 6 bytes, more than the limit of 5");

  // Through the host's readers: a config named by a FIFO or /dev/zero is a config error.
  for (const std::string& path : {(dir / "fifo").string(), std::string("/dev/zero")}) {
    CAPTURE(path);
    try {
      load_config_file(path);
      FAIL("read");
    } catch (const Failure& e) {
      CHECK(e.status() == ARB_ERR_CONFIG);
      CHECK(std::string(e.what()).find("not a regular file") != std::string::npos);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("files: a read-only file is never replaced, and a replaced one keeps its mode") {
  const fs::path dir = scratch("write");
  const fs::path table = dir / "table.toml";
  write_file_atomically(table.string(), "one\n", ARB_ERR_TABLE);
  CHECK(contents(table) == "one\n");

  fs::permissions(table, fs::perms::owner_read | fs::perms::owner_write);  // 0600
  write_file_atomically(table.string(), "two\n", ARB_ERR_TABLE);
  CHECK(contents(table) == "two\n");
  CHECK((fs::status(table).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));

  fs::permissions(table, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);  // 0444
  try {
    write_file_atomically(table.string(), "three\n", ARB_ERR_TABLE);
    FAIL("replaced");
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_TABLE);
    CHECK(std::string(e.what()).find("is read-only (mode 0444): it is not replaced") != std::string::npos);
  }
  CHECK(contents(table) == "two\n");
  CHECK(files_in(dir) == 1);  // no temporary
  fs::remove_all(dir);
}

TEST_CASE("files: a temporary a killed writer left is removed by the next write, and this one leaves none") {
  const fs::path dir = scratch("stray");
  const fs::path table = dir / "table.toml";
  // A process that has exited: its pid names the stray temporary.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  REQUIRE(gone > 0);
  ::waitpid(gone, nullptr, 0);
  const fs::path stray = dir / ("table.toml.tmp-" + std::to_string(gone) + "-0badf00d");
  write(stray, "half a tab");
  const fs::path live = dir / ("table.toml.tmp-" + std::to_string(::getpid()) + "-00000001");  // a writer still alive
  write(live, "in progress");
  write_file_atomically(table.string(), "whole\n", ARB_ERR_TABLE);
  CHECK(contents(table) == "whole\n");
  CHECK_FALSE(fs::exists(stray));
  CHECK(fs::exists(live));
  CHECK(files_in(dir) == 2);
  fs::remove_all(dir);
}

TEST_CASE("files: the tuning table's size limit is the config's table.max_file_mib") {
  const fs::path dir = scratch("table-limit");
  // A valid table of a little over 1 MiB: comments are text the limit counts.
  write(dir / "table.toml", "schema = " + std::to_string(TuningTable::kSchema) + "\n" +
                                std::string(1100000, '#') + "\n");
  auto context_with = [&](const std::string& limit) {
    return test::make_context(test::config_loading({}, "[table]\npath = \"" + (dir / "table.toml").string() + "\"\n" + limit));
  };
  const auto refused = context_with("max_file_mib = 1\n");
  CHECK(refused->table_error().find("more than the limit of 1048576") != std::string::npos);
  const auto read = context_with("");  // the default, 64 MiB
  CHECK(read->table_error() == "");
  CHECK_THROWS_AS(parse_config("[table]\nmax_file_mib = 0\n", "<test>", "."), Failure);
  fs::remove_all(dir);
}
