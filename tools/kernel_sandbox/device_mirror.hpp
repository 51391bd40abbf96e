// A device sandbox's own copies of the host's operands (core/verify/sandbox_protocol.hpp):
// a kernel for a GPU (or for the emulator standing in for one) cannot run on the shared
// memory, so each launch copies every allocation its operands lie in, guards included, to a
// device buffer kept for that allocation, launches there, waits for the device and copies
// every allocation back. The host then reads and judges the shared memory as it does for a
// CPU kernel. Offsets within an allocation, and so alignment, are the host's; one buffer per
// allocation keeps a kernel's operands at the same device address from launch to launch, as
// they are at one host address (the stale-result check needs that).
#pragma once

#include "device/device.hpp"
#include "plugin/plugin_record.hpp"
#include "verify/sandbox_protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace arbiter::sandbox {

class DeviceMirror {
 public:
  // `arena`: the shared memory, kArenaBytes long.
  DeviceMirror(Device& device, std::byte* arena) : device_(device), arena_(arena) {}

  // Runs one well-formed launch request (every operand inside its allocation) on the
  // device: ARB_OK, or the kernel's status and *message. A failed copy or a device that
  // faulted during the launch is ARB_ERR_KERNEL with the device's error in *message. One
  // launch at a time: the device's copies are shared.
  arb_status launch(const KernelRecord& kernel, const LaunchRequest& request, std::string* message);

 private:
  // The device buffer for the allocation at `offset` of `bytes` bytes, made on first use.
  void* buffer_for(uint64_t offset, uint64_t bytes);

  Device& device_;
  std::byte* arena_;
  std::mutex mutex_;
  std::map<std::pair<uint64_t, uint64_t>, DeviceMemory> buffers_;  // by {offset, bytes}
};

}  // namespace arbiter::sandbox
