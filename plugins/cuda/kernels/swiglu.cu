// SwiGLU, y = silu(gate) * up: elementwise and bound by memory, so each thread moves whole
// 16-byte vectors (two loads through the read-only path, one store) and the grid strides
// over rows x vectors. silu in the sigmoid form g / (1 + e^-g): e^-g overflowing to inf for
// gates below -88 gives -0, the limit. Needs cols a multiple of 16 bytes and 16-byte aligned
// rows (supports() checks both).
#include "common.cuh"
#include "launch.cuh"

#include <algorithm>

namespace arbiter::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;  // the grid strides past it

template <typename T>
__global__ void __launch_bounds__(kThreads) swiglu_kernel(SwigluArgs args) {
  using V = Vec16<T>;
  const int64_t per_row = args.cols / V::kElements;
  const int64_t total = args.rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / per_row;
    const int index = static_cast<int>(i - row * per_row);
    V gate, up, y;
    gate.load(static_cast<const T*>(args.gate) + row * args.ld_gate, index);
    up.load(static_cast<const T*>(args.up) + row * args.ld_up, index);
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) {
      const float g = gate.get(e);
      y.set(e, g / (1.0f + expf(-g)) * up.get(e));
    }
    y.store(static_cast<T*>(args.y) + row * args.ld_y, index);
  }
}

}  // namespace

cudaError_t launch_swiglu(const SwigluArgs& args, cudaStream_t stream) {
  const int64_t per_vector = args.dtype == Dtype::f32 ? 4 : 8;
  const int64_t total = args.rows * (args.cols / per_vector);
  if (args.rows < 1 || args.cols < per_vector || total < 1) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks))), block(kThreads);
  switch (args.dtype) {
    case Dtype::f32: return launch_kernel(&swiglu_kernel<float>, grid, block, 0, stream, args);
    case Dtype::f16: return launch_kernel(&swiglu_kernel<__half>, grid, block, 0, stream, args);
    default: return launch_kernel(&swiglu_kernel<__nv_bfloat16>, grid, block, 0, stream, args);
  }
}

}  // namespace arbiter::cuda
