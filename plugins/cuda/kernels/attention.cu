// Attention, split over the keys (flash-decoding): a decode step has too few query rows
// (batch x heads) to fill a GPU, so each row's visible keys are cut into `splits` chunks of
// whole 128-key tiles, one block of 128 threads per (row, chunk). A block keeps its query in
// shared memory (f32, scaled), scores a tile one key a thread (16-byte loads of the key's
// row), folds the tile into its running maximum and sum of exponentials (online softmax), and
// accumulates the weighted values with a head_dim element a thread (two for head_dim up to
// 256). Its partial result (maximum, sum, head_dim accumulators) goes to the workspace; a
// second kernel, one block per row, rescales the chunks' partials to their common maximum and
// writes o. f32 math for every dtype; the combination is in a fixed order (deterministic).
#include "common.cuh"
#include "launch.cuh"

#include <algorithm>
#include <type_traits>

namespace arbiter::cuda {
namespace {

constexpr int kThreads = 128;  // keys of a tile, and head_dim elements a pass
constexpr int kMaxDim = 2 * kThreads;

struct AttentionParams {
  const void *q, *k, *v;
  void* o;
  float* partials;  // per (row, chunk): maximum, sum, then dim accumulators
  int64_t batch, q_len, kv_len, heads, group, dim;
  int64_t ld_q[3], ld_k[3], ld_v[3], ld_o[3];  // batch, token, head
  float scale;
  int32_t causal;
  int64_t rows, splits, chunk;  // rows = batch * q_len * heads; chunk: keys a split, a multiple of kThreads
};

__device__ __forceinline__ int64_t partial_floats(const AttentionParams& p) { return p.dim + 2; }

// Element e (a constant once unrolled) of 16 bytes of T, by shifts of its 32-bit word: Vec16's
// byte copies left the 16-bit elements of this loop in local memory.
template <typename T>
__device__ __forceinline__ float element(const uint4& bits, int e) {
  constexpr int kPerWord = 4 / sizeof(T);
  const int w = e / kPerWord;
  const uint32_t word = w == 0 ? bits.x : w == 1 ? bits.y : w == 2 ? bits.z : bits.w;
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(word);
  } else {
    const auto half = static_cast<unsigned short>(e % 2 != 0 ? word >> 16 : word & 0xffffu);
    if constexpr (std::is_same_v<T, __half>)
      return __half2float(__ushort_as_half(half));
    else
      return __bfloat162float(__ushort_as_bfloat16(half));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attention_chunk_kernel(AttentionParams p) {
  __shared__ float query[kMaxDim];
  __shared__ float weight[kThreads];
  const int64_t row = blockIdx.x, split = blockIdx.y;
  const int64_t h = row % p.heads, i = (row / p.heads) % p.q_len, b = row / (p.heads * p.q_len);
  const int64_t g = h / p.group;
  const T* qr = static_cast<const T*>(p.q) + b * p.ld_q[0] + i * p.ld_q[1] + h * p.ld_q[2];
  for (int64_t d = threadIdx.x; d < p.dim; d += kThreads) query[d] = to_float(qr[d]) * p.scale;
  __syncthreads();
  const int64_t seen = p.causal ? i + p.kv_len - p.q_len + 1 : p.kv_len;
  const int64_t begin = split * p.chunk, end = min(seen, begin + p.chunk);
  const T* kb = static_cast<const T*>(p.k) + b * p.ld_k[0] + g * p.ld_k[2];
  const T* vb = static_cast<const T*>(p.v) + b * p.ld_v[0] + g * p.ld_v[2];
  float top = -INFINITY, total = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  for (int64_t first = begin; first < end; first += kThreads) {
    const int64_t j = first + threadIdx.x;
    float score = -INFINITY;
    if (j < end) {
      const T* kr = kb + j * p.ld_k[1];
      score = 0.0f;
      constexpr int kElements = 16 / sizeof(T);
      for (int64_t v = 0; v < p.dim / kElements; ++v) {  // head_dim a multiple of a vector
        const uint4 bits = __ldg(reinterpret_cast<const uint4*>(kr) + v);
#pragma unroll
        for (int e = 0; e < kElements; ++e) score = fmaf(query[v * kElements + e], element<T>(bits, e), score);
      }
    }
    const float new_top = fmaxf(top, block_reduce(score, MaxOp{}, -INFINITY));
    const float rescale = expf(top - new_top);  // 0 for the first tile (top = -inf)
    const float probability = j < end ? expf(score - new_top) : 0.0f;
    weight[threadIdx.x] = probability;
    total = total * rescale + block_reduce(probability, SumOp{}, 0.0f);  // its barrier publishes `weight`
    top = new_top;
    acc0 *= rescale;
    acc1 *= rescale;
    const int64_t count = min(static_cast<int64_t>(kThreads), end - first);
    const int64_t d0 = threadIdx.x, d1 = threadIdx.x + kThreads;
    for (int64_t jj = 0; jj < count; ++jj) {
      const T* vr = vb + (first + jj) * p.ld_v[1];
      if (d0 < p.dim) acc0 = fmaf(weight[jj], to_float(vr[d0]), acc0);
      if (d1 < p.dim) acc1 = fmaf(weight[jj], to_float(vr[d1]), acc1);
    }
    __syncthreads();  // `weight` is rewritten by the next tile
  }
  float* out = p.partials + (row * p.splits + split) * partial_floats(p);
  if (threadIdx.x == 0) {
    out[0] = top;  // -inf for a chunk past the row's last visible key: it weighs 0
    out[1] = total;
  }
  if (threadIdx.x < p.dim) out[2 + threadIdx.x] = acc0;
  if (threadIdx.x + kThreads < p.dim) out[2 + threadIdx.x + kThreads] = acc1;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attention_combine_kernel(AttentionParams p) {
  const int64_t row = blockIdx.x;
  const int64_t h = row % p.heads, i = (row / p.heads) % p.q_len, b = row / (p.heads * p.q_len);
  const float* in = p.partials + row * p.splits * partial_floats(p);
  float top = -INFINITY;
  for (int64_t s = 0; s < p.splits; ++s) top = fmaxf(top, in[s * partial_floats(p)]);
  float total = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  const int64_t d0 = threadIdx.x, d1 = threadIdx.x + kThreads;
  for (int64_t s = 0; s < p.splits; ++s) {
    const float* part = in + s * partial_floats(p);
    const float w = part[0] == -INFINITY ? 0.0f : expf(part[0] - top);
    total = fmaf(part[1], w, total);
    if (d0 < p.dim) acc0 = fmaf(part[2 + d0], w, acc0);
    if (d1 < p.dim) acc1 = fmaf(part[2 + d1], w, acc1);
  }
  T* orow = static_cast<T*>(p.o) + b * p.ld_o[0] + i * p.ld_o[1] + h * p.ld_o[2];
  const float inverse = 1.0f / total;
  if (d0 < p.dim) orow[d0] = from_float<T>(acc0 * inverse);
  if (d1 < p.dim) orow[d1] = from_float<T>(acc1 * inverse);
}

template <typename T>
cudaError_t launch_type(const AttentionParams& p, cudaStream_t stream) {
  const dim3 chunks(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.splits));
  if (const cudaError_t e = launch_kernel(&attention_chunk_kernel<T>, chunks, dim3(kThreads), 0, stream, p); e != cudaSuccess)
    return e;
  return launch_kernel(&attention_combine_kernel<T>, dim3(static_cast<unsigned>(p.rows)), dim3(kThreads), 0, stream, p);
}

// Chunks a row: enough blocks for two waves of 16 blocks an SM, whole tiles, none empty at kv_len.
void plan_splits(const AttentionArgs& a, int64_t& splits, int64_t& chunk) {
  const int64_t rows = a.batch * a.q_len * a.heads, tiles = (a.kv_len + kThreads - 1) / kThreads;
  const int64_t wanted = (2 * 16 * std::max(a.sm_count, 1) + rows - 1) / rows;
  splits = std::clamp<int64_t>(wanted, 1, std::min<int64_t>(tiles, 65535));
  chunk = (tiles + splits - 1) / splits * kThreads;
  splits = (a.kv_len + chunk - 1) / chunk;
}

// The workspace: each (row, chunk)'s maximum, sum and head_dim accumulators.
size_t partials_bytes(int64_t rows, int64_t splits, int64_t dim) {
  return static_cast<size_t>(rows * splits * (dim + 2)) * sizeof(float);
}

}  // namespace

int64_t attention_max_dim() { return kMaxDim; }

size_t attention_workspace_bytes(const AttentionArgs& a) {
  int64_t splits = 0, chunk = 0;
  plan_splits(a, splits, chunk);
  return partials_bytes(a.batch * a.q_len * a.heads, splits, a.dim);
}

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  const int64_t vector = a.dtype == Dtype::f32 ? 4 : 8;
  if (a.batch < 1 || a.q_len < 1 || a.kv_len < 1 || a.heads < 1 || a.kv_heads < 1 || a.heads % a.kv_heads != 0 ||
      a.dim < 1 || a.dim > kMaxDim || a.dim % vector != 0 || a.batch * a.q_len * a.heads > 0x7fffffff)
    return cudaErrorInvalidValue;
  AttentionParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.o = a.o;
  p.batch = a.batch;
  p.q_len = a.q_len;
  p.kv_len = a.kv_len;
  p.heads = a.heads;
  p.group = a.heads / a.kv_heads;
  p.dim = a.dim;
  for (int i = 0; i < 3; ++i) {
    p.ld_q[i] = a.ld_q[i];
    p.ld_k[i] = a.ld_k[i];
    p.ld_v[i] = a.ld_v[i];
    p.ld_o[i] = a.ld_o[i];
  }
  p.scale = a.scale;
  p.causal = a.causal;
  p.rows = a.batch * a.q_len * a.heads;
  plan_splits(a, p.splits, p.chunk);
  if (a.workspace == nullptr || a.workspace_bytes < partials_bytes(p.rows, p.splits, p.dim)) return cudaErrorInvalidValue;
  p.partials = static_cast<float*>(a.workspace);
  switch (a.dtype) {
    case Dtype::f32: return launch_type<float>(p, stream);
    case Dtype::f16: return launch_type<__half>(p, stream);
    default: return launch_type<__nv_bfloat16>(p, stream);
  }
}

}  // namespace arbiter::cuda
