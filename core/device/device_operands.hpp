// The operands of one problem in device memory, mirrored from host ProblemBuffers, each
// between two guard regions filled with a canary pattern. New objects get new addresses,
// which the verification gate relies on; upload() refreshes the data in place (same
// addresses), which it relies on too.
#pragma once

#include "device/device.hpp"
#include "device/problem_buffers.hpp"

#include <string>
#include <vector>

namespace arbiter {

class DeviceOperands {
 public:
  static constexpr size_t kGuardBytes = 256;
  static constexpr uint32_t kCanary = 0x7fbadc0du;  // the guards' seed when none is drawn

  // `canary` seeds the guards' contents, random bytes different for every guard: the
  // verification gate draws one per run, so that a kernel cannot recognise the gate's
  // buffers by what lies next to them.
  DeviceOperands(Device& device, const ProblemBuffers& host, void* stream, uint32_t canary = kCanary);

  // Copies every operand (rows, padding and all) from host buffers of the same problem.
  void upload(const ProblemBuffers& host, void* stream);
  // Copies every operand back into host buffers of the same problem.
  void download(ProblemBuffers& host, void* stream) const;
  // Computed once: the addresses never change.
  const arb_operands& operands() const { return operands_; }
  // The device address of an operand's data ("x", "d"...), nullptr if the problem has none.
  void* data(const std::string& name) const;
  // Names of the operands whose guard regions no longer hold what was put there.
  std::vector<std::string> damaged_guards(void* stream) const;
  // Bytes of all operands together (for rotating sets past the cache).
  size_t bytes() const { return bytes_; }

 private:
  struct Slot {
    std::string name;
    DeviceMemory memory;  // [guard][data][guard]
    size_t data_bytes = 0;
    std::vector<unsigned char> guard_before, guard_after;  // what the guards must still hold
    std::byte* data() const { return static_cast<std::byte*>(memory.data()) + kGuardBytes; }
  };
  Device& device_;
  std::vector<Slot> slots_;
  arb_operands operands_{};
  size_t bytes_ = 0;
};

}  // namespace arbiter
