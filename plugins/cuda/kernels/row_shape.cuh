// How the row kernels (rmsnorm.cu, softmax.cu) lay a row over one block: each thread keeps
// kVectors 16-byte vectors of the row in registers, so the row is read from HBM once and
// written once. The smallest kVectors in {1, 2, 4, 8} that fits the row in 512 threads
// is used, and as many threads (a multiple of 32) as the row needs.
#pragma once

#include "kernel_args.hpp"
#include "launch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace arbiter::cuda {

constexpr int kRowMaxThreads = 512;  // launch bounds of 512 leave 128 registers a thread: no spills
constexpr int kRowMaxVectors = 8;

struct RowShape {
  int vectors_per_thread = 0;  // 0: the row does not fit
  int threads = 0;
};

inline int64_t elements_per_vector(Dtype dtype) { return dtype == Dtype::f32 ? 4 : 8; }

inline RowShape row_shape(const RowArgs& args) {
  const int64_t vectors = args.cols / elements_per_vector(args.dtype);
  for (int per_thread = 1; per_thread <= kRowMaxVectors; per_thread *= 2) {
    const int64_t threads = (vectors + per_thread - 1) / per_thread;
    if (threads <= kRowMaxThreads) return {per_thread, static_cast<int>(std::max<int64_t>(32, (threads + 31) / 32 * 32))};
  }
  return {};
}

// Launches one block per row of the kernel `pick(T{}, std::integral_constant<int, V>{})`
// returns for the dtype T and V vectors per thread. grid.x holds up to 2^31 - 1 rows.
template <typename Pick>
cudaError_t launch_row_kernel(const RowArgs& args, cudaStream_t stream, Pick pick) {
  const RowShape shape = row_shape(args);
  if (shape.vectors_per_thread == 0 || args.rows < 1 || args.rows > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(args.rows)), block(static_cast<unsigned>(shape.threads));
  auto by_vectors = [&](auto type) {
    auto go = [&](auto* kernel) { return launch_kernel(kernel, grid, block, 0, stream, args); };
    switch (shape.vectors_per_thread) {
      case 1: return go(pick(type, std::integral_constant<int, 1>{}));
      case 2: return go(pick(type, std::integral_constant<int, 2>{}));
      case 4: return go(pick(type, std::integral_constant<int, 4>{}));
      default: return go(pick(type, std::integral_constant<int, 8>{}));
    }
  };
  switch (args.dtype) {
    case Dtype::f32: return by_vectors(float{});
    case Dtype::f16: return by_vectors(__half{});
    default: return by_vectors(__nv_bfloat16{});
  }
}

}  // namespace arbiter::cuda
