// A mutex that fork() cannot leave locked in the child. arbiter verifies untrusted kernels in
// a forked child (core/common/child_process.hpp) while other threads may be inside the
// emulator; a mutex one of them held at the fork would stay locked in the child for ever. The
// process's fork handlers take every ForkSafeMutex before fork() (lower rank first: a mutex
// taken while another is held needs the higher rank) and release them on both sides after.
#pragma once

#include <mutex>

namespace arbiter::emu {

class ForkSafeMutex {
 public:
  explicit ForkSafeMutex(int rank);  // lives as long as the process: never destroyed while registered
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;
  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }
  int rank() const { return rank_; }

 private:
  std::mutex mutex_;
  int rank_;
};

// The ranks of the emulator's process-wide mutexes, outermost first.
namespace fork_rank {
constexpr int kernels = 10;      // launch.cpp: kernel attributes (held while a kernel is probed)
constexpr int schedule = 20;     // launch.cpp: a forced schedule
constexpr int streams = 30;      // streams.cpp: live streams
constexpr int allocations = 40;  // runtime_api.cpp: live device allocations
constexpr int ptx_parse = 50;    // ptx/machine.cpp: parsed inline PTX
constexpr int misuse = 60;       // shared_memory.cpp: a namespace-scope __shared__ variable
constexpr int stacks = 70;       // fiber.cpp: the pool of fiber stacks
}  // namespace fork_rank

}  // namespace arbiter::emu
