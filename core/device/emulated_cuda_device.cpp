// The SIMT emulator as a CUDA device (cuda.device = "emulated"): the same device code as
// cuda_device.cpp, compiled against the emulator's stand-in CUDA runtime (emulator/include is
// first on this file's include path), so that memory is exactly sized host memory, streams
// run work in order at once, and graphs replay launches on the emulator.
#include "common/failure.hpp"
#include "device/device.hpp"

#include <cuda_runtime.h>  // emulator/include/cuda_runtime.h
#include <fmt/format.h>

#include <vector>

#if !defined(ARBITER_EMULATOR_RUNTIME)
#error "emulated_cuda_device.cpp must see the emulator's cuda_runtime.h (emulator/include first on the path)"
#endif

namespace arbiter {
namespace {

#define ARBITER_CUDA_DEVICE_EMULATED true
#include "device/cuda_runtime_device.inc"

}  // namespace

std::unique_ptr<Device> make_emulated_cuda_device(std::string* why) {
  try {
    return std::make_unique<CudaDevice>(0, "cuda-emulated");
  } catch (const Failure& f) {
    if (why) *why = f.what();
    return nullptr;
  }
}

}  // namespace arbiter
