// Calling a kernel through the plugin C ABI: the only code in the runtime that calls a
// kernel's function pointers. Every call passes the message buffer the ABI rules promise
// (docs/abi-rules.md, rule 4), shields the host from C++ exceptions a plugin lets escape,
// and turns a refusal or a failure into one error type: Failure, naming the kernel.
#pragma once

#include "common/hot_path.hpp"
#include "plugin/float_control.hpp"
#include "plugin/plugin_record.hpp"

#include <cstddef>
#include <string>

namespace arbiter {

// The capacity of the message buffer handed to supports() and launch().
inline constexpr size_t kKernelMessageCapacity = 512;

// supports(): true, or false with the kernel's reason in *why (when why is not null).
// Never throws.
bool kernel_supports(const KernelRecord& kernel, const arb_problem& problem, std::string* why);

// workspace_size(): the bytes the kernel needs, 0 when it has no workspace_size function.
// Throws Failure(ARB_ERR_KERNEL) when the kernel cannot size it.
size_t kernel_workspace_bytes(const KernelRecord& kernel, const arb_problem& problem);

// Failure for a launch that returned `status` with `message`, or that threw.
[[noreturn]] void kernel_launch_failed(const KernelRecord& kernel, arb_status status, char* message);
[[noreturn]] void kernel_launch_threw(const KernelRecord& kernel);

// launch(). Throws Failure with the kernel's status (ARB_ERR_KERNEL for a status the ABI
// does not define) and its message. Inline: dispatch's hot path ends here.
ARBITER_HOT_INLINE void kernel_launch(const KernelRecord& kernel, const arb_problem& problem,
                                      const arb_operands& operands, void* workspace, size_t workspace_bytes,
                                      void* stream) {
  char message[kKernelMessageCapacity];
  message[0] = '\0';
  arb_status status;
  try {
    status = kernel.abi.launch(kernel.abi.ctx, &problem, &operands, workspace, workspace_bytes, stream, message,
                               sizeof message);
  } catch (...) {
    kernel_launch_threw(kernel);
  }
  if (status != ARB_OK) [[unlikely]]
    kernel_launch_failed(kernel, status, message);
}

// kernel_launch(), watched for state the launch leaves behind on the calling thread: a
// floating-point control (float_control.hpp) other than `before` is put back, and the launch
// fails with what changed. For the gate's launches, the sandbox's and direct runs; dispatch's
// hot path compares the control only on checked calls, outside the launch (shadow_check.hpp).
void kernel_launch_watched(const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands,
                           void* workspace, size_t workspace_bytes, void* stream);

// "" if the calling thread's floating-point control is `before`; otherwise puts it back and
// says what `kernel` changed.
std::string float_control_left_changed(const KernelRecord& kernel, const FloatControl& before);

}  // namespace arbiter
