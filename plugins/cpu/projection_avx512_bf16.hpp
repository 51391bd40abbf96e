// The steps the fused bf16 kernels with AVX512-BF16 share (mlp_avx512_bf16.cpp,
// qkv_avx512_bf16.cpp), as projection_avx2.hpp's are the AVX2 kernels': bf16 lanes loaded,
// widened and rounded; the rows' normalised activations n = rmsnorm(x) * weight rounded to bf16
// (as the chain's rmsnorm writes them); and the products of weight rows as they lie with rows
// of bf16 activations, one vdpbf16ps per 32 pairs (where the AVX2 kernels widen every weight to
// f32 and multiply 8), summed in f32, in weight_chunks.hpp's order.
//
// Internal linkage only (an unnamed namespace): the files that include it may be built for
// different ISAs, and the linker must never swap one's copy for another's.
#pragma once

#include "simd_avx512.hpp"
#include "weight_chunks.hpp"

#include <arbiter/plugin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace arbiter::cpu {
namespace {

using Bf16 = uint16_t;

// The first `count` (< 32) bf16 of p, the rest zero: a pair of zeros adds nothing to a sum.
inline __m512bh load_bf16(const Bf16* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bf16(const Bf16* p, __mmask32 mask) { return (__m512bh)_mm512_maskz_loadu_epi16(mask, p); }
inline __mmask32 first_lanes(int64_t count) { return static_cast<__mmask32>((uint64_t{1} << count) - 1); }
inline __mmask16 first_of_16(int64_t count) { return static_cast<__mmask16>(first_lanes(std::min<int64_t>(16, count))); }

inline float widen(Bf16 v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// Round to nearest even, NaN kept a NaN (vcvtneps2bf16's rounding, one value).
inline Bf16 narrow(float f) {
  return static_cast<Bf16>(_mm256_extract_epi16((__m256i)_mm512_cvtneps_pbh(_mm512_set1_ps(f)), 0));
}
// 16 floats to bf16, stored.
inline void store_narrowed(Bf16* p, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(v)); }
inline void store_narrowed(Bf16* p, __m512 v, __mmask16 mask) {
  _mm256_mask_storeu_epi16(p, mask, (__m256i)_mm512_cvtneps_pbh(v));
}
// 16 bf16 widened to f32 (a shift into the high half of each lane).
inline __m512 load_widened(const Bf16* p, __mmask16 mask = kAll) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(mask, p)), 16));
}
// The sum of the 16 lanes (not _mm512_reduce_add_ps, whose plain forms GCC 12 flags, as kAll says).
inline float sum_lanes(__m512 v) {
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0x4e));  // + the other 256-bit half
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0xb1));  // + the other 128-bit quarter
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_ps(kAll, v, v, 0x4e));     // + the other pair
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_ps(kAll, v, v, 0xb1));     // + the neighbour
  return _mm512_cvtss_f32(v);
}

// n = x / sqrt(mean(x^2) + eps) * weight, in f32, rounded to bf16.
inline void normalise_row(const Bf16* x, const Bf16* weight, int64_t cols, float eps, Bf16* n) {
  __m512 sum = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols; c += 16) {
    const __m512 v = load_widened(x + c, first_of_16(cols - c));
    sum = _mm512_fmadd_ps(v, v, sum);
  }
  const float scale = 1.0f / std::sqrt(sum_lanes(sum) / static_cast<float>(cols) + eps);
  const __m512 scale16 = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < cols; c += 16) {
    const __mmask16 mask = first_of_16(cols - c);
    store_narrowed(n + c, _mm512_mul_ps(_mm512_mul_ps(load_widened(x + c, mask), scale16), load_widened(weight + c, mask)),
                   mask);
  }
}

// Every row of x (row stride ld_x) normalised into n (row stride cols).
inline void normalise_rows(const arb_problem& p, const arb_operands& o, Bf16* n) {
  for (int64_t r = 0; r < p.rows; ++r)
    normalise_row(static_cast<const Bf16*>(o.x) + r * p.ld_x, static_cast<const Bf16*>(o.weight), p.cols, o.eps,
                  n + r * p.cols);
}

// Weight rows w[0..W) against R rows of bf16 activations a (row stride lda), k long:
// out[i][r] = w[i] . a[r], in f32. Each activation vector is loaded once for the W weight rows
// and each weight vector once for the R rows; W R accumulators (at most 24 of the 32 registers).
// With Fetch, the W rows `ahead` are prefetched into L2 as far as w's have been read.
template <int R, int W, bool Fetch>
inline void dots_of(const Bf16* a, int64_t lda, const Bf16* const* w, const Bf16* const* ahead, int64_t k,
                    float (&out)[W][R]) {
  static_assert(R * W <= 24, "the accumulators, a weight vector each row and an activation vector fit the registers");
  __m512 acc[W][R];
  for (int i = 0; i < W; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  auto step = [&](int64_t c, auto load) {
    __m512bh wv[W];
    for (int i = 0; i < W; ++i) wv[i] = load(w[i] + c);
    if constexpr (Fetch)
      for (int i = 0; i < W; ++i) _mm_prefetch(reinterpret_cast<const char*>(ahead[i] + c), _MM_HINT_T1);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = load(a + r * lda + c);
      for (int i = 0; i < W; ++i) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], av, wv[i]);
    }
  };
  int64_t c = 0;
  for (; c + 32 <= k; c += 32) step(c, [](const Bf16* p) { return load_bf16(p); });
  if (c < k) {
    const __mmask32 mask = first_lanes(k - c);
    step(c, [mask](const Bf16* p) { return load_bf16(p, mask); });
  }
  for (int i = 0; i < W; ++i)
    for (int r = 0; r < R; ++r) out[i][r] = sum_lanes(acc[i][r]);
}

template <int R, int W>
inline void dots(const Bf16* a, int64_t lda, const Bf16* const* w, int64_t k, float (&out)[W][R]) {
  dots_of<R, W, false>(a, lda, w, nullptr, k, out);
}

// The same while the weight rows of the next pass (`ahead`, W of them) come into L2: a pass
// that reads its rows from memory overlaps the next one's traffic with its products.
template <int R, int W>
inline void dots_fetching_ahead(const Bf16* a, int64_t lda, const Bf16* const* w, const Bf16* const* ahead, int64_t k,
                                float (&out)[W][R]) {
  dots_of<R, W, true>(a, lda, w, ahead, k, out);
}

}  // namespace
}  // namespace arbiter::cpu
