// SwiGLU on 16 lanes (swiglu_avx512_impl.hpp); bf16 outputs go to swiglu_avx512_bf16.cpp's
// one-instruction rounding where the CPU has AVX512-BF16.
#include "kernels.hpp"
#include "swiglu_avx512_impl.hpp"

namespace arbiter::cpu {

void swiglu_avx512(const arb_problem& p, const arb_operands& o) {
  static const bool native_bf16 = __builtin_cpu_supports("avx512bf16");
  switch (p.dtype) {
    case ARB_DTYPE_F32: return swiglu_rows<Lanes16<ARB_DTYPE_F32>>(p, o);
    case ARB_DTYPE_F16: return swiglu_rows<Lanes16<ARB_DTYPE_F16>>(p, o);
    case ARB_DTYPE_BF16: return native_bf16 ? swiglu_avx512_bf16(p, o) : swiglu_rows<Lanes16<ARB_DTYPE_BF16>>(p, o);
    default: return;
  }
}

}  // namespace arbiter::cpu
