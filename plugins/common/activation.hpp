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
      // 0.5x(1 + tanh(z)) written as x * sigmoid(2z): no cancellation for negative x.
      const T z = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);  // sqrt(2/pi)(x + 0.044715x^3)
      return x / (T(1) + std::exp(T(-2) * z));
    }
    case ARB_ACT_GELU_ERF:  // 0.5x(1 + erf(x/sqrt2)) written with erfc, for the same reason
      return T(0.5) * x * std::erfc(-x * T(0.7071067811865476));
    case ARB_ACT_SILU: return x / (T(1) + std::exp(-x));
    default: return x;
  }
}

}  // namespace arbiter::plugins
