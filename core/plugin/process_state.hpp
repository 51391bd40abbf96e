// Process-wide state a kernel must leave as it found it: signal dispositions, the file mode
// creation mask, the working directory, and the number of open file descriptors. A kernel
// that changes them harms the application after the call with right answers (SIGPIPE back to
// its default kills a server on the first closed socket; a umask of 0 makes its files
// world-writable; a changed cwd moves its relative paths; a descriptor per call exhausts the
// limit). The gate takes a snapshot around its launches and checked live calls, and compares.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace arbiter {

struct ProcessState {
  struct Disposition {
    bool known = false;       // sigaction() reports it (not glibc's own real-time signals)
    void* handler = nullptr;  // SIG_DFL, SIG_IGN or the function
    int flags = 0;
    bool operator==(const Disposition& o) const { return known == o.known && handler == o.handler && flags == o.flags; }
  };
  std::vector<Disposition> signals;  // indexed by signal number, 1 to NSIG - 1
  mode_t umask = 0;
  bool umask_known = false;          // from /proc/self/status (Linux 4.7 and later)
  std::string cwd;
  int descriptors = -1;              // open file descriptors; -1 if not counted or unreadable

  // Descriptors are counted (a listing of /proc/self/fd) only when asked.
  static ProcessState now(bool count_descriptors = true);
  // What differs from `before` in words ("SIGPIPE: ignored -> default, umask 022 -> 000"), ""
  // if nothing; descriptors count as a change only past `descriptor_slack` more.
  std::string changes_since(const ProcessState& before, int descriptor_slack) const;
  // Puts back the dispositions, the mask and the directory of this snapshot (descriptors
  // cannot be given back: whoever holds them is unknown).
  void restore() const;
};

}  // namespace arbiter
