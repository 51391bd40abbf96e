#include "device/device_operands.hpp"

#include <cstring>

namespace arbiter {

DeviceOperands::DeviceOperands(Device& device, const ProblemBuffers& host, void* stream, uint32_t canary)
    : device_(device), canary_(canary) {
  for (const auto& operand : host.all()) {
    Slot slot;
    slot.name = operand.name;
    slot.data_bytes = operand.buffer.size();
    slot.memory = device.allocate(slot.data_bytes + 2 * kGuardBytes);
    device.fill(slot.memory.data(), canary_, kGuardBytes, stream);
    device.fill(slot.data() + slot.data_bytes, canary_, kGuardBytes, stream);
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
  std::vector<unsigned char> expected(kGuardBytes), before(kGuardBytes), after(kGuardBytes);
  for (size_t i = 0; i < kGuardBytes; ++i) expected[i] = static_cast<unsigned char>(canary_ >> (8 * (i % 4)));
  for (const Slot& s : slots_) {
    device_.download(before.data(), s.memory.data(), kGuardBytes, stream);
    device_.download(after.data(), s.data() + s.data_bytes, kGuardBytes, stream);
    device_.synchronize(stream);
    if (before != expected || after != expected) damaged.push_back(s.name);
  }
  return damaged;
}

}  // namespace arbiter
