#include "verify/kernel_sandbox.hpp"

#include "common/child_process.hpp"
#include "common/failure.hpp"
#include "plugin/plugin_search.hpp"
#include "verify/sandbox_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace arbiter {
namespace {

using namespace sandbox;
using Clock = std::chrono::steady_clock;

// CPU memory in a shared mapping, handed out by a bump pointer: a verification frees nothing
// it allocates before it ends (so that every run gets new addresses), and the mapping goes
// with the sandbox. It stands for the device the kernel's problems are on (type,
// fingerprint, emulated): for a GPU the sandbox mirrors each allocation in device memory of
// its own (sandbox_protocol.hpp). Copies and fills are the CPU's.
class SharedMemoryDevice final : public Device {
 public:
  SharedMemoryDevice(std::byte* base, int memfd, const Device& stands_for)
      : cpu_(make_cpu_device()), stands_for_(stands_for), base_(base), memfd_(memfd) {}
  ~SharedMemoryDevice() override {
    ::munmap(base_, kArenaBytes);
    ::close(memfd_);
  }
  bool contains(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= base_ && b < base_ + kArenaBytes;
  }
  uint64_t offset_of(const void* p) const { return static_cast<uint64_t>(static_cast<const std::byte*>(p) - base_); }
  int memfd() const { return memfd_; }
  // The allocation `p` lies in: {offset, bytes}, or {kNoOperand, 0} outside every one.
  std::pair<uint64_t, uint64_t> allocation_of(const void* p) const {
    const uint64_t at = offset_of(p);
    std::lock_guard<std::mutex> lock(mutex_);
    // Allocations are in address order (a bump pointer): the last that starts at or before p.
    auto after = std::upper_bound(allocations_.begin(), allocations_.end(), std::make_pair(at, ~uint64_t(0)));
    if (after == allocations_.begin()) return {kNoOperand, 0};
    const auto& [offset, bytes] = *(after - 1);
    if (at >= offset + bytes) return {kNoOperand, 0};
    return {offset, bytes};
  }

  DLDeviceType type() const override { return stands_for_.type(); }
  bool emulated() const override { return stands_for_.emulated(); }
  const DeviceFingerprint& fingerprint() const override { return stands_for_.fingerprint(); }
  DeviceMemory allocate(size_t bytes) override {
    const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    std::lock_guard<std::mutex> lock(mutex_);
    if (rounded > kArenaBytes - next_)
      fail(ARB_ERR_OUT_OF_MEMORY, fmt::format("the sandbox's shared memory ({} GiB) cannot hold {} more bytes",
                                              kArenaBytes >> 30, bytes));
    void* p = base_ + next_;
    allocations_.emplace_back(next_, rounded);
    next_ += rounded;
    return DeviceMemory(p, bytes, [](void*) {});
  }
  void upload(void* dst, const void* src, size_t bytes, void* s) override { cpu_->upload(dst, src, bytes, s); }
  void download(void* dst, const void* src, size_t bytes, void* s) override { cpu_->download(dst, src, bytes, s); }
  void copy(void* dst, const void* src, size_t bytes, void* s) override { cpu_->copy(dst, src, bytes, s); }
  void fill(void* dst, uint32_t pattern, size_t bytes, void* s) override { cpu_->fill(dst, pattern, bytes, s); }
  void synchronize(void*) override {}  // a launch's reply comes after the kernel returned
  bool capturing(void*) const override { return false; }
  void synchronize_all() override {}
  std::unique_ptr<DeviceTimer> timer() override { return cpu_->timer(); }
  void* create_stream() override { return nullptr; }
  void destroy_stream(void*) override {}
  std::unique_ptr<DeviceGraph> capture(void*, const std::function<void()>&, std::string* why) override {
    if (why) *why = "the sandbox runs no graphs";
    return nullptr;
  }
  size_t last_level_cache_bytes() const override { return cpu_->last_level_cache_bytes(); }

 private:
  std::unique_ptr<Device> cpu_;
  const Device& stands_for_;
  std::byte* base_;
  int memfd_;
  mutable std::mutex mutex_;
  size_t next_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> allocations_;  // {offset, bytes}, in address order
};

// An fd at 16 or above (close-on-exec): dup2 onto the child's fixed numbers must not find
// its source already there (dup2(3, 3) would keep close-on-exec set).
int high_fd(int fd) {
  const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 16);
  ::close(fd);
  return high;
}

bool send_exact(int fd, const void* data, size_t size) {
  const auto* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, at, size, MSG_NOSIGNAL);  // a dead sandbox must not SIGPIPE this process
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

enum class Received { whole, ended, timed_out };

Received receive_exact(int fd, void* data, size_t size, Clock::time_point deadline) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Received::timed_out;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30))) <= 0) continue;
    const ssize_t n = ::recv(fd, at, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Received::ended;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return Received::whole;
}

// What the sandbox is told to launch on: the CPU, a GPU, or the emulator standing in for one.
const char* device_argument(const Device& device) {
  if (device.type() == kDLCPU) return "cpu";
  return device.emulated() ? "cuda-emulated" : "cuda";
}

}  // namespace

std::filesystem::path sandbox_program_path() { return helper_program_path("arbiter-kernel-sandbox"); }

std::unique_ptr<KernelSandbox> KernelSandbox::start(const KernelRecord& kernel, const Device& device,
                                                    const TimeLimit& limit, std::string* why_not) {
  const std::filesystem::path program = sandbox_program_path();
  std::error_code ec;
  if (program.empty() || !std::filesystem::is_regular_file(program, ec)) {
    *why_not = "no kernel sandbox program at '" + program.string() + "'";
    return nullptr;
  }
  const int memfd = ::memfd_create("arbiter-sandbox", MFD_CLOEXEC);
  if (memfd < 0 || ::ftruncate(memfd, static_cast<off_t>(kArenaBytes)) != 0) {
    *why_not = std::string("cannot make the sandbox's shared memory: ") + std::strerror(errno);
    if (memfd >= 0) ::close(memfd);
    return nullptr;
  }
  void* base = ::mmap(nullptr, kArenaBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
  if (base == MAP_FAILED) {
    *why_not = std::string("cannot map the sandbox's shared memory: ") + std::strerror(errno);
    ::close(memfd);
    return nullptr;
  }
  auto shared = std::make_unique<SharedMemoryDevice>(static_cast<std::byte*>(base), high_fd(memfd), device);
  const int shared_memory_fd = shared->memfd();

  std::vector<int> mine, theirs;
  for (int c = 0; c < kChannels; ++c) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      *why_not = std::string("socketpair: ") + std::strerror(errno);
      for (int fd : mine) ::close(fd);
      for (int fd : theirs) ::close(fd);
      return nullptr;
    }
    mine.push_back(pair[0]);
    theirs.push_back(high_fd(pair[1]));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, shared_memory_fd, kArenaFd);
  for (int c = 0; c < kChannels; ++c) posix_spawn_file_actions_adddup2(&actions, theirs[c], kFirstChannelFd + c);
  posix_spawn_file_actions_addclosefrom_np(&actions, kFirstChannelFd + kChannels);  // nothing else of ours
  const std::string path = program.string();
  std::vector<std::string> argv = {path, kernel.plugin->path, kernel.plugin->file_sha256, kernel.name,
                                   device_argument(device)};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  for (int fd : theirs) ::close(fd);
  if (spawned != 0) {
    for (int fd : mine) ::close(fd);
    *why_not = "cannot start " + path + ": " + std::strerror(spawned);
    return nullptr;
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(limit.seconds));
  std::unique_ptr<KernelSandbox> sandbox(
      new KernelSandbox(pid, std::move(mine), std::move(shared), deadline, limit));
  Reply ready{};
  switch (receive_exact(sandbox->channels_[0], &ready, sizeof ready, deadline)) {
    case Received::timed_out: sandbox->end(sandbox->time_out_text() + " while loading the plugin", true); break;
    case Received::ended: sandbox->end("closed its channel while loading the plugin", false); break;
    case Received::whole:
      ready.message[sizeof ready.message - 1] = '\0';
      if (ready.magic != kMagic) sandbox->end("sent a malformed first message", true);
      else if (ready.status != ARB_OK) sandbox->end(std::string("could not load the kernel: ") + ready.message, true);
      break;
  }
  return sandbox;
}

KernelSandbox::KernelSandbox(int pid, std::vector<int> channels, std::unique_ptr<Device> device,
                             Clock::time_point deadline, TimeLimit limit)
    : pid_(pid),
      channels_(std::move(channels)),
      device_(std::move(device)),
      deadline_(deadline),
      limit_(std::move(limit)),
      free_channels_(channels_) {}

KernelSandbox::~KernelSandbox() {
  for (int fd : channels_) ::close(fd);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!reaped_) {
    ::kill(pid_, SIGKILL);  // its work is done; threads a kernel left behind go with it
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string KernelSandbox::time_out_text() const {
  return fmt::format("did not finish within {:.0f} s ({}) and was killed", limit_.seconds, limit_.setting);
}

std::string KernelSandbox::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

void KernelSandbox::end(const std::string& reason, bool kill_now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reaped_) return;
  int status = 0;
  pid_t done = 0;
  // A sandbox whose channel closed is usually dying: give it a moment to say how.
  for (int wait = 0; !kill_now && wait < 100 && (done = ::waitpid(pid_, &status, WNOHANG)) == 0; ++wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done <= 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    ended_ = reason;
  } else {
    ended_ = how_process_ended(status);
  }
  reaped_ = true;
}

int KernelSandbox::take_channel() {
  std::unique_lock<std::mutex> lock(mutex_);
  channel_free_.wait(lock, [&] { return !free_channels_.empty(); });
  const int fd = free_channels_.back();
  free_channels_.pop_back();
  return fd;
}

void KernelSandbox::give_back(int fd) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_channels_.push_back(fd);
  }
  channel_free_.notify_one();
}

std::string KernelSandbox::launch(const arb_problem& problem, const arb_operands& operands, size_t workspace_bytes) {
  if (std::string why = ended(); !why.empty()) return "the sandbox process running the kernel ended: " + why;
  auto& shared = static_cast<SharedMemoryDevice&>(*device_);
  LaunchRequest request{};
  request.magic = kMagic;
  request.problem = problem;
  request.alpha = operands.alpha;
  request.beta = operands.beta;
  request.eps = operands.eps;
  request.workspace_bytes = workspace_bytes;
  arb_operands pointers = operands;
  int i = 0;
  bool outside = false;
  for_each_pointer(pointers, [&](auto& field) {
    const int at = i++;
    request.offsets[at] = request.allocation_offsets[at] = kNoOperand;
    if (field == nullptr) return;
    const auto [offset, bytes] = shared.contains(field) ? shared.allocation_of(field) : std::make_pair(kNoOperand, uint64_t(0));
    if (offset == kNoOperand) {
      outside = true;
      return;
    }
    request.offsets[at] = shared.offset_of(field);
    request.allocation_offsets[at] = offset;
    request.allocation_bytes[at] = bytes;
  });
  if (outside) fail(ARB_ERR_INTERNAL, "a sandboxed launch with an operand outside the sandbox's shared memory allocations");

  const int fd = take_channel();
  struct GiveBack {
    KernelSandbox* sandbox;
    int fd;
    ~GiveBack() { sandbox->give_back(fd); }
  } give_back_on_exit{this, fd};
  Reply reply{};
  Received got = send_exact(fd, &request, sizeof request) ? receive_exact(fd, &reply, sizeof reply, deadline_)
                                                           : Received::ended;
  if (got == Received::timed_out) end(time_out_text(), true);
  if (got == Received::ended) end("closed its channel during a launch", false);
  if (got == Received::whole && reply.magic != kMagic) end("sent a malformed reply", true);
  if (std::string why = ended(); !why.empty()) return "the sandbox process running the kernel ended: " + why;
  reply.message[sizeof reply.message - 1] = '\0';
  if (reply.status == ARB_OK) return "";
  return reply.message[0] != '\0' ? std::string(reply.message) : fmt::format("the kernel failed (status {})", reply.status);
}

}  // namespace arbiter
