// Softmax over rows too wide for one block (the 128256-token vocabulary of sampling), for
// sm_90a: a thread-block cluster of 8 blocks per row, each holding an eighth of the row in
// registers as packed 16-byte vectors, so the row is still read once and written once. The
// blocks exchange their partial max, then their partial sums, through distributed shared
// memory (each reads the other seven's values in rank order: every block gets the same,
// deterministic total). Needs cols a multiple of 16 bytes and 16-byte aligned rows.
#include "common.cuh"
#include "launch.cuh"
#include "row_shape.cuh"
#include "sm90_ptx.cuh"

#include <cooperative_groups.h>

namespace arbiter::cuda {
namespace {

constexpr int kClusterBlocks = 8;  // the portable cluster size

// The cluster shape is part of the kernel for sm_90 (and the host's view of it); device
// code for older architectures, which have no clusters, is built without it.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define ARBITER_CLUSTER_OF_8 __cluster_dims__(kClusterBlocks, 1, 1)
#else
#define ARBITER_CLUSTER_OF_8
#endif

template <typename T, int kVectors>
__global__ void ARBITER_CLUSTER_OF_8 __launch_bounds__(kRowMaxThreads) softmax_cluster_kernel(RowArgs args) {
#if defined(ARBITER_SM90)
  namespace cg = cooperative_groups;
  using V = Vec16<T>;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int64_t row = blockIdx.x / kClusterBlocks;
  const int vectors = static_cast<int>(args.cols / V::kElements);
  const int per_block = (vectors + kClusterBlocks - 1) / kClusterBlocks;
  const int begin = static_cast<int>(rank) * per_block;
  const int end = begin + per_block < vectors ? begin + per_block : vectors;
  const T* x = static_cast<const T*>(args.x) + row * args.ld_x;
  T* y = static_cast<T*>(args.y) + row * args.ld_y;
  __shared__ float exchange[2];  // this block's partial max, then its partial sum

  V v[kVectors];
  float max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = begin + threadIdx.x + i * blockDim.x;
    if (index >= end) continue;
    v[i].load(x, index);
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) max = fmaxf(max, v[i].get(e));
  }
  max = block_reduce(max, MaxOp{}, -INFINITY);
  if (threadIdx.x == 0) exchange[0] = max;
  cluster.sync();  // every block's partial max is visible cluster-wide
  max = -INFINITY;
  for (unsigned r = 0; r < kClusterBlocks; ++r) max = fmaxf(max, *cluster.map_shared_rank(&exchange[0], r));

  constexpr float kLog2e = 1.4426950408889634f;
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = begin + threadIdx.x + i * blockDim.x;
    if (index >= end) continue;
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) sum += exp2f((v[i].get(e) - max) * kLog2e);
  }
  sum = block_reduce(sum, SumOp{}, 0.0f);
  if (threadIdx.x == 0) exchange[1] = sum;
  cluster.sync();
  sum = 0.0f;
  for (unsigned r = 0; r < kClusterBlocks; ++r) sum += *cluster.map_shared_rank(&exchange[1], r);
  const float inverse = 1.0f / sum;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int index = begin + threadIdx.x + i * blockDim.x;
    if (index >= end) continue;
#pragma unroll
    for (int e = 0; e < V::kElements; ++e) v[i].set(e, exp2f((v[i].get(e) - max) * kLog2e) * inverse);
    v[i].store(y, index);
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#else
  __trap();  // clusters need sm_90; supports() never sends another GPU here
#endif
}

}  // namespace

#undef ARBITER_CLUSTER_OF_8

int64_t cluster_row_max_cols(Dtype dtype) { return kClusterBlocks * row_kernel_max_cols(dtype); }

bool softmax_cluster_fits() {
  // The widest variant (8 vectors a thread, 512 threads): can one cluster of 8 be resident?
  // Not always, under MPS or on a MIG slice with few SMs.
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kClusterBlocks);
  config.blockDim = dim3(kRowMaxThreads);
  int clusters = 0;
  return cudaOccupancyMaxActiveClusters(&clusters, softmax_cluster_kernel<__nv_bfloat16, kRowMaxVectors>, &config) ==
             cudaSuccess &&
         clusters > 0;
}

cudaError_t launch_softmax_cluster(const RowArgs& args, cudaStream_t stream) {
  if (args.rows < 1 || args.rows > 0x7fffffff / kClusterBlocks) return cudaErrorInvalidValue;
  // Each block lays out an eighth of the row as the one-block kernels lay out a whole row.
  RowArgs eighth = args;
  eighth.cols = (args.cols / elements_per_vector(args.dtype) + kClusterBlocks - 1) / kClusterBlocks *
                elements_per_vector(args.dtype);
  const RowShape shape = row_shape(eighth);
  if (shape.vectors_per_thread == 0) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(args.rows * kClusterBlocks)), block(static_cast<unsigned>(shape.threads));
  auto by_vectors = [&](auto type) {
    using T = decltype(type);
    switch (shape.vectors_per_thread) {
      case 1: return launch_kernel(softmax_cluster_kernel<T, 1>, grid, block, 0, stream, args);
      case 2: return launch_kernel(softmax_cluster_kernel<T, 2>, grid, block, 0, stream, args);
      case 4: return launch_kernel(softmax_cluster_kernel<T, 4>, grid, block, 0, stream, args);
      default: return launch_kernel(softmax_cluster_kernel<T, 8>, grid, block, 0, stream, args);
    }
  };
  switch (args.dtype) {
    case Dtype::f32: return by_vectors(float{});
    case Dtype::f16: return by_vectors(__half{});
    default: return by_vectors(__nv_bfloat16{});
  }
}

}  // namespace arbiter::cuda
