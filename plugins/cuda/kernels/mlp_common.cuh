// What the two CUDA MLP-block kernels share (mlp.cu: three launches; mlp_persistent.cu: one):
// their limits, the token rows that go through a weight row together, the warp sum and the
// test for 16-byte vector rows.
#pragma once

#include "common.cuh"

#include <cstdint>

namespace arbiter::cuda {

constexpr int64_t kMlpMaxRows = 64;      // decode sizes; the chain's GEMMs serve more
constexpr int kRowGroup = 4;             // token rows sharing each pass over a weight row
constexpr int64_t kMaxGridBlocks = 65535;

// The sum over a warp's lanes, every lane getting it; a fixed order: deterministic.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Are a matrix's rows whole 16-byte vectors, each starting on a 16-byte boundary?
template <typename T>
bool vector_rows(const void* base, int64_t ld, int64_t length) {
  constexpr int64_t kE = 16 / sizeof(T);
  return reinterpret_cast<uintptr_t>(base) % 16 == 0 && ld % kE == 0 && length % kE == 0;
}

}  // namespace arbiter::cuda
