#include "fault_guard.hpp"

#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace arbiter::bench {
namespace {

// One record of fixed size at offset 0: "<state>\t<kernel>\t<phase>\t<problem>", padded.
// A pwrite of it is never seen half-done by the next process (the process that dies does
// not die inside the system call).
constexpr size_t kRecordBytes = 1024;

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> split_tabs(const std::string& s) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == '\t') parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

}  // namespace

FaultGuard::FaultGuard(std::string journal_path, double hang_seconds)
    : path_(std::move(journal_path)), hang_seconds_(hang_seconds) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open the fault journal " + path_);
  idle();
  watchdog_ = std::thread([this] { watch(); });
}

FaultGuard::~FaultGuard() {
  stop_ = true;
  watchdog_.join();
  idle();
  ::close(fd_);
}

std::optional<Fault> FaultGuard::previous(const std::string& journal_path) {
  std::ifstream in(journal_path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  const std::vector<std::string> parts = split_tabs(line);
  if (parts.size() != 4) return std::nullopt;
  // "idle": between kernels; "fault": recorded in the state file by the process itself.
  if (parts[0] == "running") return Fault{parts[1], parts[3], parts[2], "its process ended while it ran (a crash?)"};
  if (parts[0] == "hung") return Fault{parts[1], parts[3], parts[2], "hung: no progress within the watchdog's limit"};
  return std::nullopt;
}

void FaultGuard::write(const std::string& state, const Fault& f) {
  std::string record = state + "\t" + f.kernel + "\t" + f.phase + "\t" + f.problem;
  for (char& c : record)
    if (c == '\n') c = ' ';
  record.resize(kRecordBytes - 1, ' ');
  record += '\n';
  if (::pwrite(fd_, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size()))
    std::fprintf(stderr, "arbiter_bench_gpu: cannot write the fault journal %s\n", path_.c_str());
}

void FaultGuard::running(const std::string& kernel, const std::string& phase, const std::string& problem) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (is_running_ && current_.kernel == kernel && current_.phase == phase && current_.problem == problem) {
    since_ = now_ns();  // the same kernel again: progress
    return;
  }
  current_ = Fault{kernel, problem, phase, ""};
  is_running_ = true;
  since_ = now_ns();
  write("running", current_);
}

void FaultGuard::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  is_running_ = false;
  write("idle", Fault{});
}

std::optional<Fault> FaultGuard::check_device() {
  const cudaError_t status = cudaDeviceSynchronize();
  if (status == cudaSuccess) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  Fault f = is_running_ ? current_ : Fault{"(none running)", "", "", ""};
  f.what = std::string("the device failed after it ran: ") + cudaGetErrorName(status) + " (" +
           cudaGetErrorString(status) + ")";
  write("fault", f);
  is_running_ = false;
  return f;
}

void FaultGuard::watch() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::lock_guard<std::mutex> lock(mutex_);
    if (!is_running_ || static_cast<double>(now_ns() - since_) * 1e-9 < hang_seconds_) continue;
    write("hung", current_);
    std::fprintf(stderr, "arbiter_bench_gpu: HUNG: %s has been running (%s of '%s') for %.0f s; ending the process\n",
                 current_.kernel.c_str(), current_.phase.c_str(), current_.problem.c_str(), hang_seconds_);
    std::fflush(stderr);
    std::_Exit(4);
  }
}

}  // namespace arbiter::bench
