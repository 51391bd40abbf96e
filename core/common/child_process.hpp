// Running work in a forked child process, so that a crash, a wild write or a hang in it
// cannot take the caller down or corrupt its memory: the emulator runs untrusted kernels this
// way. The child runs `work` on the calling thread (only that thread exists there) and sends
// back the string it returns; the parent waits at most `timeout_seconds`, then kills it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace arbiter {

struct ChildOutcome {
  bool completed = false;  // the child returned from `work` and its whole answer arrived
  std::string answer;      // what `work` returned, when completed
  std::string failure;     // otherwise: how it ended ("killed by SIGSEGV", "timed out after 60 s", ...)
};

// Never throws for what the child does; throws Failure(ARB_ERR_INTERNAL) if no child can be made.
ChildOutcome run_in_child(const std::function<std::string()>& work, double timeout_seconds);

struct ProgramOutcome {
  bool exited = false;     // it ended by itself (exit or return from main) within the time
  int exit_status = 0;     // when exited
  std::string output;      // what it wrote to stdout
  std::string failure;     // otherwise: how it ended ("killed by SIGSEGV", "timed out after 20 s", ...)
};

// Runs a program (argv[0] is its path) with stdout captured and stderr and stdin on
// /dev/null, waiting at most `timeout_seconds` before killing it. Started with posix_spawn,
// not fork: no fork handlers run in this process (OpenBLAS's deadlocks when other threads use
// it) and the program starts from a clean image. Throws Failure(ARB_ERR_INTERNAL) if it
// cannot be started.
ProgramOutcome run_program(const std::vector<std::string>& argv, double timeout_seconds);

// How a process ended, from its waitpid status: "killed by SIGSEGV (Segmentation fault)",
// "exited (status 0) before it sent its answer ...".
std::string how_process_ended(int wait_status);

}  // namespace arbiter
