// Host side of TMA: tensor maps for 2-D row-major matrices of 16-bit elements, boxes copied
// with 128-byte swizzling. cuTensorMapEncodeTiled is a driver function: it is found through
// the runtime (cudaGetDriverEntryPointByVersion), so nothing links the driver library.
#pragma once

#include "kernel_args.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace arbiter::cuda {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled of the driver, or nullptr where the driver has none.
inline EncodeTiled encode_tiled() {
  static const EncodeTiled function = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return static_cast<EncodeTiled>(nullptr);
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return function;
}

// A [rows, cols] row-major f16/bf16 matrix (ld elements between rows) as boxes of box_rows x
// box_cols elements (box_cols * 2 = 128 bytes for the 128-byte swizzle), zeros read outside
// the matrix. False when the driver has no encoder or refuses the map.
inline bool make_tile_map(CUtensorMap& map, const void* data, int64_t rows, int64_t cols, int64_t ld, Dtype dtype,
                          cuuint32_t box_rows, cuuint32_t box_cols) {
  const EncodeTiled encode = encode_tiled();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};  // innermost first
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};  // bytes between rows
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  return encode(&map, dtype == Dtype::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                const_cast<void*>(data), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace arbiter::cuda
