#include "plugin/kernel_call.hpp"

#include "common/failure.hpp"

#include <fmt/format.h>

namespace arbiter {
namespace {

constexpr const char* kThrew = "threw a C++ exception across the C ABI";

// A status the ABI defines keeps its meaning; anything else is the kernel's failure.
arb_status kernel_status(arb_status status) {
  return status > ARB_OK && status <= ARB_ERR_TABLE ? status : ARB_ERR_KERNEL;
}

}  // namespace

bool kernel_supports(const KernelRecord& kernel, const arb_problem& problem, std::string* why) {
  char reason[kKernelMessageCapacity];
  reason[0] = '\0';
  int32_t accepted = 0;
  try {
    accepted = kernel.abi.supports(kernel.abi.ctx, &problem, reason, sizeof reason);
  } catch (...) {
    if (why) *why = std::string("supports() ") + kThrew;
    return false;
  }
  if (accepted != 0) return true;
  reason[sizeof reason - 1] = '\0';
  if (why) *why = reason[0] != '\0' ? reason : "supports() said no";
  return false;
}

size_t kernel_workspace_bytes(const KernelRecord& kernel, const arb_problem& problem) {
  const arb_workspace_size_fn size_of = kernel.abi.workspace_size;
  if (size_of == nullptr) return 0;
  size_t bytes = 0;
  arb_status status = ARB_ERR_KERNEL;
  try {
    status = size_of(kernel.abi.ctx, &problem, &bytes);
  } catch (...) {
    fail(ARB_ERR_KERNEL, fmt::format("kernel {}: workspace_size() {}", kernel.name, kThrew));
  }
  if (status != ARB_OK)
    fail(ARB_ERR_KERNEL, fmt::format("kernel {} could not size its workspace (workspace_size() returned status {})",
                                     kernel.name, static_cast<int>(status)));
  return bytes;
}

void kernel_launch_failed(const KernelRecord& kernel, arb_status status, char* message) {
  message[kKernelMessageCapacity - 1] = '\0';
  fail(kernel_status(status),
       fmt::format("kernel {} failed (status {}): {}", kernel.name, static_cast<int>(status), message));
}

void kernel_launch_threw(const KernelRecord& kernel) {
  fail(ARB_ERR_KERNEL, fmt::format("kernel {} {}", kernel.name, kThrew));
}

std::string float_control_left_changed(const KernelRecord& kernel, const FloatControl& before) {
  const FloatControl after = FloatControl::now();
  if (after == before) return "";
  before.restore();  // the caller's arithmetic is the caller's
  return fmt::format("kernel {} changed the calling thread's floating-point control and left it so: {} (put back)",
                     kernel.name, describe_change(before, after));
}

void kernel_launch_watched(const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands,
                           void* workspace, size_t workspace_bytes, void* stream) {
  const FloatControl before = FloatControl::now();
  try {
    kernel_launch(kernel, problem, operands, workspace, workspace_bytes, stream);
  } catch (...) {
    float_control_left_changed(kernel, before);
    throw;
  }
  if (std::string changed = float_control_left_changed(kernel, before); !changed.empty()) fail(ARB_ERR_KERNEL, changed);
}

}  // namespace arbiter
