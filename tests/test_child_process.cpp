// Work in a child process (common/child_process.hpp) and verdicts across the pipe
// (tune/isolated_verification.hpp): how the emulator keeps an untrusted kernel from harming
// the process that verifies it.
#include "common/child_process.hpp"
#include "verify/isolated_verification.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <unistd.h>

using namespace arbiter;

TEST_CASE("a child's answer comes back whole, however large") {
  const ChildOutcome small = run_in_child([] { return std::string("done"); }, 30);
  CHECK(small.completed);
  CHECK(small.answer == "done");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  const ChildOutcome large = run_in_child([&] { return big; }, 30);
  CHECK(large.completed);
  CHECK(large.answer == big);  // larger than a pipe's buffer: read while the child writes
}

TEST_CASE("a child that crashes, exits, throws or hangs is reported, and the parent's memory is untouched") {
  int parent_value = 7;
  const ChildOutcome wild = run_in_child(
      [&]() -> std::string {
        parent_value = 99;  // the child's copy
        std::raise(SIGSEGV);
        return "unreachable";
      },
      30);
  CHECK_FALSE(wild.completed);
  CHECK(wild.failure.find("SIGSEGV") != std::string::npos);
  CHECK(parent_value == 7);

  const ChildOutcome exits = run_in_child([]() -> std::string { ::_exit(5); }, 30);
  CHECK_FALSE(exits.completed);
  CHECK(exits.failure.find("status 5") != std::string::npos);

  const ChildOutcome throws = run_in_child([]() -> std::string { throw std::runtime_error("no"); }, 30);
  CHECK_FALSE(throws.completed);
  CHECK(throws.failure.find("exception") != std::string::npos);

  const ChildOutcome hangs = run_in_child(
      []() -> std::string {
        for (;;) ::pause();
      },
      0.5);
  CHECK_FALSE(hangs.completed);
  CHECK(hangs.failure.find("timed out") != std::string::npos);
}

TEST_CASE("a verdict survives the trip exactly, and a malformed one is refused") {
  Verdict v;
  v.passed = false;
  v.trials = 3;
  v.shapes = 11;
  v.max_error = 0.1 + 1e-17;
  v.failed_checks = {"accuracy", "guard"};
  v.detail = std::string("line one\nline two with a \0 byte", 30);
  const std::string bytes = encode_verdict(v);
  const std::optional<Verdict> back = decode_verdict(bytes);
  REQUIRE(back.has_value());
  CHECK(back->passed == v.passed);
  CHECK(back->trials == 3);
  CHECK(back->shapes == 11);
  CHECK(back->max_error == v.max_error);
  CHECK(back->failed_checks == v.failed_checks);
  CHECK(back->detail == v.detail);
  for (size_t cut = 0; cut < bytes.size(); ++cut) CHECK_FALSE(decode_verdict(bytes.substr(0, cut)).has_value());
  CHECK_FALSE(decode_verdict(bytes + "x").has_value());
  std::string huge_count = bytes;
  huge_count[1 + 4 + 4 + 8] = '\xff';  // the number of failed checks
  CHECK_FALSE(decode_verdict(huge_count).has_value());
}
