// Shared device code of the cuda plugin's kernels: element types, 16-byte vectors,
// block reductions and the GEMM epilogue activations.
#pragma once

#include "kernel_args.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace arbiter::cuda {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// A value rounded to T and back: what storing it and reading it again gives.
template <typename T>
__device__ __forceinline__ float rounded(float v) { return to_float(from_float<T>(v)); }

// 16 bytes of T, kept packed: the unit of every global access of the row kernels
// (LDG.E.128 / STG.E.128). Packed, a thread holds 8 of them in 32 registers whatever the
// dtype; elements are widened to f32 when used.
template <typename T>
struct Vec16 {
  static constexpr int kElements = 16 / sizeof(T);
  uint4 bits;

  // Vector `index` (in units of 16 bytes) of a 16-byte-aligned row, through the read-only
  // (non-coherent) path: only for memory no thread writes while the kernel runs.
  __device__ __forceinline__ void load(const T* row, int index) {
    bits = __ldg(reinterpret_cast<const uint4*>(row) + index);
  }
  // The same through the coherent path, for memory the kernel also writes.
  __device__ __forceinline__ void load_coherent(const T* row, int index) {
    bits = reinterpret_cast<const uint4*>(row)[index];
  }
  __device__ __forceinline__ void store(T* row, int index) const { reinterpret_cast<uint4*>(row)[index] = bits; }
  // Element i, copied out of (into) the packed bits: reading a uint4 through a T pointer
  // would break C++'s strict aliasing rule (the SIMT emulator's -O2 build miscompiled it).
  __device__ __forceinline__ float get(int i) const {
    T element;
    memcpy(&element, reinterpret_cast<const unsigned char*>(&bits) + i * sizeof(T), sizeof(T));
    return to_float(element);
  }
  __device__ __forceinline__ void set(int i, float v) {
    const T element = from_float<T>(v);
    memcpy(reinterpret_cast<unsigned char*>(&bits) + i * sizeof(T), &element, sizeof(T));
  }
};

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces one value per thread over the block (blockDim.x a multiple of 32, at most 1024).
// Every warp combines the per-warp partials in the same order, so every thread gets the
// same, deterministic result. Ends with a barrier: the scratch may be reused at once.
template <typename Op>
__device__ __forceinline__ float block_reduce(float value, Op op, float identity) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  value = lane < warps ? partial[lane] : identity;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  __syncthreads();
  return value;
}

// The GEMM epilogue activations, the same forms as arbiter's other kernels (ARB_ACT_*:
// 1 relu, 2 gelu_tanh, 3 gelu_erf, 4 silu).
__device__ __forceinline__ float activate(int activation, float x) {
  switch (activation) {
    case 1: return x > 0.0f ? x : 0.0f;
    case 2: return x / (1.0f + expf(-1.5957691216057308f * (x + 0.044715f * x * x * x)));
    case 3: return 0.5f * x * erfcf(-x * 0.7071067811865476f);
    case 4: return x / (1.0f + expf(-x));
    default: return x;
  }
}

}  // namespace arbiter::cuda
