// The Llama MLP block fused for bf16 with AVX512-BF16 (vdpbf16ps), decode sizes (rows up to
// kMlpFusedMaxRows): y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight.
//
// mlp.cpp's plan (each weight row read from memory once, kept in cache while every block of
// token rows passes over it), with the products taken as the weights lie: one vdpbf16ps
// multiplies 32 bf16 pairs of a weight row and an activation row, where the AVX2 kernel widens
// every weight to f32 first and multiplies 8. From a few token rows on, the block is bound by
// these products rather than by the weights' traffic.
//
// The activations are rounded to bf16 where the products need them: n after the norm and
// h = silu(g) * u before the down projection, as the chain of single ops rounds them (its
// rmsnorm and swiglu write bf16); the projections g and u themselves stay f32 (the chain
// rounds those too). The norm's sum of squares, g, u and the down sums accumulate in f32.
//
// Workspace: n [rows][hidden] bf16, h [rows][inter] bf16, g and u [rows][inter] f32.
#include "kernels.hpp"
#include "simd_avx512.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace arbiter::cpu {
namespace {

using Bf16 = uint16_t;

constexpr int64_t kRowBlock = 4;      // token rows sharing each weight load
constexpr int64_t kWeightChunk = 16;  // weight rows (of each matrix) kept in cache across the row blocks

// The first `count` (< 32) bf16 of p, the rest zero: a pair of zeros adds nothing to a sum.
inline __m512bh load_bf16(const Bf16* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bf16(const Bf16* p, __mmask32 mask) { return (__m512bh)_mm512_maskz_loadu_epi16(mask, p); }
inline __mmask32 first_lanes(int64_t count) { return static_cast<__mmask32>((uint64_t{1} << count) - 1); }

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
void normalise_row(const Bf16* x, const Bf16* weight, int64_t cols, float eps, Bf16* n) {
  __m512 sum = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols; c += 16) {
    const __m512 v = load_widened(x + c, static_cast<__mmask16>(first_lanes(std::min<int64_t>(16, cols - c))));
    sum = _mm512_fmadd_ps(v, v, sum);
  }
  const float scale = 1.0f / std::sqrt(sum_lanes(sum) / static_cast<float>(cols) + eps);
  const __m512 scale16 = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < cols; c += 16) {
    const auto mask = static_cast<__mmask16>(first_lanes(std::min<int64_t>(16, cols - c)));
    store_narrowed(n + c, _mm512_mul_ps(_mm512_mul_ps(load_widened(x + c, mask), scale16), load_widened(weight + c, mask)),
                   mask);
  }
}

// Weight rows w[0..W) against R rows of bf16 activations a (row stride lda), k long:
// out[i][r] = w[i] . a[r], in f32. Each activation vector is loaded once for the W weight rows
// and each weight vector once for the R rows; W R accumulators (at most 16).
template <int R, int W>
inline void dots(const Bf16* a, int64_t lda, const Bf16* const* w, int64_t k, float (&out)[W][R]) {
  __m512 acc[W][R];
  for (int i = 0; i < W; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  auto step = [&](int64_t c, auto load) {
    __m512bh wv[W];
    for (int i = 0; i < W; ++i) wv[i] = load(w[i] + c);
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

// Weight rows a pass takes for R token rows: as many as keep W R at 16 or below, and at least
// 8 streams from memory at one row (decode is the weights' traffic).
template <int R>
inline constexpr int kPairs = R <= 2 ? 4 : 2;  // gate/up pairs of the projection step
template <int R>
inline constexpr int kDownRows = R <= 2 ? 8 : 4;  // rows of down in the output step

// The workspace's parts.
struct Parts {
  Bf16* n;   // rows x hidden
  Bf16* h;   // rows x inter
  float* g;  // rows x inter
  float* u;  // rows x inter
};

// g and u of R token rows from `row` for P intermediates from j.
template <int R, int P>
void projections(const arb_problem& p, const arb_operands& o, const Parts& s, int64_t row, int64_t j) {
  const Bf16* w[2 * P];
  for (int q = 0; q < P; ++q) {
    w[2 * q] = static_cast<const Bf16*>(o.gate) + (j + q) * p.ld_gate;
    w[2 * q + 1] = static_cast<const Bf16*>(o.up) + (j + q) * p.ld_up;
  }
  float out[2 * P][R];
  dots<R, 2 * P>(s.n + row * p.cols, p.cols, w, p.cols, out);
  for (int q = 0; q < P; ++q)
    for (int r = 0; r < R; ++r) {
      s.g[(row + r) * p.inter + j + q] = out[2 * q][r];
      s.u[(row + r) * p.inter + j + q] = out[2 * q + 1][r];
    }
}

// y[r][c] = x[r][c] + down_c . h_r for R rows from `row` and D output columns from c.
template <int R, int D>
void outputs(const arb_problem& p, const arb_operands& o, const Parts& s, int64_t row, int64_t c) {
  const Bf16* w[D];
  for (int d = 0; d < D; ++d) w[d] = static_cast<const Bf16*>(o.down) + (c + d) * p.ld_down;
  float sums[D][R];
  dots<R, D>(s.h + row * p.inter, p.inter, w, p.inter, sums);
  const auto* x = static_cast<const Bf16*>(o.x);
  auto* y = static_cast<Bf16*>(o.y);
  for (int d = 0; d < D; ++d)
    for (int r = 0; r < R; ++r) y[(row + r) * p.ld_y + c + d] = narrow(widen(x[(row + r) * p.ld_x + c + d]) + sums[d][r]);
}

// One block of R token rows over weight rows [first, last) of a step, W at a time then one.
template <int R>
struct ProjectionStep {
  static void run(const arb_problem& p, const arb_operands& o, const Parts& s, int64_t row, int64_t first, int64_t last) {
    int64_t j = first;
    for (; j + kPairs<R> <= last; j += kPairs<R>) projections<R, kPairs<R>>(p, o, s, row, j);
    for (; j < last; ++j) projections<R, 1>(p, o, s, row, j);
  }
};
template <int R>
struct OutputStep {
  static void run(const arb_problem& p, const arb_operands& o, const Parts& s, int64_t row, int64_t first, int64_t last) {
    int64_t c = first;
    for (; c + kDownRows<R> <= last; c += kDownRows<R>) outputs<R, kDownRows<R>>(p, o, s, row, c);
    for (; c < last; ++c) outputs<R, 1>(p, o, s, row, c);
  }
};

// A step over every block of rows (four, then the remainder), chunk by chunk of weight rows.
template <template <int> class Step>
void over_rows(const arb_problem& p, const arb_operands& o, const Parts& s, int64_t weight_rows) {
  for (int64_t first = 0; first < weight_rows; first += kWeightChunk) {
    const int64_t last = std::min(first + kWeightChunk, weight_rows);
    int64_t r = 0;
    for (; r + kRowBlock <= p.rows; r += kRowBlock) Step<kRowBlock>::run(p, o, s, r, first, last);
    switch (p.rows - r) {
      case 3: Step<3>::run(p, o, s, r, first, last); break;
      case 2: Step<2>::run(p, o, s, r, first, last); break;
      case 1: Step<1>::run(p, o, s, r, first, last); break;
      default: break;
    }
  }
}

// h = silu(g) * u, rounded to bf16, 16 lanes at a time; silu(g) = g / (1 + e^-g).
void activate(const float* g, const float* u, int64_t count, Bf16* h) {
  for (int64_t i = 0; i < count; i += 16) {
    const auto mask = static_cast<__mmask16>(first_lanes(std::min<int64_t>(16, count - i)));
    const __m512 gv = _mm512_maskz_loadu_ps(mask, g + i);
    const __m512 silu = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv))));
    store_narrowed(h + i, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mask, u + i)), mask);
  }
}

}  // namespace

size_t mlp_avx512_bf16_workspace(const arb_problem& p) {
  const auto rows = static_cast<size_t>(p.rows), hidden = static_cast<size_t>(p.cols), inter = static_cast<size_t>(p.inter);
  // n and h first (bf16), g and u after them from a 4-byte boundary.
  return (rows * (hidden + inter) * sizeof(Bf16) + 3) / 4 * 4 + 2 * rows * inter * sizeof(float);
}

void mlp_avx512_bf16(const arb_problem& p, const arb_operands& o, void* workspace) {
  Parts s;
  s.n = static_cast<Bf16*>(workspace);
  s.h = s.n + p.rows * p.cols;
  const size_t bf16_bytes = static_cast<size_t>(p.rows * (p.cols + p.inter)) * sizeof(Bf16);
  s.g = reinterpret_cast<float*>(static_cast<char*>(workspace) + (bf16_bytes + 3) / 4 * 4);
  s.u = s.g + p.rows * p.inter;
  for (int64_t r = 0; r < p.rows; ++r)
    normalise_row(static_cast<const Bf16*>(o.x) + r * p.ld_x, static_cast<const Bf16*>(o.weight), p.cols, o.eps,
                  s.n + r * p.cols);
  over_rows<ProjectionStep>(p, o, s, p.inter);
  for (int64_t r = 0; r < p.rows; ++r) activate(s.g + r * p.inter, s.u + r * p.inter, p.inter, s.h + r * p.inter);
  over_rows<OutputStep>(p, o, s, p.cols);
}

}  // namespace arbiter::cpu
