// arbiter_kernel.h: the prelude every generated kernel may include (arbiter hands it to
// NVRTC; nothing else is on the include path). It defines, for the dtype the kernel is
// being compiled for (-DARB_DTYPE_F32, _F16 or _BF16):
//   arb_t                  the storage type of every operand (float, or a 16-bit pattern)
//   arb_load(p, i)         element i as float
//   arb_store(p, i, v)     v rounded to nearest even into element i
//   arb_activate(act, v)   the GEMM epilogue activation (ARB_ACT_* codes of types.h)
// and the integer types of the signatures: arb_index (64-bit), arb_flag (32-bit).
#pragma once

typedef long long arb_index;
typedef int arb_flag;

#define ARB_ACT_NONE 0
#define ARB_ACT_RELU 1
#define ARB_ACT_GELU_TANH 2
#define ARB_ACT_GELU_ERF 3
#define ARB_ACT_SILU 4

#if defined(ARB_DTYPE_F32)
typedef float arb_t;
__device__ __forceinline__ float arb_to_float(arb_t v) { return v; }
__device__ __forceinline__ arb_t arb_from_float(float v) { return v; }
#elif defined(ARB_DTYPE_F16)
typedef unsigned short arb_t;
__device__ __forceinline__ float arb_to_float(arb_t v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
  return f;
}
__device__ __forceinline__ arb_t arb_from_float(float v) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
#elif defined(ARB_DTYPE_BF16)
typedef unsigned short arb_t;
__device__ __forceinline__ float arb_to_float(arb_t v) { return __uint_as_float(static_cast<unsigned>(v) << 16); }
__device__ __forceinline__ arb_t arb_from_float(float v) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
#else
#error "compile with -DARB_DTYPE_F32, -DARB_DTYPE_F16 or -DARB_DTYPE_BF16"
#endif

__device__ __forceinline__ float arb_load(const arb_t* p, arb_index i) { return arb_to_float(p[i]); }
__device__ __forceinline__ void arb_store(arb_t* p, arb_index i, float v) { p[i] = arb_from_float(v); }

// The same forms as arbiter's CPU kernels: no cancellation for negative inputs.
__device__ __forceinline__ float arb_activate(int act, float x) {
  switch (act) {
    case ARB_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ARB_ACT_GELU_TANH: return x / (1.0f + expf(-1.5957691216057308f * (x + 0.044715f * x * x * x)));
    case ARB_ACT_GELU_ERF: return 0.5f * x * erfcf(-x * 0.7071067811865476f);
    case ARB_ACT_SILU: return x / (1.0f + expf(-x));
    default: return x;
  }
}
