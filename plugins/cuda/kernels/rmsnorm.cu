// RMSNorm, one block per row, the row held in registers: x (and the residual) read once,
// y (and x, with a residual) written once, all in 16-byte accesses. The sum of squares is
// taken over x as stored (after the residual add is rounded to the dtype), as the
// reference does. Needs cols a multiple of 16 bytes and 16-byte aligned rows
// (supports() checks both).
#include "common.cuh"
#include "row_shape.cuh"

namespace arbiter::cuda {
namespace {

template <typename T, int kVectors>
__global__ void __launch_bounds__(kRowMaxThreads) rmsnorm_kernel(RowArgs args) {
  using V = Vec16<T>;
  const int64_t row = blockIdx.x;
  const int vectors = static_cast<int>(args.cols / V::kElements);
  T* x = static_cast<T*>(args.x) + row * args.ld_x;
  const T* residual = static_cast<const T*>(args.residual) + row * args.ld_residual;
  const T* weight = static_cast<const T*>(args.weight);
  T* y = static_cast<T*>(args.y) + row * args.ld_y;

  V v[kVectors];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = threadIdx.x + i * blockDim.x;  // a row has at most 8 x 512 vectors
    if (index >= vectors) continue;
    v[i].load_coherent(x, index);  // x is written back below when there is a residual
    if (args.has_residual) {
      V r;
      r.load(residual, index);
#pragma unroll
      for (int e = 0; e < V::kElements; ++e) v[i].set(e, v[i].get(e) + r.get(e));  // rounded to T
      v[i].store(x, index);
    }
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) sum_sq += v[i].get(e) * v[i].get(e);
  }
  sum_sq = block_reduce(sum_sq, SumOp{}, 0.0f);
  const float scale = 1.0f / sqrtf(sum_sq / static_cast<float>(args.cols) + args.eps);
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = threadIdx.x + i * blockDim.x;  // a row has at most 8 x 512 vectors
    if (index >= vectors) continue;
    V w;
    w.load(weight, index);
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) v[i].set(e, v[i].get(e) * scale * w.get(e));
    v[i].store(y, index);
  }
}

}  // namespace

int64_t row_kernel_max_cols(Dtype dtype) { return kRowMaxThreads * kRowMaxVectors * elements_per_vector(dtype); }

cudaError_t launch_rmsnorm(const RowArgs& args, cudaStream_t stream) {
  return launch_row_kernel(args, stream, [](auto type, auto vectors) {
    return &rmsnorm_kernel<decltype(type), decltype(vectors)::value>;
  });
}

}  // namespace arbiter::cuda
