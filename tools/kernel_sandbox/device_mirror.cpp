#include "device_mirror.hpp"

#include "common/failure.hpp"
#include "plugin/kernel_call.hpp"

#include <map>

namespace arbiter::sandbox {

void* DeviceMirror::buffer_for(uint64_t offset, uint64_t bytes) {
  auto found = buffers_.find({offset, bytes});
  if (found == buffers_.end())
    found = buffers_.emplace(std::make_pair(offset, bytes), device_.allocate(static_cast<size_t>(bytes))).first;
  return found->second.data();
}

arb_status DeviceMirror::launch(const KernelRecord& kernel, const LaunchRequest& request, std::string* message) {
  std::lock_guard<std::mutex> lock(mutex_);
  arb_operands operands{};
  operands.struct_size = sizeof operands;
  operands.alpha = request.alpha;
  operands.beta = request.beta;
  operands.eps = request.eps;
  try {
    // Each allocation once, however many operands it holds, with its device buffer.
    std::map<std::pair<uint64_t, uint64_t>, void*> allocations;
    for (int at = 0; at < kOperandPointers; ++at) {
      const uint64_t start = request.allocation_offsets[at], bytes = request.allocation_bytes[at];
      if (request.offsets[at] != kNoOperand) allocations.emplace(std::make_pair(start, bytes), buffer_for(start, bytes));
    }
    int at = 0;
    for_each_pointer(operands, [&](auto& field) {
      const uint64_t offset = request.offsets[at], start = request.allocation_offsets[at];
      const uint64_t bytes = request.allocation_bytes[at++];
      if (offset != kNoOperand)
        field = static_cast<std::byte*>(allocations.at({start, bytes})) + (offset - start);
    });
    for (const auto& [allocation, buffer] : allocations)
      device_.upload(buffer, arena_ + allocation.first, static_cast<size_t>(allocation.second), nullptr);
    const size_t workspace_bytes = static_cast<size_t>(request.workspace_bytes);
    const DeviceMemory workspace = workspace_bytes > 0 ? device_.allocate(workspace_bytes) : DeviceMemory();
    arb_status status = ARB_OK;
    try {
      kernel_launch_watched(kernel, request.problem, operands, workspace.data(), workspace_bytes, nullptr);
    } catch (const Failure& e) {
      status = e.status();
      *message = e.what();
    }
    // Failed or not, nothing of the kernel's may still run when its results are read: every
    // stream, not only the one it was handed.
    device_.synchronize_all();
    for (const auto& [allocation, buffer] : allocations)
      device_.download(arena_ + allocation.first, buffer, static_cast<size_t>(allocation.second), nullptr);
    return status;
  } catch (const Failure& e) {
    *message = std::string("the device failed around the launch (in the sandbox; the host's device is unharmed): ") +
               e.what();
    return ARB_ERR_KERNEL;
  }
}

}  // namespace arbiter::sandbox
