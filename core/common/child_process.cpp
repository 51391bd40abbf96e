#include "common/child_process.hpp"

#include "common/failure.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // the process's environment, handed to spawned programs

namespace arbiter {
namespace {

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The child: run, send "<8-byte length><answer>", leave without atexit handlers or static
// destructors (they belong to the parent's state).
[[noreturn]] void be_the_child(int out, const std::function<std::string()>& work) {
  // A fault here ends this process, nobody else's: the parent's handlers (a crash reporter,
  // a test framework's) must not run as if the parent had crashed.
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, SIG_DFL);
  int code = 0;
  try {
    const std::string answer = work();
    const uint64_t size = answer.size();
    if (!write_all(out, reinterpret_cast<const char*>(&size), sizeof size) || !write_all(out, answer.data(), answer.size()))
      code = 3;
  } catch (...) {
    code = 2;
  }
  ::_exit(code);
}

// Reads `fd` until end of file or the deadline; false if the deadline came first.
bool read_until(int fd, std::chrono::steady_clock::time_point deadline, std::string& received) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready <= 0) continue;  // EINTR or the deadline, checked above
    char buffer[1 << 16];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    received.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

std::string how_process_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("killed by {} ({})", sigabbrev_np(sig) ? fmt::format("SIG{}", sigabbrev_np(sig)) : "a signal",
                       strsignal(sig));
  }
  if (WIFEXITED(status)) {
    switch (WEXITSTATUS(status)) {
      case 2: return "threw an exception out of the work";
      case 3: return "could not send its answer";
      case 0: return "exited (status 0) before it sent its answer: exit() called during the work";
      default: return fmt::format("exited with status {} (exit() during the work, a sanitizer or a failed check: see its stderr)",
                                  WEXITSTATUS(status));
    }
  }
  return "ended in an unknown way";
}

ChildOutcome run_in_child(const std::function<std::string()>& work, double timeout_seconds) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail(ARB_ERR_INTERNAL, std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);  // a child that calls exit() flushes its copy of these buffers: empty them first
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    fail(ARB_ERR_INTERNAL, std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::close(fds[0]);
    be_the_child(fds[1], work);
  }
  ::close(fds[1]);

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  std::string received;
  const bool timed_out = !read_until(fds[0], deadline, received);
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  ChildOutcome outcome;
  if (timed_out) {
    outcome.failure = fmt::format("timed out after {:.0f} s and was killed", timeout_seconds);
    return outcome;
  }
  uint64_t size = 0;
  const bool whole = received.size() >= sizeof size &&
                     (std::memcpy(&size, received.data(), sizeof size), received.size() - sizeof size == size);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && whole) {
    outcome.completed = true;
    outcome.answer = received.substr(sizeof size);
  } else {
    outcome.failure = how_process_ended(status);
  }
  return outcome;
}

ProgramOutcome run_program(const std::vector<std::string>& argv, double timeout_seconds) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail(ARB_ERR_INTERNAL, std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    fail(ARB_ERR_INTERNAL, "cannot start " + argv[0] + ": " + std::strerror(spawned));
  }
  ProgramOutcome outcome;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds));
  const bool ended = read_until(fds[0], deadline, outcome.output);
  ::close(fds[0]);
  if (!ended) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ended) {
    outcome.failure = fmt::format("did not finish within {:.0f} s and was killed", timeout_seconds);
  } else if (WIFEXITED(status)) {
    outcome.exited = true;
    outcome.exit_status = WEXITSTATUS(status);
  } else {
    outcome.failure = how_process_ended(status);
  }
  return outcome;
}

}  // namespace arbiter
