// What a captured graph holds: launches (with their own copy of the arguments), copies,
// fills and event records, replayed in order.
#pragma once

#include "arbiter_emulator/runtime_api.hpp"

namespace arbiter::emu {

struct GraphNode {
  enum class Kind { kernel, copy, fill, event } kind = Kind::kernel;
  const void* kernel = nullptr;
  KernelProbe probe = nullptr;
  LaunchConfig config;
  KernelThunk run = nullptr;
  ArgumentsCopy copy_arguments = nullptr;
  ArgumentsFree free_arguments = nullptr;
  void* arguments = nullptr;  // owned
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int value = 0, memcpy_kind = 0;
  Event* event = nullptr;

  GraphNode() = default;
  GraphNode(const GraphNode& other);  // copies the arguments
  GraphNode(GraphNode&& other) noexcept { *this = std::move(other); }
  GraphNode& operator=(GraphNode&& other) noexcept {
    std::swap(kind, other.kind);
    std::swap(kernel, other.kernel);
    std::swap(probe, other.probe);
    std::swap(config, other.config);
    std::swap(run, other.run);
    std::swap(copy_arguments, other.copy_arguments);
    std::swap(free_arguments, other.free_arguments);
    std::swap(arguments, other.arguments);
    std::swap(dst, other.dst);
    std::swap(src, other.src);
    std::swap(bytes, other.bytes);
    std::swap(value, other.value);
    std::swap(memcpy_kind, other.memcpy_kind);
    std::swap(event, other.event);
    return *this;
  }
  GraphNode& operator=(const GraphNode&) = delete;
  ~GraphNode();
};

// Appends the node to the graph `stream` is capturing into; false when it is not capturing.
bool capture(Stream* stream, GraphNode node);

}  // namespace arbiter::emu
