// Softmax, one block per row, the row held in registers: x read once and y written once,
// in 16-byte accesses; f32 math, max subtracted first. exp is evaluated twice per element
// (for the sum, then for the output) rather than kept: the packed row already takes up to
// 32 registers a thread, and 64 more floats would spill. exp2f of a pre-scaled argument is
// one MUFU.EX2. Needs cols a multiple of 16 bytes
// and 16-byte aligned rows (supports() checks both).
#include "common.cuh"
#include "row_shape.cuh"

namespace arbiter::cuda {
namespace {

template <typename T, int kVectors>
__global__ void __launch_bounds__(kRowMaxThreads) softmax_kernel(RowArgs args) {
  using V = Vec16<T>;
  const int64_t row = blockIdx.x;
  const int vectors = static_cast<int>(args.cols / V::kElements);
  const T* x = static_cast<const T*>(args.x) + row * args.ld_x;
  T* y = static_cast<T*>(args.y) + row * args.ld_y;

  V v[kVectors];
  float max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = threadIdx.x + i * blockDim.x;  // a row has at most 8 x 512 vectors
    if (index >= vectors) continue;
    v[i].load(x, index);
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) max = fmaxf(max, v[i].get(e));
  }
  max = block_reduce(max, MaxOp{}, -INFINITY);
  // exp(v - max) = exp2((v - max) log2e). Subtracting first keeps the largest element at
  // exactly exp2(0) = 1 whatever max is (a rounded max * log2e would not, for |max| > 1e9).
  constexpr float kLog2e = 1.4426950408889634f;
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = threadIdx.x + i * blockDim.x;  // a row has at most 8 x 512 vectors
    if (index >= vectors) continue;
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) sum += exp2f((v[i].get(e) - max) * kLog2e);
  }
  sum = block_reduce(sum, SumOp{}, 0.0f);
  const float inverse = 1.0f / sum;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = threadIdx.x + i * blockDim.x;  // a row has at most 8 x 512 vectors
    if (index >= vectors) continue;
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) v[i].set(e, exp2f((v[i].get(e) - max) * kLog2e) * inverse);
    v[i].store(y, index);
  }
}

}  // namespace

cudaError_t launch_softmax(const RowArgs& args, cudaStream_t stream) {
  return launch_row_kernel(args, stream, [](auto type, auto vectors) {
    return &softmax_kernel<decltype(type), decltype(vectors)::value>;
  });
}

}  // namespace arbiter::cuda
