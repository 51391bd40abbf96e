// The Llama MLP block in one kernel launch, for decode sizes: y = x + down(silu(gate(n)) * up(n)),
// n = rmsnorm(x) * weight. A persistent grid (a few blocks an SM) strides over chunks of the
// intermediate dimension, one cache line of a down row wide (64 intermediates in f16/bf16, 32
// in f32). For each of its chunks a block
//   1. computes h = silu(gate(n)) * up(n) of the chunk for every token row, into shared memory:
//      a warp an intermediate, reading its gate and up rows once for every four token rows,
//      with n formed on the fly from x, the norm weight and the row's scale (each block
//      computes the rows' scales once, from x);
//   2. multiplies that h by the chunk's columns of down, a thread an output column, and adds
//      the partial sums into an f32 accumulator in the workspace (atomic adds);
// and the last block to finish (a ticket counter in the workspace) writes y = x + accumulator.
// The accumulator and the counter are zeroed by a memset on the stream before the launch.
//
// Against cuda.mlp_fused's three launches: no gaps between launches and no round trip of n and
// h through global memory, every weight element still read once; the price is the x rows read
// by every block, rows x hidden atomic adds per chunk, and a y whose f32 sums are added in the
// order the chunks finish (within the gate's tolerance, but not bit-reproducible run to run).
#include "common.cuh"
#include "launch.cuh"
#include "mlp_common.cuh"

#include <algorithm>

namespace arbiter::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunkBytes = 128;     // of a down row per chunk: one cache line an output column
constexpr int kMaxChunk = kChunkBytes / 2;  // intermediates per chunk, f16/bf16 (f32: half)
constexpr size_t kCounterBytes = 256;  // the ticket counter, ahead of the 256-byte aligned accumulator

template <typename T>
constexpr int kChunkOf = kChunkBytes / static_cast<int>(sizeof(T));

// The workspace: the ticket counter, then the accumulator [rows, hidden] in f32.
__device__ __forceinline__ unsigned* ticket_counter(const MlpArgs& a) { return static_cast<unsigned*>(a.workspace); }
__device__ __forceinline__ float* accumulator(const MlpArgs& a) {
  return reinterpret_cast<float*>(static_cast<char*>(a.workspace) + kCounterBytes);
}

// x and the norm weight, which n is formed from on the fly (mlp_common.cuh's normed_dots).
template <typename T>
__device__ __forceinline__ NormedRows<T> normed_rows(const MlpArgs& a) {
  return {static_cast<const T*>(a.x), a.ld_x, a.rows, static_cast<const T*>(a.weight), a.hidden};
}

// Step 1 for the chunk of `length` intermediates from j0: h[r][jj] for every row r.
template <typename T, bool kVector>
__device__ __forceinline__ void chunk_activations(const MlpArgs& a, const float* scale, int64_t j0, int length,
                                                  float (*h)[kMaxChunk]) {
  const NormedRows<T> in = normed_rows<T>(a);
  for (int jj = threadIdx.x / 32; jj < length; jj += kWarps) {
    const int64_t j = j0 + jj;
    const T* const w[2] = {static_cast<const T*>(a.gate) + j * a.ld_gate, static_cast<const T*>(a.up) + j * a.ld_up};
    scaled_pair_dots<T, kVector>(in, w, scale, [&](int64_t r, float g, float u) { h[r][jj] = g / (1.0f + expf(-g)) * u; });
  }
}

// Step 2: acc[r][c] += down[c][j0 .. j0 + length) . h[r] for every output column c (a thread
// each) and row r. kVector: down's rows in whole 16-byte vectors (and so the chunk, a multiple
// of one vector unless it is inter's tail, which the caller sends here only when whole).
template <typename T, bool kVector>
__device__ __forceinline__ void chunk_down(const MlpArgs& a, int64_t j0, int length, const float (*h)[kMaxChunk]) {
  float* acc = accumulator(a);
  for (int64_t c = threadIdx.x; c < a.hidden; c += kThreads) {
    const T* d = static_cast<const T*>(a.down) + c * a.ld_down + j0;
    for (int64_t r0 = 0; r0 < a.rows; r0 += kRowGroup) {
      float sum[kRowGroup] = {};
      const int64_t rn = r0 + kRowGroup <= a.rows ? kRowGroup : a.rows - r0;
      if constexpr (kVector) {
        using V = Vec16<T>;
        constexpr int kE = V::kElements;
        for (int v = 0; v < length / kE; ++v) {
          V dv;
          dv.load(d, v);
#pragma unroll
          for (int e = 0; e < kE; ++e) {
            const float de = dv.get(e);
#pragma unroll
            for (int r = 0; r < kRowGroup; ++r)
              if (r < rn) sum[r] += de * h[r0 + r][v * kE + e];
          }
        }
      } else {
        for (int jj = 0; jj < length; ++jj) {
          const float de = to_float(__ldg(d + jj));
#pragma unroll
          for (int r = 0; r < kRowGroup; ++r)
            if (r < rn) sum[r] += de * h[r0 + r][jj];
        }
      }
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r)
        if (r < rn) atomicAdd(acc + (r0 + r) * a.hidden + c, sum[r]);
    }
  }
}

// Two blocks an SM: the element path needs about 120 registers, and ptxas, left to itself,
// held it to 80 and spilled.
template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads, 2) mlp_persistent(MlpArgs a) {
  __shared__ float scale[kMlpMaxRows];
  __shared__ float h[kMlpMaxRows][kMaxChunk];
  __shared__ bool last;

  // The rows' RMS scales, a warp a row.
  row_scales<T, kWarps>(normed_rows<T>(a), a.eps, scale);
  __syncthreads();

  constexpr int kChunk = kChunkOf<T>;
  const int64_t chunks = (a.inter + kChunk - 1) / kChunk;
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const int64_t j0 = chunk * kChunk;
    const int length = static_cast<int>(a.inter - j0 < kChunk ? a.inter - j0 : kChunk);
    chunk_activations<T, kVector>(a, scale, j0, length, h);
    __syncthreads();
    if (kVector && length % Vec16<T>::kElements == 0)
      chunk_down<T, kVector>(a, j0, length, h);
    else
      chunk_down<T, false>(a, j0, length, h);
    __syncthreads();  // h is rewritten by the next chunk
  }

  // Every block's adds reach the accumulator before its ticket is taken; the block that takes
  // the last ticket sees them all.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(ticket_counter(a), 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* acc = accumulator(a);
  for (int64_t i = threadIdx.x; i < a.rows * a.hidden; i += kThreads) {
    const int64_t r = i / a.hidden, c = i % a.hidden;
    static_cast<T*>(a.y)[r * a.ld_y + c] =
        from_float<T>(to_float(static_cast<const T*>(a.x)[r * a.ld_x + c]) + __ldcg(acc + i));
  }
}

template <typename T>
cudaError_t launch_typed(const MlpArgs& a, cudaStream_t stream) {
  constexpr int kChunk = kChunkOf<T>;
  const int64_t chunks = (a.inter + kChunk - 1) / kChunk;
  const int64_t resident = std::max<int64_t>(1, static_cast<int64_t>(a.sm_count) * 2);  // __launch_bounds__'s two
  const dim3 grid(static_cast<unsigned>(std::min({chunks, resident, kMaxGridBlocks})));
  const bool vectors = vector_rows<T>(a.x, a.ld_x, a.hidden) && vector_rows<T>(a.weight, 0, a.hidden) &&
                       vector_rows<T>(a.gate, a.ld_gate, a.hidden) && vector_rows<T>(a.up, a.ld_up, a.hidden) &&
                       vector_rows<T>(a.down, a.ld_down, a.inter);
  cudaError_t s = cudaMemsetAsync(a.workspace, 0, mlp_persistent_workspace_bytes(a), stream);
  if (s != cudaSuccess) return s;
  return vectors ? launch_kernel(&mlp_persistent<T, true>, grid, dim3(kThreads), 0, stream, a)
                 : launch_kernel(&mlp_persistent<T, false>, grid, dim3(kThreads), 0, stream, a);
}

}  // namespace

size_t mlp_persistent_workspace_bytes(const MlpArgs& a) {
  return kCounterBytes + static_cast<size_t>(a.rows) * static_cast<size_t>(a.hidden) * sizeof(float);
}

cudaError_t launch_mlp_persistent(const MlpArgs& a, cudaStream_t stream) {
  if (a.rows < 1 || a.rows > kMlpMaxRows || a.hidden < 1 || a.inter < 1 || a.workspace == nullptr)
    return cudaErrorInvalidValue;
  switch (a.dtype) {
    case Dtype::f32: return launch_typed<float>(a, stream);
    case Dtype::f16: return launch_typed<__half>(a, stream);
    default: return launch_typed<__nv_bfloat16>(a, stream);
  }
}

}  // namespace arbiter::cuda
