// The shipped shape suites (bench/suites/*.toml) load, and every problem in them parses.
#include "tune/shape_suite.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace arbiter;

TEST_CASE("every shipped shape suite loads") {
  int suites = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ARBITER_TEST_SOURCE_DIR "/bench/suites")) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().string());
    ShapeSuite suite;
    CHECK_NOTHROW(suite = load_suite(entry.path().string()));
    CHECK_FALSE(suite.problems.empty());
    CHECK_FALSE(suite.description.empty());
    ++suites;
  }
  CHECK(suites >= 5);
}
