// Lets one GPU benchmark outlive kernels that fault or hang. A CUDA fault (an illegal
// address, a trap) poisons the process's context: every later call fails. So the benchmark
// keeps a journal of which kernel it is running, for what, on which problem (one small file,
// rewritten in place before each kernel runs); when the device turns out broken, or the
// process dies or hangs, the journal names the kernel, and the next process (bench/gpu-check.sh
// restarts it with --resume) excludes that kernel and carries on where the state file ends.
#pragma once

#include "gpu_report.hpp"

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace arbiter::bench {

class FaultGuard {
 public:
  // A watchdog ends the process (exit status 4, the journal saying "hung") when one kernel
  // has been running for hang_seconds without the benchmark moving on.
  FaultGuard(std::string journal_path, double hang_seconds);
  ~FaultGuard();
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;

  // The kernel the previous process was running when it ended (crash, hang, kill by a
  // fault), from its journal; nothing if it ended between kernels or cleanly.
  static std::optional<Fault> previous(const std::string& journal_path);

  void running(const std::string& kernel, const std::string& phase, const std::string& problem);
  void idle();
  // Is the device still usable? If not, the kernel that ran last is the culprit: its fault,
  // with the CUDA error, is returned and written to the journal.
  std::optional<Fault> check_device();

 private:
  void write(const std::string& state, const Fault& f);
  void watch();

  std::string path_;
  int fd_ = -1;
  double hang_seconds_;
  std::mutex mutex_;  // the current kernel, shared with the watchdog
  Fault current_;
  bool is_running_ = false;
  std::atomic<long long> since_{0};  // steady-clock nanoseconds when current_ started
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace arbiter::bench
