// The Llama MLP block fused for decode sizes: y = x + down(silu(gate(n)) * up(n)),
// n = rmsnorm(x) * weight. Three kernels on the caller's stream, no intermediate rounded to the
// dtype (n and h = silu(gate(n)) * up(n) stay f32 in the workspace):
//   1. norm: one block a token row;
//   2. projections: one warp an intermediate j, reading gate row j and up row j once for every
//      token row (the rows' n come from the workspace, through L1 and L2) and writing h[r][j];
//   3. down: one warp an output column c, reading down row c once: y[r][c] = x[r][c] + down_c . h_r.
// At decode the weights are nearly all of the block's traffic, and each weight row is read by
// one warp in coalesced passes (lane i takes 16-byte vectors i, i + 32, ..., or elements
// where the rows are not whole vectors). The token rows go four at a time through each weight
// row (their sums in registers); more rows read the row again from L2. The warp sums are
// shuffles in a fixed order: the result is deterministic.
#include "common.cuh"
#include "launch.cuh"
#include "mlp_common.cuh"

#include <algorithm>

namespace arbiter::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T>
__global__ void __launch_bounds__(kThreads) mlp_norm(MlpArgs a) {
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(a.x) + row * a.ld_x;
  const T* weight = static_cast<const T*>(a.weight);
  float* n = static_cast<float*>(a.workspace) + row * a.hidden;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < a.hidden; c += kThreads) {
    const float v = to_float(x[c]);
    sum += v * v;
  }
  const float scale = rsqrtf(block_reduce(sum, SumOp{}, 0.0f) / static_cast<float>(a.hidden) + a.eps);
  for (int64_t c = threadIdx.x; c < a.hidden; c += kThreads) n[c] = to_float(x[c]) * scale * to_float(weight[c]);
}

// out[i][r] += w_i . act[r] over k, for kRowGroup rows from r0 (rows past the last repeat it:
// computed, never written) and W weight rows; each lane's share, summed by the caller.
// kVector: the weight rows and k in whole 16-byte vectors (8 bf16 or f16, 4 f32), each lane
// taking vectors lane, lane + 32, ...; else one element at a time, lane-strided.
template <typename T, int W, bool kVector>
__device__ __forceinline__ void dots(const T* const (&w)[W], const float* act, int64_t ld_act, int64_t r0, int64_t rows,
                                     int64_t k, float (&out)[W][kRowGroup]) {
  const float* row[kRowGroup];
#pragma unroll
  for (int r = 0; r < kRowGroup; ++r) row[r] = act + (r0 + r < rows ? r0 + r : rows - 1) * ld_act;
  const int lane = threadIdx.x % 32;
  if constexpr (kVector) {
    using V = Vec16<T>;
    constexpr int kE = V::kElements;
    for (int64_t v = lane; v < k / kE; v += 32) {
      V wv[W];
#pragma unroll
      for (int i = 0; i < W; ++i) wv[i].load(w[i], static_cast<int>(v));
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        float a[kE];  // the activations, 16-byte aligned: k a multiple of 4 floats, the workspace aligned
#pragma unroll
        for (int q = 0; q < kE / 4; ++q) {
          const float4 f = reinterpret_cast<const float4*>(row[r] + v * kE)[q];
          a[4 * q] = f.x;
          a[4 * q + 1] = f.y;
          a[4 * q + 2] = f.z;
          a[4 * q + 3] = f.w;
        }
#pragma unroll
        for (int i = 0; i < W; ++i)
#pragma unroll
          for (int e = 0; e < kE; ++e) out[i][r] += wv[i].get(e) * a[e];
      }
    }
  } else {
    for (int64_t c = lane; c < k; c += 32) {
      float wv[W];
#pragma unroll
      for (int i = 0; i < W; ++i) wv[i] = to_float(__ldg(w[i] + c));
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        const float v = row[r][c];
#pragma unroll
        for (int i = 0; i < W; ++i) out[i][r] += wv[i] * v;
      }
    }
  }
}

template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads) mlp_projections(MlpArgs a) {
  const float* n = static_cast<const float*>(a.workspace);
  float* h = const_cast<float*>(n) + a.rows * a.hidden;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; j < a.inter; j += warps) {
    const T* const w[2] = {static_cast<const T*>(a.gate) + j * a.ld_gate, static_cast<const T*>(a.up) + j * a.ld_up};
    for (int64_t r0 = 0; r0 < a.rows; r0 += kRowGroup) {
      float s[2][kRowGroup] = {};
      dots<T, 2, kVector>(w, n, a.hidden, r0, a.rows, a.hidden, s);
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        const float g = warp_sum(s[0][r]), u = warp_sum(s[1][r]);
        if (threadIdx.x % 32 == 0 && r0 + r < a.rows) h[(r0 + r) * a.inter + j] = g / (1.0f + expf(-g)) * u;
      }
    }
  }
}

template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads) mlp_down(MlpArgs a) {
  const float* h = static_cast<const float*>(a.workspace) + a.rows * a.hidden;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; c < a.hidden; c += warps) {
    const T* const w[1] = {static_cast<const T*>(a.down) + c * a.ld_down};
    for (int64_t r0 = 0; r0 < a.rows; r0 += kRowGroup) {
      float s[1][kRowGroup] = {};
      dots<T, 1, kVector>(w, h, a.inter, r0, a.rows, a.inter, s);
#pragma unroll
      for (int r = 0; r < kRowGroup; ++r) {
        const float sum = warp_sum(s[0][r]);
        if (threadIdx.x % 32 == 0 && r0 + r < a.rows) {
          const int64_t row = r0 + r;
          static_cast<T*>(a.y)[row * a.ld_y + c] =
              from_float<T>(to_float(static_cast<const T*>(a.x)[row * a.ld_x + c]) + sum);
        }
      }
    }
  }
}

template <typename T, bool kVector>
cudaError_t launch_steps(const MlpArgs& a, cudaStream_t stream) {
  // Enough warps to keep every SM's memory pipes busy: a few blocks an SM.
  const int64_t resident = std::max<int64_t>(1, static_cast<int64_t>(a.sm_count) * 8);
  const auto grid_of = [&](int64_t weight_rows) {
    return dim3(static_cast<unsigned>(std::min({(weight_rows + kWarps - 1) / kWarps, resident, kMaxGridBlocks})));
  };
  cudaError_t s = launch_kernel(&mlp_norm<T>, dim3(static_cast<unsigned>(a.rows)), dim3(kThreads), 0, stream, a);
  if (s == cudaSuccess) s = launch_kernel(&mlp_projections<T, kVector>, grid_of(a.inter), dim3(kThreads), 0, stream, a);
  if (s == cudaSuccess) s = launch_kernel(&mlp_down<T, kVector>, grid_of(a.hidden), dim3(kThreads), 0, stream, a);
  return s;
}

template <typename T>
cudaError_t launch_typed(const MlpArgs& a, cudaStream_t stream) {
  // The workspace (n, then h) is 256-byte aligned; h starts 16-byte aligned when hidden is a
  // multiple of 4 floats, which a vector of T's elements implies.
  const bool vectors = vector_rows<T>(a.gate, a.ld_gate, a.hidden) && vector_rows<T>(a.up, a.ld_up, a.hidden) &&
                       vector_rows<T>(a.down, a.ld_down, a.inter) && reinterpret_cast<uintptr_t>(a.workspace) % 16 == 0;
  return vectors ? launch_steps<T, true>(a, stream) : launch_steps<T, false>(a, stream);
}

}  // namespace

int64_t mlp_max_rows() { return kMlpMaxRows; }

size_t mlp_workspace_bytes(const MlpArgs& a) {
  return static_cast<size_t>(a.rows) * static_cast<size_t>(a.hidden + a.inter) * sizeof(float);
}

cudaError_t launch_mlp(const MlpArgs& a, cudaStream_t stream) {
  if (a.rows < 1 || a.rows > kMlpMaxRows || a.hidden < 1 || a.inter < 1 || a.workspace == nullptr) return cudaErrorInvalidValue;
  switch (a.dtype) {
    case Dtype::f32: return launch_typed<float>(a, stream);
    case Dtype::f16: return launch_typed<__half>(a, stream);
    default: return launch_typed<__nv_bfloat16>(a, stream);
  }
}

}  // namespace arbiter::cuda
