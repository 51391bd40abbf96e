// The GEMM epilogue every kernel of the plugin applies to an accumulated dot product:
// D[i,j] = act(alpha * acc + beta * C[i,j] + bias[j]), rounded once to the dtype.
#pragma once

#include "common.cuh"

namespace arbiter::cuda {

template <typename T>
__device__ __forceinline__ void store_output(const GemmArgs& g, int64_t i, int64_t j, float acc) {
  float v = g.alpha * acc;
  if (g.has_c) v += g.beta * to_float(static_cast<const T*>(g.c)[i * g.ldc + j]);
  if (g.has_bias) v += to_float(static_cast<const T*>(g.bias)[j]);
  static_cast<T*>(g.d)[i * g.ldd + j] = from_float<T>(activate(g.activation, v));
}

}  // namespace arbiter::cuda
