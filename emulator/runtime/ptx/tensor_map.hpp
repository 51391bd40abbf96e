// The emulator's tensor maps (TMA descriptors): what cuTensorMapEncodeTiled writes into the
// 128 opaque bytes of a CUtensorMap here, and the tile copy cp.async.bulk.tensor makes of it.
#pragma once

#include <cstdint>
#include <string>

namespace arbiter::emu {

struct EncodedTensorMap {
  static constexpr uint32_t kMagic = 0xa7b17e50;
  uint32_t magic;
  uint8_t data_type, rank, interleave, swizzle, l2, oob_fill, element_bytes, reserved;
  uint16_t box[5];
  uint8_t element_strides[5];
  uint8_t padding[1];
  uint64_t address;
  uint64_t dims[5];
  uint64_t strides[4];  // bytes between consecutive indices of dimensions 1..4
};
static_assert(sizeof(EncodedTensorMap) <= 128, "a CUtensorMap holds 128 bytes");

// Reads an encoded map; empty `why` when it is one.
EncodedTensorMap decode_tensor_map(const void* map, std::string& why);

// The shared-memory address of byte `offset` of a box written with `swizzle` (0 none, 1 32B,
// 2 64B, 3 128B) at `base`: the 16-byte chunk index XORed with address bits above it
// (128B: bits 4-6 with 7-9; 64B: 4-5 with 7-8; 32B: 4 with 7).
uint32_t swizzled(uint32_t address, int swizzle);

}  // namespace arbiter::emu
