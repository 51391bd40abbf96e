// Why there is no usable CUDA device, in words an operator can act on. Without any driver the
// CUDA runtime reports cudaErrorInsufficientDriver, "CUDA driver version is insufficient for
// CUDA runtime version", which reads as if an old driver were installed: here the two cases
// are told apart by whether the driver library can be opened at all.
#pragma once

#include <dlfcn.h>

#include <string>

namespace arbiter {

// `status` and `cuda_message`: what cudaGetDeviceCount returned, and cudaGetErrorString of it.
inline std::string no_cuda_device_reason(int status, const char* cuda_message) {
  constexpr int kInsufficientDriver = 35;  // cudaErrorInsufficientDriver
  std::string reason = "no CUDA device: ";
  if (status == kInsufficientDriver) {
    if (void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
      ::dlclose(driver);
      reason += "the installed CUDA driver is older than this CUDA runtime needs (";
    } else {
      reason += "no CUDA driver is installed (libcuda.so.1 cannot be opened; ";
    }
    return reason + "cudaGetDeviceCount: " + cuda_message + ")";
  }
  return reason + "cudaGetDeviceCount: " + cuda_message;
}

}  // namespace arbiter
