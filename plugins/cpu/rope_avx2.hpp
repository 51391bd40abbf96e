// Rotary position embedding on 8 lanes, shared by the cpu plugin's rope (rope.cpp) and the
// fused attention input (qkv.cpp), AVX2 + FMA + F16C. For a block of pairs, the inverse
// frequencies theta^(-2i / dim) are computed once per call; then per token, the cos and sin of
// the block's angles once, applied to every head: the angle in double (position times the
// frequency, reduced to [-pi, pi] there), its cos and sin in f32, so the result is as accurate
// as f32 can hold at any position. The rotation runs 8 lanes at a time, tails one lane.
//
// Internal linkage only (an unnamed namespace): the files that include it may be built for
// different ISAs, and the linker must never swap one's copy for another's.
#pragma once

#include "simd_avx2.hpp"

#include <arbiter/plugin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace arbiter::cpu {
namespace {

constexpr int64_t kBlockPairs = 64;  // cos and sin of this many pairs on the stack

// theta^(-2i / dim) for pairs [first, first + count).
inline void inverse_frequencies(double theta, int64_t dim, int64_t first, int64_t count, double* out) {
  const double log2_theta = std::log2(theta);
  for (int64_t i = 0; i < count; ++i)
    out[i] = std::exp2(-2.0 * static_cast<double>(first + i) / static_cast<double>(dim) * log2_theta);
}

// cos and sin of `count` pairs at `position`.
inline void angles(double position, const double* inv_freq, int64_t count, float* cos_out, float* sin_out) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < count; ++i) {
    const double angle = position * inv_freq[i];
    const double reduced = angle - std::nearbyint(angle / kTwoPi) * kTwoPi;
    float s, c;
    sincosf(static_cast<float>(reduced), &s, &c);
    cos_out[i] = c;
    sin_out[i] = s;
  }
}

// Split-half: element i with i + dim/2, both halves contiguous.
template <int32_t Dtype>
void rotate_half(typename Lanes<Dtype>::Element* head, int64_t half, int64_t first, int64_t count, const float* c,
                 const float* s) {
  using L = Lanes<Dtype>;
  auto* lo = head + first;
  auto* hi = head + half + first;
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x1 = L::load(lo + i), x2 = L::load(hi + i);
    const __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
    L::store(lo + i, _mm256_fmsub_ps(x1, vc, _mm256_mul_ps(x2, vs)));
    L::store(hi + i, _mm256_fmadd_ps(x2, vc, _mm256_mul_ps(x1, vs)));
  }
  for (; i < count; ++i) {
    const float x1 = L::load1(lo + i), x2 = L::load1(hi + i);
    L::store1(lo + i, x1 * c[i] - x2 * s[i]);
    L::store1(hi + i, x2 * c[i] + x1 * s[i]);
  }
}

// Interleaved: elements 2i and 2i + 1. c2 and s2 hold each pair's cos twice and its sin as
// (-sin, sin), so that x * c2 + swap(x) * s2 turns four pairs per vector.
template <int32_t Dtype>
void rotate_interleaved(typename Lanes<Dtype>::Element* head, int64_t first, int64_t count, const float* c2,
                        const float* s2) {
  using L = Lanes<Dtype>;
  auto* x = head + 2 * first;
  const int64_t elements = 2 * count;
  int64_t e = 0;
  for (; e + 8 <= elements; e += 8) {
    const __m256 v = L::load(x + e);
    const __m256 swapped = _mm256_permute_ps(v, 0xb1);  // (x2, x1) in each pair
    L::store(x + e, _mm256_fmadd_ps(v, _mm256_loadu_ps(c2 + e), _mm256_mul_ps(swapped, _mm256_loadu_ps(s2 + e))));
  }
  for (; e < elements; e += 2) {
    const float x1 = L::load1(x + e), x2 = L::load1(x + e + 1);
    L::store1(x + e, x1 * c2[e] + x2 * s2[e]);
    L::store1(x + e + 1, x2 * c2[e + 1] + x1 * s2[e + 1]);
  }
}

// Turns `heads` heads of each of `tokens` tokens in place, each head `dim` long (pairs as
// `layout` says), token t by positions[t]: head(t, h) is the first element of head h of token t.
template <int32_t Dtype, typename Head>
void turn_heads(int64_t tokens, int64_t heads, int64_t dim, double theta, int32_t layout, const int32_t* positions,
                Head&& head) {
  const int64_t pairs = dim / 2;
  const bool interleaved = layout == ARB_ROPE_INTERLEAVED;
  alignas(32) float c[kBlockPairs], s[kBlockPairs], c2[2 * kBlockPairs], s2[2 * kBlockPairs];
  double inv_freq[kBlockPairs];
  for (int64_t first = 0; first < pairs; first += kBlockPairs) {
    const int64_t count = std::min(kBlockPairs, pairs - first);
    inverse_frequencies(theta, dim, first, count, inv_freq);
    for (int64_t t = 0; t < tokens; ++t) {
      angles(positions[t], inv_freq, count, c, s);
      if (interleaved) {
        for (int64_t i = 0; i < count; ++i) {
          c2[2 * i] = c2[2 * i + 1] = c[i];
          s2[2 * i] = -s[i];
          s2[2 * i + 1] = s[i];
        }
      }
      for (int64_t h = 0; h < heads; ++h) {
        typename Lanes<Dtype>::Element* start = head(t, h);
        if (interleaved)
          rotate_interleaved<Dtype>(start, first, count, c2, s2);
        else
          rotate_half<Dtype>(start, pairs, first, count, c, s);
      }
    }
  }
}

}  // namespace
}  // namespace arbiter::cpu
