// What the CUDA kernels that project normalised token rows at decode sizes share (mlp.cu:
// three launches; mlp_persistent.cu and qkv.cu: one): their limits, the token rows that go
// through a weight row together, the warp sum, the test for 16-byte vector rows, and the rows'
// RMS scales and dot products with n = x * norm weight formed on the fly.
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

// The token rows [rows, hidden] (row stride ld_x) whose normalised activations
// n = rmsnorm(x) * norm weight go through the weight rows.
template <typename T>
struct NormedRows {
  const T* x;
  int64_t ld_x, rows;
  const T* norm_weight;
  int64_t hidden;
};

// scale[r] = 1 / sqrt(mean(x[r]^2) + eps) for every row, a warp a row (kWarps warps a block).
// The caller syncs the block before reading them.
template <typename T, int kWarps>
__device__ __forceinline__ void row_scales(const NormedRows<T>& in, float eps, float* scale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t r = warp; r < in.rows; r += kWarps) {
    const T* x = in.x + r * in.ld_x;
    float sum = 0.0f;
    for (int64_t c = lane; c < in.hidden; c += 32) {
      const float v = to_float(__ldg(x + c));
      sum += v * v;
    }
    sum = warp_sum(sum);
    if (lane == 0) scale[r] = rsqrtf(sum / static_cast<float>(in.hidden) + eps);
  }
}

// out[i][r] += w_i . (x[r0 + r] * norm weight) over hidden, for kRowGroup rows from r0 (rows
// past the last repeat it: computed, never used) and W weight rows; each lane's share, summed
// by the caller, and without the rows' scales (the caller multiplies by them). kVector: rows of
// x, the norm weight and the weight rows in whole 16-byte vectors, lane taking vectors lane,
// lane + 32, ...; else one element at a time, lane-strided.
template <typename T, int W, bool kVector>
__device__ __forceinline__ void normed_dots(const NormedRows<T>& in, const T* const (&w)[W], int64_t r0,
                                            float (&out)[W][kRowGroup]) {
  const T* row[kRowGroup];
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) row[r] = in.x + (r0 + r < in.rows ? r0 + r : in.rows - 1) * in.ld_x;
  const int lane = threadIdx.x % 32;
  if constexpr (kVector) {
    using V = Vec16<T>;
    constexpr int kE = V::kElements;
    for (int64_t v = lane; v < in.hidden / kE; v += 32) {
      V wv[W], nw;
#pragma unroll
      for (int i = 0; i < W; ++i) wv[i].load(w[i], static_cast<int>(v));
      nw.load(in.norm_weight, static_cast<int>(v));
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        V xv;
        xv.load(row[r], static_cast<int>(v));
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          const float n = xv.get(e) * nw.get(e);
#pragma unroll
          for (int i = 0; i < W; ++i) out[i][r] += wv[i].get(e) * n;
        }
      }
    }
  } else {
    for (int64_t c = lane; c < in.hidden; c += 32) {
      float wv[W];
#pragma unroll
      for (int i = 0; i < W; ++i) wv[i] = to_float(__ldg(w[i] + c));
      const float nw = to_float(__ldg(in.norm_weight + c));
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        const float n = to_float(__ldg(row[r] + c)) * nw;
#pragma unroll
        for (int i = 0; i < W; ++i) out[i][r] += wv[i] * n;
      }
    }
  }
}

// A warp's pass over two weight rows w for every token row: the rows' scales applied to the
// dot products with x * norm weight, handed on lane 0 to store(row, first row's, second row's).
template <typename T, bool kVector, typename Store>
__device__ __forceinline__ void scaled_pair_dots(const NormedRows<T>& in, const T* const (&w)[2], const float* scale,
                                                 Store store) {
  for (int64_t r0 = 0; r0 < in.rows; r0 += kRowGroup) {
    float s[2][kRowGroup] = {};
    normed_dots<T, 2, kVector>(in, w, r0, s);
#pragma unroll
    for (int r = 0; r < kRowGroup; ++r) {
      const float first = warp_sum(s[0][r]), second = warp_sum(s[1][r]);
      if (threadIdx.x % 32 == 0 && r0 + r < in.rows) store(r0 + r, first * scale[r0 + r], second * scale[r0 + r]);
    }
  }
}

}  // namespace arbiter::cuda
