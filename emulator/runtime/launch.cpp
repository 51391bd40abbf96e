// Kernel launches: the checks the CUDA runtime makes (dimensions, launch bounds, shared memory
// and its opt-in, clusters), capture into graphs, the schedule of each launch, and the
// attributes of kernels (found by a dry start, kernel_entry being first in every body).
#include "engine.hpp"
#include "fork_safe_mutex.hpp"
#include "shared_memory.hpp"
#include "streams.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace arbiter::emu {

void set_launch_report(const std::string& report);
void* tensor_map_encoder();  // ptx/tensor_map.cpp

namespace {

ForkSafeMutex kernels_mutex{fork_rank::kernels};
std::map<const void*, KernelInfo>& kernels() {
  static auto* m = new std::map<const void*, KernelInfo>;
  return *m;
}

// ptxas's register count when it may use all a block's launch bounds allow: 64K registers
// shared by max_threads x min_blocks threads, in units of 8, at most 255.
int registers_for(const KernelAttributes& a) {
  if (a.max_threads <= 0) return 64;
  const int threads = a.max_threads * std::max(a.min_blocks, 1);
  return std::min(255, 65536 / threads / 8 * 8);
}

Status info_of(const void* kernel, KernelProbe probe, KernelInfo*& info) {
  std::lock_guard<ForkSafeMutex> lock(kernels_mutex);
  auto it = kernels().find(kernel);
  if (it == kernels().end()) {
    KernelInfo fresh;
    std::string why;
    if (!probe_kernel(kernel, probe, fresh.declared, why)) {
      set_launch_report(why);
      return set_error(kErrorInvalidDeviceFunction);
    }
    fresh.max_threads = fresh.declared.max_threads > 0 ? fresh.declared.max_threads : 1024;
    fresh.registers = registers_for(fresh.declared);
    it = kernels().emplace(kernel, fresh).first;
  }
  info = &it->second;
  return kSuccess;
}

// ---- schedules ----------------------------------------------------------------------------------

std::atomic<uint64_t> launches{0};
ForkSafeMutex schedule_mutex{fork_rank::schedule};
std::optional<Schedule> forced;

Schedule next_schedule() {
  const uint64_t n = launches++;
  {
    std::lock_guard<ForkSafeMutex> lock(schedule_mutex);
    if (forced) return *forced;
  }
  // ARBITER_EMU_SCHEDULE: lockstep | reverse | warp-ahead | random | rotate (the default: the
  // four in turn, launch after launch, so that repeated runs of a kernel see different orders).
  const char* env = std::getenv("ARBITER_EMU_SCHEDULE");
  const std::string which = env ? env : "rotate";
  Schedule s;
  s.seed = n;
  if (which == "lockstep") s.kind = ScheduleKind::lockstep;
  else if (which == "reverse") s.kind = ScheduleKind::reverse;
  else if (which == "warp-ahead") s.kind = ScheduleKind::warp_ahead;
  else if (which == "random") s.kind = ScheduleKind::random;
  else s.kind = static_cast<ScheduleKind>(n % 4);
  return s;
}

}  // namespace

void force_schedule(const Schedule* schedule) {
  std::lock_guard<ForkSafeMutex> lock(schedule_mutex);
  forced = schedule ? std::optional<Schedule>(*schedule) : std::nullopt;
}

Status kernel_info(const void* kernel, KernelProbe probe, KernelInfo* out) {
  if (out == nullptr) return set_error(kErrorInvalidValue);
  KernelInfo* info = nullptr;
  if (const Status s = info_of(kernel, probe, info); s != kSuccess) return s;
  std::lock_guard<ForkSafeMutex> lock(kernels_mutex);
  *out = *info;
  return kSuccess;
}

Status set_max_dynamic_shared(const void* kernel, KernelProbe probe, int bytes) {
  KernelInfo* info = nullptr;
  if (const Status s = info_of(kernel, probe, info); s != kSuccess) return s;
  if (bytes < 0 || static_cast<size_t>(bytes) > device_description().shared_per_block_optin)
    return set_error(kErrorInvalidValue);
  std::lock_guard<ForkSafeMutex> lock(kernels_mutex);
  info->max_dynamic_shared = bytes;
  return kSuccess;
}

Status launch(const void* kernel, KernelProbe probe, const LaunchConfig& config, KernelThunk run, void* arguments,
              ArgumentsCopy copy, ArgumentsFree free) {
  KernelInfo* info_pointer = nullptr;
  if (const Status s = info_of(kernel, probe, info_pointer); s != kSuccess) return s;
  KernelInfo info;
  {
    std::lock_guard<ForkSafeMutex> lock(kernels_mutex);
    info = *info_pointer;
  }
  auto refuse = [](Status status, const std::string& why) {
    set_launch_report(why);
    return set_error(status);
  };
  const dim3 g = config.grid, b = config.block;
  if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0 || g.y > 65535 || g.z > 65535 ||
      g.x > 0x7fffffffu || b.x > 1024 || b.y > 1024 || b.z > 64)
    return refuse(kErrorInvalidConfiguration, "grid or block dimensions outside the device's limits");
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (threads > 1024) return refuse(kErrorInvalidConfiguration, "more than 1024 threads in a block");
  if (threads > static_cast<uint64_t>(info.max_threads))
    return refuse(kErrorLaunchOutOfResources, "a block of " + std::to_string(threads) + " threads, above the kernel's "
                                                  "__launch_bounds__ of " + std::to_string(info.max_threads));
  if (config.dynamic_shared > static_cast<size_t>(info.max_dynamic_shared))
    return refuse(kErrorInvalidValue, std::to_string(config.dynamic_shared) +
                                          " bytes of dynamic shared memory, above the kernel's limit of " +
                                          std::to_string(info.max_dynamic_shared) +
                                          " (cudaFuncAttributeMaxDynamicSharedMemorySize)");
  dim3 cluster = config.cluster;
  const dim3 declared(info.declared.cluster_x, info.declared.cluster_y, info.declared.cluster_z);
  if (declared.x != 0) {
    if (cluster.x != 0 && (cluster.x != declared.x || cluster.y != declared.y || cluster.z != declared.z))
      return refuse(kErrorInvalidValue, "a launch cluster that differs from the kernel's __cluster_dims__");
    cluster = declared;
  }
  if (cluster.x == 0) cluster = dim3(1, 1, 1);
  if (cluster.x * cluster.y * cluster.z > 8)
    return refuse(kErrorInvalidValue, "a cluster of more than 8 blocks (the portable limit)");
  if (g.x % cluster.x != 0 || g.y % cluster.y != 0 || g.z % cluster.z != 0)
    return refuse(kErrorInvalidValue, "a grid that is not a whole number of clusters");
  if (!shared_variable_misuse().empty()) return refuse(kErrorInvalidDeviceFunction, shared_variable_misuse());

  if (config.stream != nullptr) {
    GraphNode node;
    node.kind = GraphNode::Kind::kernel;
    node.kernel = kernel;
    node.probe = probe;
    node.config = config;
    node.run = run;
    node.copy_arguments = copy;
    node.free_arguments = free;
    node.arguments = copy(arguments);
    if (capture(config.stream, std::move(node))) return kSuccess;
  }
  Launch l;
  l.kernel = kernel;
  l.run = run;
  l.arguments = arguments;
  l.config = config;
  l.info = info;
  l.cluster_dims = cluster;
  l.schedule = next_schedule();
  const Status status = run_launch(l);
  set_launch_report(status == kSuccess ? "" : l.fault);
  return status == kSuccess ? kSuccess : set_error(status);
}

Status max_active_clusters(const void* kernel, KernelProbe probe, const LaunchConfig& config, int* clusters) {
  if (clusters == nullptr) return set_error(kErrorInvalidValue);
  KernelInfo* info = nullptr;
  if (const Status s = info_of(kernel, probe, info); s != kSuccess) return s;
  const DeviceDescription& d = device_description();
  // One block per SM at most here: the emulated SMs, grouped in clusters of the kernel's size.
  const unsigned size = info->declared.cluster_x ? info->declared.cluster_x * info->declared.cluster_y * info->declared.cluster_z
                        : config.cluster.x       ? config.cluster.x * config.cluster.y * config.cluster.z
                                                 : 1;
  const uint64_t threads = uint64_t(config.block.x) * config.block.y * config.block.z;
  *clusters = threads <= 1024 ? static_cast<int>(std::max<unsigned>(d.multiprocessors, size) / size) : 0;
  return kSuccess;
}

void* driver_entry_point(const char* symbol) {
  if (symbol != nullptr && std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0) return tensor_map_encoder();
  return nullptr;
}

}  // namespace arbiter::emu
