// AVX-512 helpers of the cpu plugin's 16-lane kernels (swiglu_avx512*.cpp,
// attention_avx512_bf16.cpp): e^x on 16 lanes (the Cephes polynomial of exp8 in simd_avx2.hpp,
// its argument clamped so that it underflows to 0 rather than to a mangled denormal).
//
// Internal linkage only (an unnamed namespace): the files that include it are built for
// different ISAs, and the linker must never swap one's copy for another's.
#pragma once

#include "exp_polynomial.hpp"

#include <immintrin.h>

namespace arbiter::cpu {
namespace {

// The maskz forms with every lane on: GCC 12 warns that the plain forms' pass-through
// operand "may be used uninitialized" (a false positive, an error under -Werror).
constexpr __mmask16 kAll = 0xffff;

__attribute__((always_inline)) inline __m512 exp16(__m512 x) {
  namespace k = exp_polynomial;
  x = _mm512_maskz_min_ps(kAll, x, _mm512_set1_ps(k::kClamp));
  x = _mm512_maskz_max_ps(kAll, x, _mm512_set1_ps(-k::kClamp));
  __m512 fx = _mm512_fmadd_ps(x, _mm512_set1_ps(k::kLog2e), _mm512_set1_ps(0.5f));
  fx = _mm512_maskz_roundscale_ps(kAll, fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(k::kLn2High), x);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(k::kLn2Low), x);
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 y = _mm512_set1_ps(k::kCoefficients[0]);
  for (int i = 1; i < 6; ++i) y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(k::kCoefficients[i]));
  y = _mm512_fmadd_ps(y, z, _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  const __m512i n = _mm512_maskz_cvttps_epi32(kAll, fx);
  const __m512i pow2n = _mm512_maskz_slli_epi32(kAll, _mm512_add_epi32(n, _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(pow2n));
}

}  // namespace
}  // namespace arbiter::cpu
