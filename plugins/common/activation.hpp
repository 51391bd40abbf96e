// The GEMM epilogue activations, in one place for every CPU plugin and the tests.
// Templated so the reference evaluates them in double and fast kernels in float.
#pragma once

#include <arbiter/types.h>

#include <cmath>

namespace arbiter::plugins {

template <typename T>
inline T activate(int32_t activation, T x) {
  switch (activation) {
    case ARB_ACT_RELU: return x > T(0) ? x : T(0);
    case ARB_ACT_GELU_TANH: {
      const T k = T(0.7978845608028654);  // sqrt(2 / pi)
      return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
    case ARB_ACT_GELU_ERF: return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
    case ARB_ACT_SILU: return x / (T(1) + std::exp(-x));
    default: return x;
  }
}

}  // namespace arbiter::plugins
