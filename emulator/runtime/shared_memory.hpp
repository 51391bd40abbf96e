// A block's shared memory (emulator/README.md): one window per block with a dynamic part
// (extern __shared__) at a deliberately unaligned place (offset 128: never 1024-aligned, so
// the kernels' own alignment code runs) and the static __shared__ variables after it, each
// part its own exactly sized host allocation, filled with garbage when the block starts. PTX
// instructions name shared memory by 32-bit address; every such access is checked against
// the window here (the emulator's own bounds checks; ASan watches the host pointers).
#pragma once

#include "engine.hpp"

#include <cstdint>

namespace arbiter::emu {

constexpr uint32_t kDynamicSharedOffset = 128;
// shared::cluster addresses: rank r's window at (r + 1) << 24; a shared::cta address (below
// 1 << 24) is the executing block's.
constexpr uint32_t kClusterWindowShift = 24;

void setup_shared_window(Block& block, Launch& launch);
// Not empty once a module declared a __shared__ variable at namespace scope (unsupported):
// every launch fails with this message.
const std::string& shared_variable_misuse();

// The host pointer of `bytes` at shared address `address` of the calling thread's block (or,
// for shared::cluster addresses, of the block the address names); faults outside the window.
unsigned char* shared_bytes(uint32_t address, uint32_t bytes, const char* what, Site where);
// The block a shared::cluster address names, and the address within it.
Block& cluster_target(uint32_t address, uint32_t& offset, Site where);

}  // namespace arbiter::emu
