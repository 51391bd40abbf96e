// Shared by the CUDA plugins: the entry point refuses to load without a usable CUDA device,
// with the reason `arbiter plugins` then shows ("no CUDA device: ..."), so the CPU plugins
// serve; and CUDA errors become the plugin ABI's ARB_ERR_KERNEL with a message.
#pragma once

#include <arbiter/plugin.hpp>
#include "arbiter_base/cuda_absence.hpp"

#include <cuda_runtime.h>

#include <string>

namespace arbiter::plugin {

// Returns device 0's properties; throws Error(ARB_ERR_UNSUPPORTED) without a device.
inline cudaDeviceProp require_cuda_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) throw Error(ARB_ERR_UNSUPPORTED, no_cuda_device_reason(status, cudaGetErrorString(status)));
  if (count == 0) throw Error(ARB_ERR_UNSUPPORTED, "no CUDA device: cudaGetDeviceCount: 0 devices");
  cudaDeviceProp prop{};
  const cudaError_t props = cudaGetDeviceProperties(&prop, 0);
  if (props != cudaSuccess)
    throw Error(ARB_ERR_UNSUPPORTED, std::string("no CUDA device: cudaGetDeviceProperties: ") + cudaGetErrorString(props));
  return prop;
}

// Throws Error(ARB_ERR_KERNEL, "<what>: <CUDA's message>") unless status is cudaSuccess.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(ARB_ERR_KERNEL, std::string(what) + ": " + cudaGetErrorString(status));
}

}  // namespace arbiter::plugin
