// make_cuda_device for builds without CUDA (ARBITER_CUDA=OFF or no toolkit).
#include "device/device.hpp"

namespace arbiter {

std::unique_ptr<Device> make_cuda_device(int, std::string* why) {
  if (why) *why = "this arbiter was built without CUDA (ARBITER_CUDA=OFF or no toolkit found)";
  return nullptr;
}

}  // namespace arbiter
