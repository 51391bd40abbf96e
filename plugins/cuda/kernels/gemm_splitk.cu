// Decode GEMM: D[m,n] = epilogue(A[m,k] . B[n,k]^T) for m <= 16, the shape of a decode step
// (a few tokens through a weight matrix stored [out, in]). Bound by reading B once: each
// warp streams two rows of B in 16-byte loads (lanes along k) and keeps the dot products
// of all m rows of A with them in registers. When n alone gives too few blocks to keep
// HBM busy, k is split into slices: each slice's partial sums go to the workspace
// ([slice][m][n], f32) and a second kernel adds them in slice order (deterministic) and
// applies the epilogue. Needs k a multiple of 16 bytes and 16-byte aligned rows.
#include "gemm_epilogue.cuh"
#include "launch.cuh"

#include <algorithm>

namespace arbiter::cuda {
namespace {

constexpr int kWarps = 8;           // per block
constexpr int kColumnsPerWarp = 2;  // rows of B per warp
constexpr int kColumnsPerBlock = kWarps * kColumnsPerWarp;

struct SplitPlan {
  int slices = 1;
  int64_t slice_k = 0;  // elements of k per slice, a multiple of one warp's step
};

SplitPlan plan(const GemmArgs& g) {
  const int64_t step = 32 * (16 / (g.dtype == Dtype::f32 ? 4 : 2));  // k elements per warp load
  const int64_t column_blocks = (g.n + kColumnsPerBlock - 1) / kColumnsPerBlock;
  const int64_t wanted_blocks = 4 * std::max(g.sm_count, 1);  // enough loads in flight per SM
  int64_t slices = std::clamp<int64_t>((wanted_blocks + column_blocks - 1) / column_blocks, 1, 64);
  slices = std::min<int64_t>(slices, std::max<int64_t>(1, g.k / (4 * step)));  // each slice >= 4 steps
  SplitPlan p;
  p.slice_k = ((g.k + slices - 1) / slices + step - 1) / step * step;
  p.slices = static_cast<int>((g.k + p.slice_k - 1) / p.slice_k);
  return p;
}

template <typename T, int kRows>
__global__ void __launch_bounds__(kWarps * 32) splitk_kernel(GemmArgs g, int64_t slice_k) {
  using V = Vec16<T>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kColumnsPerBlock + warp * kColumnsPerWarp;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.y) * slice_k;
  const int64_t k_end = k_begin + slice_k < g.k ? k_begin + slice_k : g.k;
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);

  float acc[kRows][kColumnsPerWarp] = {};
  // Lane l covers elements [q, q + kElements) of every step; k % kElements == 0.
  for (int64_t q = k_begin + static_cast<int64_t>(lane) * V::kElements; q < k_end; q += 32 * V::kElements) {
    V w[kColumnsPerWarp];
#pragma unroll
    for (int c = 0; c < kColumnsPerWarp; ++c)
      if (j0 + c < g.n) w[c].load(b + (j0 + c) * g.ldb + q, 0);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= g.m) break;
      V x;
      x.load(a + r * g.lda + q, 0);
#pragma unroll
      for (int c = 0; c < kColumnsPerWarp; ++c) {
        if (j0 + c >= g.n) continue;
#pragma unroll
        for (int e = 0; e < V::kElements; ++e) acc[r][c] = fmaf(x.get(e), w[c].get(e), acc[r][c]);
      }
    }
  }
  // Every lane ends with the warp's sums (xor butterfly: the same order in every lane).
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kColumnsPerWarp; ++c)
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], offset);

  // Lane (r * kColumnsPerWarp + c) % 32 writes output (r, c): the writes spread over lanes.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kColumnsPerWarp; ++c) {
      const int64_t j = j0 + c;
      if (r >= g.m || j >= g.n || lane != (r * kColumnsPerWarp + c) % 32) continue;
      if (gridDim.y == 1) {
        store_output<T>(g, r, j, acc[r][c]);
      } else {
        float* partial = static_cast<float*>(g.workspace) + (static_cast<int64_t>(blockIdx.y) * g.m + r) * g.n + j;
        *partial = acc[r][c];
      }
    }
  }
}

// Adds the slices' partial sums in slice order and applies the epilogue.
template <typename T>
__global__ void splitk_reduce_kernel(GemmArgs g, int slices) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= g.m * g.n) return;
  const float* partial = static_cast<const float*>(g.workspace);
  float sum = 0.0f;
  for (int s = 0; s < slices; ++s) sum += partial[s * g.m * g.n + index];
  store_output<T>(g, index / g.n, index % g.n, sum);
}

template <typename T>
cudaError_t launch_typed(const GemmArgs& g, cudaStream_t stream) {
  const SplitPlan p = plan(g);
  const dim3 grid(static_cast<unsigned>((g.n + kColumnsPerBlock - 1) / kColumnsPerBlock), static_cast<unsigned>(p.slices));
  const dim3 block(kWarps * 32);
  auto rows = [&](auto kernel) { return launch_kernel(kernel, grid, block, 0, stream, g, p.slice_k); };
  const cudaError_t status = g.m <= 1   ? rows(splitk_kernel<T, 1>)
                             : g.m <= 2 ? rows(splitk_kernel<T, 2>)
                             : g.m <= 4 ? rows(splitk_kernel<T, 4>)
                             : g.m <= 8 ? rows(splitk_kernel<T, 8>)
                                        : rows(splitk_kernel<T, 16>);
  if (status != cudaSuccess || p.slices == 1) return status;
  const int64_t outputs = g.m * g.n;
  return launch_kernel(splitk_reduce_kernel<T>, static_cast<unsigned>((outputs + 255) / 256), 256, 0, stream, g, p.slices);
}

}  // namespace

size_t splitk_workspace_bytes(const GemmArgs& g) {
  const SplitPlan p = plan(g);
  return p.slices > 1 ? static_cast<size_t>(p.slices) * static_cast<size_t>(g.m * g.n) * sizeof(float) : 0;
}

cudaError_t launch_gemm_splitk(const GemmArgs& g, cudaStream_t stream) {
  if (g.m < 1 || g.m > 16 || g.n < 1 || g.k < 1) return cudaErrorInvalidValue;
  if (splitk_workspace_bytes(g) > g.workspace_bytes) return cudaErrorInvalidValue;
  switch (g.dtype) {
    case Dtype::f32: return launch_typed<float>(g, stream);
    case Dtype::f16: return launch_typed<__half>(g, stream);
    default: return launch_typed<__nv_bfloat16>(g, stream);
  }
}

}  // namespace arbiter::cuda
