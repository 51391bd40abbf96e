// 8-lane float vectors over the three dtypes, for translation units built with
// -mavx2 -mfma -mf16c (or more). Loads widen to f32; stores round to nearest even, like
// arbiter/float16.hpp, so vector and scalar paths agree bit for bit.
//
// Everything here has internal linkage (an unnamed namespace): translation units built
// for different ISAs include it, and the linker must never swap one's copy for another's.
#pragma once

#include "exp_polynomial.hpp"

#include <arbiter/types.h>

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace arbiter::cpu {
namespace {

template <int32_t Dtype>
struct Lanes;

template <>
struct Lanes<ARB_DTYPE_F32> {
  using Element = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static float load1(const float* p) { return *p; }
  static void store1(float* p, float v) { *p = v; }
};

template <>
struct Lanes<ARB_DTYPE_F16> {
  using Element = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
  static void store1(uint16_t* p, float v) {
    *p = static_cast<uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

template <>
struct Lanes<ARB_DTYPE_BF16> {
  using Element = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static void store(uint16_t* p, __m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
    const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    const __m256i bits = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  static float load1(const uint16_t* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float f;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
  }
  static void store1(uint16_t* p, float v) {
    uint32_t x;
    __builtin_memcpy(&x, &v, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      *p = static_cast<uint16_t>((x >> 16) | 0x40u);
    } else {
      *p = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    }
  }
};

inline float horizontal_sum(__m256 v) {
  const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 sum2 = _mm_add_ps(sum4, _mm_movehl_ps(sum4, sum4));
  return _mm_cvtss_f32(_mm_add_ss(sum2, _mm_shuffle_ps(sum2, sum2, 1)));
}

inline float horizontal_max(__m256 v) {
  const __m128 max4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 max2 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
  return _mm_cvtss_f32(_mm_max_ss(max2, _mm_shuffle_ps(max2, max2, 1)));
}

// e^x, Cephes' single-precision polynomial (exp_polynomial.hpp): about 1 ulp on [-87, 88]; 0 below.
inline __m256 exp8(__m256 x) {
  namespace k = exp_polynomial;
  x = _mm256_min_ps(x, _mm256_set1_ps(k::kClamp));
  x = _mm256_max_ps(x, _mm256_set1_ps(-k::kClamp));
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(k::kLog2e), _mm256_set1_ps(0.5f));
  fx = _mm256_round_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(k::kLn2High), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(k::kLn2Low), x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 y = _mm256_set1_ps(k::kCoefficients[0]);
  for (int i = 1; i < 6; ++i) y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(k::kCoefficients[i]));
  y = _mm256_fmadd_ps(y, z, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i n = _mm256_cvttps_epi32(fx);
  const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(pow2n));
}

// One lane of exp8, for row tails, so that every element sees the same function.
inline float exp1(float x) { return _mm256_cvtss_f32(exp8(_mm256_set1_ps(x))); }

// erfc(z) for z >= 0: t e^(-z^2 + P(t)), t = 1 / (1 + z/2), the Chebyshev fit of Numerical
// Recipes (erfcc), relative error below 1.2e-7 over the whole range.
inline __m256 erfc_nonnegative8(__m256 z) {
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, _mm256_set1_ps(1.0f)));
  static constexpr float kCoefficients[] = {-0.82215223f, 1.48851587f,  -1.13520398f, 0.27886807f, -0.18628806f,
                                            0.09678418f,  0.37409196f,  1.00002368f,  -1.26551223f};
  __m256 p = _mm256_set1_ps(0.17087277f);
  for (float c : kCoefficients) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c));
  const __m256 exponent = _mm256_fnmadd_ps(z, z, p);  // -z^2 + P(t)
  return _mm256_mul_ps(t, exp8(exponent));
}

// The gemm epilogue activations on 8 lanes, in the forms of plugins/common/activation.hpp
// (sigmoid- and erfc-based: no cancellation for negative inputs).
__attribute__((always_inline)) inline __m256 activate8(int32_t activation, __m256 v) {
  const __m256 one = _mm256_set1_ps(1.0f);
  switch (activation) {
    case ARB_ACT_RELU: return _mm256_max_ps(v, _mm256_setzero_ps());
    case ARB_ACT_SILU: {  // x / (1 + e^-x)
      const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
      return _mm256_div_ps(v, _mm256_add_ps(one, e));
    }
    case ARB_ACT_GELU_TANH: {  // x / (1 + e^-2z), z = sqrt(2/pi)(x + 0.044715x^3)
      const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
      const __m256 minus_2z = _mm256_mul_ps(_mm256_set1_ps(-1.5957691216057308f),
                                            _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, v));
      return _mm256_div_ps(v, _mm256_add_ps(one, exp8(minus_2z)));
    }
    case ARB_ACT_GELU_ERF: {  // 0.5x erfc(-x / sqrt2); erfc(-z) = 2 - erfc(z)
      const __m256 z = _mm256_mul_ps(v, _mm256_set1_ps(-0.7071067811865476f));
      const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
      const __m256 tail = erfc_nonnegative8(magnitude);
      const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
      const __m256 erfc_z = _mm256_blendv_ps(tail, _mm256_sub_ps(_mm256_set1_ps(2.0f), tail), negative);
      return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), erfc_z);
    }
    default: return v;
  }
}

// One lane of activate8, for row tails.
inline float activate1(int32_t activation, float x) {
  return _mm256_cvtss_f32(activate8(activation, _mm256_set1_ps(x)));
}

}  // namespace
}  // namespace arbiter::cpu
