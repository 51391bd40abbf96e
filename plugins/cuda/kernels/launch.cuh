// The one way the cuda plugin's host code starts a kernel: cudaLaunchKernelEx, an ordinary
// runtime call (no <<< >>> syntax), so that the same launch sites compile for the GPU and
// for the SIMT emulator (emulator/). Returns the launch's status and, as <<< >>> followed by
// cudaGetLastError() did, leaves no error behind for the thread's next call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace arbiter::cuda {

template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

}  // namespace arbiter::cuda
