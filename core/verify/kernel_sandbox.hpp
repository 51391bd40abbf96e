// An untrusted kernel's launches in a process of its own (docs/verification.md,
// "Untrusted kernels run in a sandbox"): arbiter-kernel-sandbox, installed beside the plugin
// folder and started with posix_spawn (no fork handlers run here), loads the kernel's plugin
// file and launches the kernel on operands in memory shared with this process. Everything
// else stays here: inputs are drawn, the reference runs and results are judged in this
// process, from the shared memory, so the sandbox can say nothing about a verdict but a
// launch's status. A crash, exit(), abort() or hang in the kernel ends the sandbox, not this
// process; the verification gate then fails the kernel with how it ended.
#pragma once

#include "device/device.hpp"
#include "plugin/plugin_record.hpp"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace arbiter {

class KernelSandbox {
 public:
  // How long a sandbox has for everything it is asked to run, and the setting that says so
  // (named when it is killed for taking longer).
  struct TimeLimit {
    double seconds = 120;
    std::string setting = "verify.time_limit_s";
  };

  // Starts a sandbox for `kernel`, whose problems are on `device` (the CPU, a GPU or the
  // emulator: the sandbox opens the same kind of device for itself). nullptr, with the
  // reason in *why_not, when there is no sandbox program (sandbox_program_path) or no
  // process can be started. A sandbox that starts but cannot load the kernel or open its
  // device is returned ended (ended() says why).
  static std::unique_ptr<KernelSandbox> start(const KernelRecord& kernel, const Device& device,
                                              const TimeLimit& limit, std::string* why_not);
  ~KernelSandbox();  // kills the process
  KernelSandbox(const KernelSandbox&) = delete;
  KernelSandbox& operator=(const KernelSandbox&) = delete;

  // CPU memory the sandbox sees too, standing for the kernel's device (its type,
  // fingerprint and emulated()): every operand of a sandboxed launch must be allocated here.
  Device& device() { return *device_; }
  // Launches the kernel there; "" on success, else the kernel's error, or (once the process
  // has ended) how it ended. Thread-safe: up to sandbox::kChannels launches run at once.
  std::string launch(const arb_problem& problem, const arb_operands& operands, size_t workspace_bytes);
  // How the process ended while it still had work ("" while it runs): "killed by SIGSEGV
  // (...)", "exited with status 0 ...", "did not finish within 120 s (verify.time_limit_s)".
  std::string ended() const;

 private:
  KernelSandbox(int pid, std::vector<int> channels, std::unique_ptr<Device> device,
                std::chrono::steady_clock::time_point deadline, TimeLimit limit);
  int take_channel();
  void give_back(int fd);
  // Records how the process ended, once: by itself (waited for a moment unless kill_now), or
  // killed, with `reason`.
  void end(const std::string& reason, bool kill_now);
  std::string time_out_text() const;

  int pid_;
  std::vector<int> channels_;  // the host's ends
  std::unique_ptr<Device> device_;
  std::chrono::steady_clock::time_point deadline_;
  TimeLimit limit_;
  mutable std::mutex mutex_;
  std::condition_variable channel_free_;
  std::vector<int> free_channels_;
  std::string ended_;
  bool reaped_ = false;
};

// Where the sandbox program is expected: <libdir>/arbiter/arbiter-kernel-sandbox.
std::filesystem::path sandbox_program_path();

}  // namespace arbiter
