// arbiter-kernel-sandbox <plugin-file> <sha256> <kernel> <cpu|cuda|cuda-emulated>: the process
// in which the verification gate runs an untrusted kernel (core/verify/kernel_sandbox.hpp). It
// opens the device (a GPU, or the emulator standing in for one: a CUDA context of its own),
// loads the plugin file as the host does, checks that it is the file the host hashed, then
// launches the kernel on operands in the host's shared memory, or on the device's copies of
// them (device_mirror.hpp), for as long as the host asks (core/verify/sandbox_protocol.hpp). A crash, exit() or hang here ends only this process;
// the host reads every result from the shared memory and judges it there.
#include "common/failure.hpp"
#include "common/log.hpp"
#include "device/device.hpp"
#include "device_mirror.hpp"
#include "plugin/kernel_call.hpp"
#include "plugin/companion_objects.hpp"
#include "plugin/plugin_loader.hpp"
#include "plugin/process_state.hpp"
#include "verify/sandbox_protocol.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace {

using namespace arbiter;
using namespace arbiter::sandbox;

bool read_exact(int fd, void* data, size_t size) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, at, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool write_exact(int fd, const void* data, size_t size) {
  const auto* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, at, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool reply(int fd, arb_status status, const std::string& message) {
  Reply r{};
  r.magic = kMagic;
  r.status = status;
  std::snprintf(r.message, sizeof r.message, "%s", message.c_str());
  return write_exact(fd, &r, sizeof r);
}

// The process's state once the plugin was loaded (process_state.hpp). This process runs
// nothing but the kernel, so any change after a launch is the kernel's: signal dispositions,
// the umask, the working directory, or more open descriptors than a few concurrent launches
// could hold at once (a leak of one per call exhausts an application's limit).
ProcessState loaded_state;
constexpr int kDescriptorSlack = 16;

std::string state_changed() {
  const std::string changes = ProcessState::now().changes_since(loaded_state, kDescriptorSlack);
  return changes.empty() ? "" : "the kernel changed the process's state and left it so: " + changes;
}

// The objects mapped once the plugin was loaded, and its file. Code a kernel maps later (a
// library it dlopens at its first launch) is not in the identity the host hashed at load
// (plugin/companion_objects.hpp), so a launch that maps any is refused.
std::set<MappedObject> loaded_objects;
std::string plugin_file;

std::string code_mapped_since_load() {
  for (const MappedObject& object : mapped_objects())
    if (loaded_objects.count(object) == 0 && !in_system_library_folder(object, plugin_file))
      return "the kernel mapped " + object.real_path +
             " during a launch: code outside the plugin's identity (a plugin's own libraries must be loaded by its "
             "entry function, where the host hashes them)";
  return "";
}

// Every operand inside its allocation, and every allocation inside the shared memory.
bool well_formed(const LaunchRequest& request) {
  if (request.magic != kMagic || request.problem.struct_size != sizeof(arb_problem)) return false;
  for (int at = 0; at < kOperandPointers; ++at) {
    const uint64_t offset = request.offsets[at], start = request.allocation_offsets[at],
                   bytes = request.allocation_bytes[at];
    if (offset == kNoOperand) continue;
    if (start > kArenaBytes || bytes > kArenaBytes - start || offset < start || offset >= start + bytes) return false;
  }
  return true;
}

// A CPU kernel's launch, on the shared memory itself.
arb_status launch_on_cpu(const KernelRecord& kernel, const LaunchRequest& request, std::byte* arena,
                         std::string* message) {
  arb_operands operands{};
  operands.struct_size = sizeof operands;
  int i = 0;
  for_each_pointer(operands, [&](auto& field) {
    const uint64_t offset = request.offsets[i++];
    if (offset != kNoOperand) field = arena + offset;
  });
  operands.alpha = request.alpha;
  operands.beta = request.beta;
  operands.eps = request.eps;
  const size_t bytes = static_cast<size_t>(request.workspace_bytes);
  void* workspace = bytes > 0 ? std::aligned_alloc(256, (bytes + 255) / 256 * 256) : nullptr;
  if (bytes > 0 && workspace == nullptr) {
    *message = "cannot allocate the kernel's workspace in the sandbox";
    return ARB_ERR_OUT_OF_MEMORY;
  }
  arb_status status = ARB_OK;
  try {
    kernel_launch_watched(kernel, request.problem, operands, workspace, bytes, nullptr);
  } catch (const Failure& e) {
    status = e.status();
    *message = e.what();
  }
  std::free(workspace);
  return status;
}

// One channel: requests until the host closes it. `mirror`: the device's copies, for a
// device kernel; nullptr for a CPU kernel.
void serve(int fd, const KernelRecord& kernel, std::byte* arena, DeviceMirror* mirror) {
  for (LaunchRequest request{}; read_exact(fd, &request, sizeof request);) {
    if (!well_formed(request)) {
      reply(fd, ARB_ERR_INTERNAL, "malformed launch request");
      return;
    }
    std::string message;
    const arb_status status = mirror != nullptr ? mirror->launch(kernel, request, &message)
                                                : launch_on_cpu(kernel, request, arena, &message);
    if (status == ARB_OK) message = state_changed();
    if (status == ARB_OK && message.empty()) message = code_mapped_since_load();
    if (!reply(fd, status == ARB_OK && !message.empty() ? ARB_ERR_KERNEL : status, message)) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: arbiter-kernel-sandbox <plugin-file> <sha256> <kernel> <cpu|cuda|cuda-emulated>\n");
    return 2;
  }
  set_log_level(ARB_LOG_OFF);  // stderr goes nowhere
  void* mapped = ::mmap(nullptr, kArenaBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, kArenaFd, 0);
  if (mapped == MAP_FAILED) {
    reply(kFirstChannelFd, ARB_ERR_INTERNAL, std::string("cannot map the shared memory: ") + std::strerror(errno));
    ::_exit(1);
  }
  // The device first, as in the host: a plugin may look for its CUDA context at load.
  std::unique_ptr<Device> device;
  const std::string device_kind = argv[4];
  std::string no_device;
  if (device_kind == "cuda") device = make_cuda_device(0, &no_device);
  else if (device_kind == "cuda-emulated") device = make_emulated_cuda_device(&no_device);
  else if (device_kind != "cpu") no_device = "unknown device '" + device_kind + "'";
  if (device == nullptr && device_kind != "cpu") {
    reply(kFirstChannelFd, ARB_ERR_UNSUPPORTED, "the sandbox cannot open its device: " + no_device);
    ::_exit(1);
  }
  // The host already checked who could have written the file and probed it.
  const std::unique_ptr<PluginRecord> record = load_plugin(argv[1], "sandbox", true);
  const KernelRecord* kernel = nullptr;
  for (const KernelRecord& k : record->kernels)
    if (k.name == argv[3]) kernel = &k;
  std::string refusal;
  if (record->state != PluginState::loaded) refusal = "the plugin did not load here: " + record->reason;
  else if (record->file_sha256 != argv[2])
    refusal = "the plugin file changed since the host loaded it (SHA-256 " + record->file_sha256 + ")";
  else if (kernel == nullptr) refusal = std::string("the plugin has no kernel ") + argv[3] + " here";

  std::unique_ptr<DeviceMirror> mirror;
  if (device != nullptr) {
    mirror = std::make_unique<DeviceMirror>(*device, static_cast<std::byte*>(mapped));
    // Copies and a wait once, before the state the launches are compared with is taken: what
    // the device's runtime opens or maps on first use is not the kernel's.
    try {
      DeviceMemory warm = device->allocate(256);
      char bytes[256] = {};
      device->upload(warm.data(), bytes, sizeof bytes, nullptr);
      device->download(bytes, warm.data(), sizeof bytes, nullptr);
      device->synchronize_all();
    } catch (const Failure& e) {
      refusal = std::string("the sandbox's device failed its first copies: ") + e.what();
    }
  }
  if (!reply(kFirstChannelFd, refusal.empty() ? ARB_OK : ARB_ERR_PLUGIN, refusal) || !refusal.empty()) ::_exit(1);

  loaded_state = ProcessState::now();
  loaded_objects = mapped_objects();
  plugin_file = argv[1];
  std::vector<std::thread> channels;
  for (int c = 0; c < kChannels; ++c)
    channels.emplace_back(serve, kFirstChannelFd + c, std::cref(*kernel), static_cast<std::byte*>(mapped), mirror.get());
  for (std::thread& t : channels) t.join();
  ::_exit(0);  // no unload, no exit handlers: the host is done with this process
}
