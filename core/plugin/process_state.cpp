#include "plugin/process_state.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>

namespace arbiter {
namespace {

// Set by glibc on every sigaction() it makes (its signal return trampoline), so it says
// nothing about what a kernel changed.
#ifdef SA_RESTORER
constexpr int kRestorer = SA_RESTORER;
#else
constexpr int kRestorer = 0x04000000;
#endif

std::string handler_name(void* handler) {
  if (handler == reinterpret_cast<void*>(SIG_DFL)) return "default";
  if (handler == reinterpret_cast<void*>(SIG_IGN)) return "ignored";
  return fmt::format("handler {}", handler);
}

int open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = ::readdir(dir)) count += entry->d_name[0] != '.';
  ::closedir(dir);
  return count;
}

ProcessState::Disposition disposition_of(int sig) {
  struct sigaction action {};
  if (::sigaction(sig, nullptr, &action) != 0) return {};  // glibc's own real-time signals
  const bool info = (action.sa_flags & SA_SIGINFO) != 0;
  return {true, info ? reinterpret_cast<void*>(action.sa_sigaction) : reinterpret_cast<void*>(action.sa_handler),
          action.sa_flags & ~kRestorer};
}

}  // namespace

ProcessState ProcessState::now(bool count_descriptors) {
  ProcessState s;
  s.signals.resize(NSIG);
  for (int sig = 1; sig < NSIG; ++sig) s.signals[sig] = disposition_of(sig);
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Umask:", 0) == 0) {
      s.umask = static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
      s.umask_known = true;
    }
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) != nullptr) s.cwd = cwd;
  if (count_descriptors) s.descriptors = open_descriptors();
  return s;
}

std::string ProcessState::changes_since(const ProcessState& before, int descriptor_slack) const {
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  for (size_t sig = 1; sig < signals.size() && sig < before.signals.size(); ++sig)
    if (!(signals[sig] == before.signals[sig]))
      add(fmt::format("{} ({}): {} -> {}", ::strsignal(static_cast<int>(sig)), sig, handler_name(before.signals[sig].handler),
                      handler_name(signals[sig].handler)));
  if (umask_known && before.umask_known && umask != before.umask)
    add(fmt::format("umask {:03o} -> {:03o}", before.umask, umask));
  if (!cwd.empty() && !before.cwd.empty() && cwd != before.cwd) add("working directory " + before.cwd + " -> " + cwd);
  if (descriptors >= 0 && before.descriptors >= 0 &&
      int64_t{descriptors} > int64_t{before.descriptors} + descriptor_slack)  // no overflow at INT_MAX
    add(fmt::format("{} more open file descriptors ({} -> {})", descriptors - before.descriptors, before.descriptors,
                    descriptors));
  return out;
}

void ProcessState::restore() const {
  for (size_t sig = 1; sig < signals.size(); ++sig) {
    const Disposition& was = signals[sig];
    if (!was.known || disposition_of(static_cast<int>(sig)) == was) continue;
    struct sigaction action {};
    ::sigaction(static_cast<int>(sig), nullptr, &action);  // the mask as it is; handler and flags as they were
    action.sa_flags = was.flags;
    if (was.flags & SA_SIGINFO)
      action.sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(was.handler);
    else
      action.sa_handler = reinterpret_cast<void (*)(int)>(was.handler);
    ::sigaction(static_cast<int>(sig), &action, nullptr);
  }
  if (umask_known) ::umask(umask);
  // If the folder is gone, the process stays where the kernel left it: nothing better to do.
  if (!cwd.empty()) {
    [[maybe_unused]] const int restored = ::chdir(cwd.c_str());
  }
}

}  // namespace arbiter
