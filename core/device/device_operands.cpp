#include "device/device_operands.hpp"

#include <algorithm>
#include <cstring>

namespace arbiter {
namespace {

// Guard bytes drawn from the seed (splitmix64): random-looking, different before and after
// each operand, so that nothing about the words next to an operand says "the gate's buffer"
// (a canary repeated 64 times did).
std::vector<unsigned char> guard_bytes(uint64_t seed) {
  std::vector<unsigned char> bytes(DeviceOperands::kGuardBytes);
  for (size_t i = 0; i < bytes.size(); i += 8) {
    seed += 0x9e3779b97f4a7c15ull;
    uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(&bytes[i], &z, std::min<size_t>(8, bytes.size() - i));
  }
  return bytes;
}

}  // namespace

DeviceOperands::DeviceOperands(Device& device, const ProblemBuffers& host, void* stream, uint32_t canary)
    : device_(device) {
  for (const auto& operand : host.all()) {
    Slot slot;
    slot.name = operand.name;
    slot.data_bytes = operand.buffer.size();
    slot.memory = device.allocate(slot.data_bytes + 2 * kGuardBytes);
    const uint64_t seed = (uint64_t{canary} << 32) ^ (0x5851f42d4c957f2dull * (slots_.size() + 1));
    slot.guard_before = guard_bytes(seed);
    slot.guard_after = guard_bytes(~seed);
    device.upload(slot.memory.data(), slot.guard_before.data(), kGuardBytes, stream);
    device.upload(slot.data() + slot.data_bytes, slot.guard_after.data(), kGuardBytes, stream);
    bytes_ += slot.data_bytes;
    slots_.push_back(std::move(slot));
  }
  const arb_operands scalars = host.operands();
  operands_ = operands_by_name(
      host.problem(), [this](const char* name) { return data(name); }, scalars.alpha, scalars.beta, scalars.eps);
  upload(host, stream);
}

void* DeviceOperands::data(const std::string& name) const {
  for (const Slot& s : slots_)
    if (s.name == name) return s.data();
  return nullptr;
}

void DeviceOperands::upload(const ProblemBuffers& host, void* stream) {
  for (size_t i = 0; i < slots_.size(); ++i)
    device_.upload(slots_[i].data(), host.all()[i].buffer.data(), slots_[i].data_bytes, stream);
}

void DeviceOperands::download(ProblemBuffers& host, void* stream) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    device_.download(host.buffer_data(i), slots_[i].data(), slots_[i].data_bytes, stream);
  device_.synchronize(stream);
}

std::vector<std::string> DeviceOperands::damaged_guards(void* stream) const {
  std::vector<std::string> damaged;
  std::vector<unsigned char> before(kGuardBytes), after(kGuardBytes);
  for (const Slot& s : slots_) {
    device_.download(before.data(), s.memory.data(), kGuardBytes, stream);
    device_.download(after.data(), s.data() + s.data_bytes, kGuardBytes, stream);
    device_.synchronize(stream);
    if (before != s.guard_before || after != s.guard_after) damaged.push_back(s.name);
  }
  return damaged;
}

}  // namespace arbiter
