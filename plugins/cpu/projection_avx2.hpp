// The steps the fused CPU kernels for decode sizes share (mlp.cpp, qkv.cpp), AVX2 + FMA +
// F16C: the rows' normalised activations n = rmsnorm(x) * weight in f32, and projections of
// rows of f32 activations by weight rows as they lie in the dtype (y_j = w_j . a), in
// weight_chunks.hpp's order: each weight row read from memory once.
//
// Internal linkage only (an unnamed namespace): the files that include it may be built for
// different ISAs, and the linker must never swap one's copy for another's.
#pragma once

#include "simd_avx2.hpp"
#include "weight_chunks.hpp"

#include <arbiter/plugin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace arbiter::cpu {
namespace {

// f(std::integral_constant<int32_t, Dtype>{}) for the kernel's dtype, f32, f16 or bf16; nothing
// for another (supports() refused it).
template <typename F>
void on_dtype(int32_t dtype, F&& f) {
  switch (dtype) {
    case ARB_DTYPE_F32: return f(std::integral_constant<int32_t, ARB_DTYPE_F32>{});
    case ARB_DTYPE_F16: return f(std::integral_constant<int32_t, ARB_DTYPE_F16>{});
    case ARB_DTYPE_BF16: return f(std::integral_constant<int32_t, ARB_DTYPE_BF16>{});
    default: return;
  }
}

// n = x / sqrt(mean(x^2) + eps) * weight, in f32.
template <int32_t Dtype>
void normalise_row(const typename Lanes<Dtype>::Element* x, const typename Lanes<Dtype>::Element* weight, int64_t cols,
                   float eps, float* n) {
  using L = Lanes<Dtype>;
  __m256 sum = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    const __m256 v = L::load(x + c);
    sum = _mm256_fmadd_ps(v, v, sum);
  }
  float sum_sq = horizontal_sum(sum);
  for (; c < cols; ++c) sum_sq += L::load1(x + c) * L::load1(x + c);
  const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(cols) + eps);
  const __m256 scale8 = _mm256_set1_ps(scale);
  for (c = 0; c + 8 <= cols; c += 8)
    _mm256_storeu_ps(n + c, _mm256_mul_ps(_mm256_mul_ps(L::load(x + c), scale8), L::load(weight + c)));
  for (; c < cols; ++c) n[c] = L::load1(x + c) * scale * L::load1(weight + c);
}

// Every row of x (row stride ld_x) normalised into n (row stride cols).
template <int32_t Dtype>
void normalise_rows(const arb_problem& p, const arb_operands& o, float* n) {
  using E = typename Lanes<Dtype>::Element;
  for (int64_t r = 0; r < p.rows; ++r)
    normalise_row<Dtype>(static_cast<const E*>(o.x) + r * p.ld_x, static_cast<const E*>(o.weight), p.cols, o.eps,
                         n + r * p.cols);
}

// Weight rows w[0..W) against R rows of activations a (f32, row stride lda), k long: out[n][r]
// = w[n] . a[r]. Each vector of activations is loaded once for the W weight rows and each
// weight vector once for the R rows; W R accumulators (at most 8) keep both FMA pipes busy.
template <int32_t Dtype, int R, int W>
inline void dots(const float* a, int64_t lda, const typename Lanes<Dtype>::Element* const* w, int64_t k,
                 float (&out)[W][R]) {
  using L = Lanes<Dtype>;
  __m256 acc[W][R];
  for (int n = 0; n < W; ++n)
    for (int r = 0; r < R; ++r) acc[n][r] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= k; c += 8) {
    __m256 wv[W];
    for (int n = 0; n < W; ++n) wv[n] = L::load(w[n] + c);
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_loadu_ps(a + r * lda + c);
      for (int n = 0; n < W; ++n) acc[n][r] = _mm256_fmadd_ps(av, wv[n], acc[n][r]);
    }
  }
  for (int n = 0; n < W; ++n)
    for (int r = 0; r < R; ++r) {
      float s = horizontal_sum(acc[n][r]);
      for (int64_t t = c; t < k; ++t) s += a[r * lda + t] * L::load1(w[n] + t);
      out[n][r] = s;
    }
}

// Weight rows a projection's dots() pass takes for R token rows: as many as keep W R at 8 or below.
template <int R>
inline constexpr int kProjectedRows = R <= 2 ? 4 : 2;

// Activations a (f32, row stride lda, k long) of R token rows from `row`, projected by D weight
// rows from j (w, row stride ldw): emit(row + r, j + d, w_(j+d) . a_(row+r)) for each.
template <int32_t Dtype, int R, int D, typename Emit>
inline void project(const float* a, int64_t lda, int64_t k, const typename Lanes<Dtype>::Element* w, int64_t ldw,
                    int64_t row, int64_t j, Emit& emit) {
  const typename Lanes<Dtype>::Element* rows[D];
  for (int d = 0; d < D; ++d) rows[d] = w + (j + d) * ldw;
  float s[D][R];
  dots<Dtype, R, D>(a + row * lda, lda, rows, k, s);
  for (int d = 0; d < D; ++d)
    for (int r = 0; r < R; ++r) emit(row + r, j + d, s[d][r]);
}

// The same for weight rows [j0, j1), kProjectedRows<R> a pass, then one at a time.
template <int32_t Dtype, int R, typename Emit>
void project_block(const float* a, int64_t lda, int64_t k, const typename Lanes<Dtype>::Element* w, int64_t ldw,
                   int64_t row, int64_t j0, int64_t j1, Emit& emit) {
  constexpr int D = kProjectedRows<R>;
  int64_t j = j0;
  for (; j + D <= j1; j += D) project<Dtype, R, D>(a, lda, k, w, ldw, row, j, emit);
  for (; j < j1; ++j) project<Dtype, R, 1>(a, lda, k, w, ldw, row, j, emit);
}

// rows of activations a (f32, row stride lda, k long) projected by count weight rows (w, row
// stride ldw): emit(row, j, w_j . a_row) for every row and j.
template <int32_t Dtype, typename Emit>
void project_rows(int64_t rows, const float* a, int64_t lda, int64_t k, const typename Lanes<Dtype>::Element* w,
                  int64_t ldw, int64_t count, Emit&& emit) {
  over_weight_chunks(rows, count, [&](auto block, int64_t row, int64_t j0, int64_t j1) {
    project_block<Dtype, decltype(block)::value>(a, lda, k, w, ldw, row, j0, j1, emit);
  });
}

}  // namespace
}  // namespace arbiter::cpu
