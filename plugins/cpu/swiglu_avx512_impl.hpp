// The 16-lane SwiGLU of the cpu plugin (AVX-512F, VL, BW), shared by swiglu_avx512.cpp and
// swiglu_avx512_bf16.cpp, which adds AVX512-BF16's rounding store: y = silu(gate) * up with
// silu(g) = g * r, r = 1 / (1 + e^-g) from vrcp14ps and one Newton step (relative error below
// 2^-27, where vdivps would cost a zmm division per 16 elements). e^-g is the Cephes
// polynomial of exp8 (simd_avx2.hpp) on 16 lanes, its argument clamped so that gates below -88
// give -0. Row tails run masked.
//
// Internal linkage only (an unnamed namespace): the two files are built for different ISAs,
// and the linker must never swap one's copy for the other's.
#pragma once

#include "simd_avx512.hpp"

#include <arbiter/plugin.h>

#include <immintrin.h>

#include <cstdint>

namespace arbiter::cpu {
namespace {

__attribute__((always_inline)) inline __m512 swiglu16(__m512 gate, __m512 up) {
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), gate)));
  __m512 r = _mm512_maskz_rcp14_ps(kAll, d);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));  // r (2 - d r)
  return _mm512_mul_ps(_mm512_mul_ps(gate, r), up);
}

// 16 lanes of each dtype, loaded (masked: lanes past `m` read nothing) widened to f32, and
// stored rounded to nearest even (NaN kept quiet), as the 8-lane Lanes of simd_avx2.hpp.
template <int32_t Dtype>
struct Lanes16;

template <>
struct Lanes16<ARB_DTYPE_F32> {
  using Element = float;
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
};

template <>
struct Lanes16<ARB_DTYPE_F16> {
  using Element = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) { return _mm512_maskz_cvtph_ps(kAll, _mm256_maskz_loadu_epi16(m, p)); }
  static void store(uint16_t* p, __mmask16 m, __m512 v) {
    _mm256_mask_storeu_epi16(p, m, _mm512_maskz_cvtps_ph(kAll, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

template <>
struct Lanes16<ARB_DTYPE_BF16> {
  using Element = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(m, p)), 16));
  }
  static void store(uint16_t* p, __mmask16 m, __m512 v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, x, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_maskz_srli_epi32(kAll, _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i quiet_nan = _mm512_or_si512(_mm512_maskz_srli_epi32(kAll, x, 16), _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    _mm256_mask_storeu_epi16(p, m, _mm512_maskz_cvtepi32_epi16(kAll, _mm512_mask_blend_epi32(nan, rounded, quiet_nan)));
  }
};

// Every row, 32 elements at a time, then masked 16-element steps; L: the dtype's Lanes16 (or
// another with its load and store).
template <typename L>
void swiglu_rows(const arb_problem& p, const arb_operands& o) {
  using E = typename L::Element;
  const int64_t n = p.cols;
  const __mmask16 all = kAll;
  for (int64_t r = 0; r < p.rows; ++r) {
    const E* gate = static_cast<const E*>(o.gate) + r * p.ld_gate;
    const E* up = static_cast<const E*>(o.up) + r * p.ld_up;
    E* y = static_cast<E*>(o.y) + r * p.ld_y;
    int64_t c = 0;
    for (; c + 32 <= n; c += 32) {  // two vectors in flight
      const __m512 a = swiglu16(L::load(gate + c, all), L::load(up + c, all));
      const __m512 b = swiglu16(L::load(gate + c + 16, all), L::load(up + c + 16, all));
      L::store(y + c, all, a);
      L::store(y + c + 16, all, b);
    }
    for (; c < n; c += 16) {
      const __mmask16 m = n - c >= 16 ? all : static_cast<__mmask16>((1u << (n - c)) - 1u);
      L::store(y + c, m, swiglu16(L::load(gate + c, m), L::load(up + c, m)));
    }
  }
}

}  // namespace
}  // namespace arbiter::cpu
