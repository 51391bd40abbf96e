// cuTensorMapEncodeTiled as the emulator's driver has it: every rule of the CUDA driver API's
// documentation checked (a map the real driver refuses is refused here, with the reason in
// the launch report), then the parameters kept in the map's 128 bytes for the TMA copies.
#include "tensor_map.hpp"

#include "../../include/cuda.h"
#include "arbiter_emulator/runtime_api.hpp"

#include <cstring>
#include <string>

namespace arbiter::emu {

void set_launch_report(const std::string& report);

namespace {

int element_bytes(int type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

CUresult refuse(const std::string& why) {
  set_launch_report("cuTensorMapEncodeTiled: " + why);
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address, const cuuint64_t* dims,
                      const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* element_strides,
                      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                      CUtensorMapFloatOOBfill fill) {
  if (map == nullptr || reinterpret_cast<uintptr_t>(map) % 64 != 0) return refuse("the map must be 64-byte aligned");
  const int bytes = element_bytes(type);
  if (bytes == 0) return refuse("an unknown data type");
  if (rank < 1 || rank > 5) return refuse("tensorRank must be from 1 to 5");
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
    return refuse("interleaved layouts are not emulated (tensorRank >= 3 and 32-byte strides would be required)");
  if (address == nullptr || reinterpret_cast<uintptr_t>(address) % 16 != 0)
    return refuse("globalAddress must be 16-byte aligned");
  if (dims == nullptr || box == nullptr || element_strides == nullptr || (rank > 1 && strides == nullptr))
    return refuse("a null array");
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return refuse("globalDim[" + std::to_string(i) + "] must be in 1 .. 2^32");
    if (box[i] == 0 || box[i] > 256) return refuse("boxDim[" + std::to_string(i) + "] must be in 1 .. 256");
    if (element_strides[i] == 0 || element_strides[i] > 8)
      return refuse("elementStrides[" + std::to_string(i) + "] must be in 1 .. 8");
    if (element_strides[i] != 1) return refuse("elementStrides other than 1 are not emulated");
  }
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    if (strides[i] % 16 != 0) return refuse("globalStrides[" + std::to_string(i) + "] must be a multiple of 16");
    if (strides[i] >= (1ull << 40)) return refuse("globalStrides[" + std::to_string(i) + "] must be below 2^40");
  }
  if ((box[0] * static_cast<cuuint64_t>(bytes)) % 16 != 0)
    return refuse("boxDim[0] * the element size must be a multiple of 16 bytes");
  const uint64_t inner = box[0] * static_cast<uint64_t>(bytes);
  const uint64_t span = swizzle == CU_TENSOR_MAP_SWIZZLE_128B  ? 128
                        : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                        : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32
                                                               : 0;
  if (swizzle < CU_TENSOR_MAP_SWIZZLE_NONE || swizzle > CU_TENSOR_MAP_SWIZZLE_128B) return refuse("an unknown swizzle");
  if (span != 0 && inner > span)
    return refuse("with a " + std::to_string(span) + "-byte swizzle the inner box dimension (" + std::to_string(inner) +
                  " bytes) must be at most " + std::to_string(span) + " bytes");
  if (l2 < CU_TENSOR_MAP_L2_PROMOTION_NONE || l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) return refuse("an unknown L2 promotion");
  if (fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA &&
      !(type == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 || type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ||
        type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 || type == CU_TENSOR_MAP_DATA_TYPE_FLOAT64 ||
        type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ || type == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 ||
        type == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ))
    return refuse("the NaN out-of-bounds fill needs a floating-point data type");
  EncodedTensorMap e{};
  e.magic = EncodedTensorMap::kMagic;
  e.data_type = static_cast<uint8_t>(type);
  e.rank = static_cast<uint8_t>(rank);
  e.interleave = static_cast<uint8_t>(interleave);
  e.swizzle = static_cast<uint8_t>(swizzle);
  e.l2 = static_cast<uint8_t>(l2);
  e.oob_fill = static_cast<uint8_t>(fill);
  e.element_bytes = static_cast<uint8_t>(bytes);
  e.address = reinterpret_cast<uintptr_t>(address);
  for (cuuint32_t i = 0; i < rank; ++i) {
    e.dims[i] = dims[i];
    e.box[i] = static_cast<uint16_t>(box[i]);
    e.element_strides[i] = static_cast<uint8_t>(element_strides[i]);
  }
  for (cuuint32_t i = 0; i + 1 < rank; ++i) e.strides[i] = strides[i];
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &e, sizeof e);
  return CUDA_SUCCESS;
}

}  // namespace

void* tensor_map_encoder() { return reinterpret_cast<void*>(&encode_tiled); }

EncodedTensorMap decode_tensor_map(const void* map, std::string& why) {
  EncodedTensorMap e{};
  if (map == nullptr) {
    why = "a null tensor map";
    return e;
  }
  std::memcpy(&e, map, sizeof e);
  if (e.magic != EncodedTensorMap::kMagic) why = "the tensor map was not made by cuTensorMapEncodeTiled";
  return e;
}

uint32_t swizzled(uint32_t address, int swizzle) {
  switch (swizzle) {
    case 3: return address ^ (((address >> 7) & 7u) << 4);
    case 2: return address ^ (((address >> 7) & 3u) << 4);
    case 1: return address ^ (((address >> 7) & 1u) << 4);
    default: return address;
  }
}

}  // namespace arbiter::emu
