// softmax.v1: one block of 256 threads per row. Three passes over the row (max, sum of
// exponentials, write), block reductions by warp shuffles; f32 math for every dtype.
#include "arbiter_kernel.h"

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The block-wide max (is_max) or sum of v, in every thread. `scratch` holds 32 floats.
__device__ float block_reduce(float v, float* scratch, bool is_max) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = is_max ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (is_max ? -__int_as_float(0x7f800000) : 0.0f);
  return is_max ? warp_max(v) : warp_sum(v);
}

extern "C" __global__ void softmax_rowblock(const arb_t* x, arb_t* y, arb_index rows, arb_index cols, arb_index ld_x,
                                            arb_index ld_y) {
  __shared__ float scratch[32];
  const arb_index row = blockIdx.x;
  if (row >= rows) return;
  const arb_t* xr = x + row * ld_x;
  arb_t* yr = y + row * ld_y;
  float m = -__int_as_float(0x7f800000);
  for (arb_index c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, arb_load(xr, c));
  m = block_reduce(m, scratch, true);
  float s = 0.0f;
  for (arb_index c = threadIdx.x; c < cols; c += blockDim.x) s += expf(arb_load(xr, c) - m);
  s = block_reduce(s, scratch, false);
  const float inverse = 1.0f / s;
  for (arb_index c = threadIdx.x; c < cols; c += blockDim.x) arb_store(yr, c, expf(arb_load(xr, c) - m) * inverse);
}
