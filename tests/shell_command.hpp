// A shell command run to its end, for the tests that start the arbiter program (or another)
// in a process of its own: its exit status and its output.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace arbiter::test {

struct CommandRun {
  int status = -1;     // the exit status; -1 if it did not exit (a signal)
  std::string output;  // what it wrote to stdout (append 2>&1 to the command for stderr too)
};

inline CommandRun run_shell_command(const std::string& command) {
  CommandRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace arbiter::test
