// A CUDA GPU as a device (built with ARBITER_WITH_CUDA): cudaMalloc'd memory, copies on
// the caller's stream, fills through a pinned staging buffer, events for timing. The
// runtime is linked statically and finds the driver at run time, so without a driver (or
// a GPU) make_cuda_device says why and the context goes on with the CPU alone.
#include "common/failure.hpp"
#include "device/device.hpp"

#include "arbiter_base/cuda_absence.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <vector>

namespace arbiter {
namespace {

#define ARBITER_CUDA_DEVICE_EMULATED false
#include "device/cuda_runtime_device.inc"

}  // namespace

std::unique_ptr<Device> make_cuda_device(int id, std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why) *why = no_cuda_device_reason(status, cudaGetErrorString(status));
    return nullptr;
  }
  if (id >= count) {
    if (why) *why = fmt::format("no CUDA device {} ({} present)", id, count);
    return nullptr;
  }
  try {
    return std::make_unique<CudaDevice>(id, "cuda");
  } catch (const Failure& f) {
    if (why) *why = f.what();
    return nullptr;
  }
}

}  // namespace arbiter
