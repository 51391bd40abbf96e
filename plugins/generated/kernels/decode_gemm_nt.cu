// gemm.v1 for decode shapes: few rows of A (m <= 64), B stored [n, k] (weights [out, in],
// trans_b = 1). One warp per output element: the lanes stride along k (coalesced reads of
// both rows), a shuffle reduction in a fixed order, then the epilogue in lane 0.
// 8 warps per block cover 8 consecutive columns; grid = (ceil_div(n, 8), m).
#include "arbiter_kernel.h"

extern "C" __global__ void decode_gemm_nt(const arb_t* a, const arb_t* b, const arb_t* c, const arb_t* bias, arb_t* d,
                                          arb_index m, arb_index n, arb_index k, arb_index lda, arb_index ldb,
                                          arb_index ldc, arb_index ldd, float alpha, float beta, arb_flag trans_a,
                                          arb_flag trans_b, arb_flag activation, arb_flag has_c, arb_flag has_bias) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const arb_index j = static_cast<arb_index>(blockIdx.x) * (blockDim.x / 32) + warp;
  const arb_index i = blockIdx.y;
  if (i >= m || j >= n) return;  // the same for every lane of the warp
  const arb_t* a_row = a + i * lda;
  const arb_t* b_row = b + j * ldb;
  float acc = 0.0f;
  for (arb_index q = lane; q < k; q += 32) acc += arb_load(a_row, q) * arb_load(b_row, q);
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane != 0) return;
  float v = alpha * acc;
  if (has_c) v += beta * arb_load(c, i * ldc + j);
  if (has_bias) v += arb_load(bias, j);
  arb_store(d, i * ldd + j, arb_activate(activation, v));
}
