// What the host and arbiter-kernel-sandbox (kernel_sandbox.hpp) say to each other. The
// sandbox maps the host's shared memory at fd kArenaFd and serves launches on kChannels
// sockets from fd kFirstChannelFd on: one LaunchRequest in, one Reply out, on each channel
// independently (so that concurrent launches stay concurrent). Operand pointers travel as
// offsets into the shared memory. Nothing the sandbox sends is taken for more than a
// launch's status and message: the host reads results from the shared memory itself.
//
// A sandbox for a GPU (or the emulator standing in for one) launches on device memory of its
// own: per request it copies each operand's whole allocation (its guards included, so that
// offsets and alignment are the host's) from the shared memory to a device buffer it keeps
// for that allocation, launches, waits for the device, and copies every allocation back.
#pragma once

#include "problem/operand_fields.hpp"

#include <arbiter/plugin.h>

#include <cstddef>
#include <cstdint>

namespace arbiter::sandbox {

inline constexpr uint64_t kMagic = 0x37646e6173627261ull;  // "arbsand7"
inline constexpr int kArenaFd = 3;
inline constexpr int kFirstChannelFd = 4;
inline constexpr int kChannels = 4;  // as many launches at once as the concurrent-call check makes
// Virtual size of the shared memory: pages exist only once touched, so this bounds what one
// verification may allocate, not what it costs.
inline constexpr size_t kArenaBytes = size_t(64) << 30;
inline constexpr uint64_t kNoOperand = ~uint64_t(0);
inline constexpr int kOperandPointers = kOperandFieldCount;

struct LaunchRequest {
  uint64_t magic;
  arb_problem problem;
  uint64_t offsets[kOperandPointers];  // each operand pointer of arb_operands, in for_each_pointer's order
  // The allocation each operand lies in (offset and bytes in the shared memory, guards
  // included): what a device sandbox copies to the device and back.
  uint64_t allocation_offsets[kOperandPointers];
  uint64_t allocation_bytes[kOperandPointers];
  float alpha, beta, eps;
  uint64_t workspace_bytes;  // the sandbox allocates the workspace itself
};

// The answer to a request, and the sandbox's first message on channel 0 (status ARB_OK once
// the kernel is loaded; otherwise why it could not be).
struct Reply {
  uint64_t magic;
  int32_t status;
  char message[1024];  // NUL-terminated
};

// Calls f(field) for every pointer field of arb_operands (as a void*&), in kOperandFields'
// order.
template <typename F>
void for_each_pointer(arb_operands& o, F&& f) {
  for (const OperandField& field : kOperandFields) f(operand_field(o, field));
}

}  // namespace arbiter::sandbox
