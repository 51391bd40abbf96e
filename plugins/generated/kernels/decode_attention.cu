// attention.v1: one block of 128 threads per query row (batch, head, query). The keys go by in
// tiles of 128, one key a thread for its score (q . k in f32, q scaled once in shared memory);
// the tile's maximum and sum of exponentials update the row's running ones (online softmax),
// and each thread keeps the weighted sum of values for head_dim elements t and t + 128. f32
// math for every dtype; head_dim up to 256.
#include "arbiter_kernel.h"

#define THREADS 128
#define MAX_DIM 256

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

extern "C" __global__ void decode_attention(const arb_t* q, const arb_t* k, const arb_t* v, arb_t* o, arb_index batch,
                                            arb_index q_len, arb_index kv_len, arb_index heads, arb_index kv_heads,
                                            arb_index dim, arb_index ld_q_batch, arb_index ld_q_token,
                                            arb_index ld_q_head, arb_index ld_k_batch, arb_index ld_k_token,
                                            arb_index ld_k_head, arb_index ld_v_batch, arb_index ld_v_token,
                                            arb_index ld_v_head, arb_index ld_o_batch, arb_index ld_o_token,
                                            arb_index ld_o_head, float scale, arb_flag causal) {
  __shared__ float query[MAX_DIM];
  __shared__ float weight[THREADS];
  __shared__ float scratch[32];
  const arb_index b = blockIdx.x / heads, h = blockIdx.x % heads, i = blockIdx.y;
  if (b >= batch || i >= q_len) return;  // the whole block alike: no barrier is left waiting
  const arb_index g = h / (heads / kv_heads);
  const arb_t* qr = q + b * ld_q_batch + i * ld_q_token + h * ld_q_head;
  for (arb_index d = threadIdx.x; d < dim; d += blockDim.x) query[d] = arb_load(qr, d) * scale;
  __syncthreads();
  const arb_index seen = causal ? i + kv_len - q_len + 1 : kv_len;  // keys [0, seen) are visible
  const arb_t* kb = k + b * ld_k_batch + g * ld_k_head;
  const arb_t* vb = v + b * ld_v_batch + g * ld_v_head;
  float top = -__int_as_float(0x7f800000), total = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  for (arb_index first = 0; first < seen; first += THREADS) {
    const arb_index j = first + threadIdx.x;
    float score = -__int_as_float(0x7f800000);
    if (j < seen) {
      const arb_t* kr = kb + j * ld_k_token;
      score = 0.0f;
      for (arb_index d = 0; d < dim; ++d) score += query[d] * arb_load(kr, d);
    }
    const float new_top = fmaxf(top, block_reduce(score, scratch, true));
    const float rescale = expf(top - new_top);  // 0 for the first tile (top = -inf)
    const float p = j < seen ? expf(score - new_top) : 0.0f;
    weight[threadIdx.x] = p;
    total = total * rescale + block_reduce(p, scratch, false);  // its barriers also publish `weight`
    top = new_top;
    acc0 *= rescale;
    acc1 *= rescale;
    const arb_index count = seen - first < THREADS ? seen - first : THREADS;
    const arb_index d0 = threadIdx.x, d1 = threadIdx.x + THREADS;
    for (arb_index jj = 0; jj < count; ++jj) {
      const arb_t* vr = vb + (first + jj) * ld_v_token;
      if (d0 < dim) acc0 += weight[jj] * arb_load(vr, d0);
      if (d1 < dim) acc1 += weight[jj] * arb_load(vr, d1);
    }
    __syncthreads();  // `weight` is rewritten by the next tile
  }
  arb_t* orow = o + b * ld_o_batch + i * ld_o_token + h * ld_o_head;
  const float inverse = 1.0f / total;
  if (threadIdx.x < dim) arb_store(orow, threadIdx.x, acc0 * inverse);
  if (threadIdx.x + THREADS < dim) arb_store(orow, threadIdx.x + THREADS, acc1 * inverse);
}
