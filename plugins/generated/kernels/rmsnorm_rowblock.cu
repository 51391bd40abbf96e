// rmsnorm.v1: one block of 256 threads per row. With a residual, x += residual is stored
// (rounded to the dtype) and that stored sum is normalised, as arbiter's reference does.
// Each thread re-reads only the elements it wrote itself, so no barrier is needed there.
#include "arbiter_kernel.h"

__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

extern "C" __global__ void rmsnorm_rowblock(arb_t* x, const arb_t* residual, const arb_t* weight, arb_t* y,
                                            arb_index rows, arb_index cols, arb_index ld_x, arb_index ld_residual,
                                            arb_index ld_y, float eps, arb_flag has_residual) {
  __shared__ float scratch[32];
  const arb_index row = blockIdx.x;
  if (row >= rows) return;
  arb_t* xr = x + row * ld_x;
  arb_t* yr = y + row * ld_y;
  float sum_sq = 0.0f;
  for (arb_index c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = arb_load(xr, c);
    if (has_residual) {
      arb_store(xr, c, v + arb_load(residual + row * ld_residual, c));
      v = arb_load(xr, c);  // the rounded sum
    }
    sum_sq += v * v;
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float scale = 1.0f / sqrtf(sum_sq / static_cast<float>(cols) + eps);
  for (arb_index c = threadIdx.x; c < cols; c += blockDim.x) arb_store(yr, c, arb_load(xr, c) * scale * arb_load(weight, c));
}
