// A build without the SIMT emulator (ARBITER_EMULATOR off, or no Boost.Context or CUDA toolkit).
#include "device/device.hpp"

namespace arbiter {

std::unique_ptr<Device> make_emulated_cuda_device(std::string* why) {
  if (why) *why = "this build of arbiter has no SIMT emulator (configure with ARBITER_EMULATOR=ON)";
  return nullptr;
}

}  // namespace arbiter
