// The Llama MLP block fused for bf16 with AVX512-BF16 (vdpbf16ps), decode sizes (rows up to
// kMlpFusedMaxRows): y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight.
//
// mlp.cpp's plan (each weight row read from memory once, kept in cache while every block of
// token rows passes over it), with the products taken as the weights lie
// (projection_avx512_bf16.hpp, shared with qkv_avx512_bf16.cpp): one vdpbf16ps
// multiplies 32 bf16 pairs of a weight row and an activation row, where the AVX2 kernel widens
// every weight to f32 first and multiplies 8. From a few token rows on, the block is bound by
// these products rather than by the weights' traffic.
//
// In both projections the first block of token rows, the one that reads each chunk of weight
// rows from memory, prefetches the next pass's rows into L2 as it goes (as qkv_avx512_bf16.cpp
// does), so the traffic overlaps the products: 1.1x to 1.25x faster at 1 and 4 rows, no slower
// at 16. (A prefetch 1 KB ahead within the rows being read was slower.)
//
// The activations are rounded to bf16 where the products need them: n after the norm and
// h = silu(g) * u before the down projection, as the chain of single ops rounds them (its
// rmsnorm and swiglu write bf16); the projections g and u themselves stay f32 (the chain
// rounds those too). The norm's sum of squares, g, u and the down sums accumulate in f32.
//
// Workspace: n [rows][hidden] bf16, h [rows][inter] bf16, g and u [rows][inter] f32.
#include "kernels.hpp"
#include "projection_avx512_bf16.hpp"

#include <algorithm>
#include <cstdint>

namespace arbiter::cpu {
namespace {

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

// g and u of R token rows from `row` for P intermediates from j; with `fetch`, the next pass's
// P pairs (the last pair repeated at the end of the weights) come into L2 meanwhile.
template <int R, int P>
void projections(const arb_problem& p, const arb_operands& o, const Parts& s, int64_t row, int64_t j, bool fetch) {
  const auto* gate = static_cast<const Bf16*>(o.gate);
  const auto* up = static_cast<const Bf16*>(o.up);
  const Bf16 *w[2 * P], *ahead[2 * P];
  for (int q = 0; q < P; ++q) {
    const int64_t next = std::min(j + P + q, p.inter - 1);
    w[2 * q] = gate + (j + q) * p.ld_gate;
    w[2 * q + 1] = up + (j + q) * p.ld_up;
    ahead[2 * q] = gate + next * p.ld_gate;
    ahead[2 * q + 1] = up + next * p.ld_up;
  }
  float out[2 * P][R];
  const Bf16* n = s.n + row * p.cols;
  if (fetch)
    dots_fetching_ahead<R, 2 * P>(n, p.cols, w, ahead, p.cols, out);
  else
    dots<R, 2 * P>(n, p.cols, w, p.cols, out);
  for (int q = 0; q < P; ++q)
    for (int r = 0; r < R; ++r) {
      s.g[(row + r) * p.inter + j + q] = out[2 * q][r];
      s.u[(row + r) * p.inter + j + q] = out[2 * q + 1][r];
    }
}

// y[r][c] = x[r][c] + down_c . h_r for R rows from `row` and D output columns from c; with
// `fetch`, the next pass's D rows of down (the last repeated at its end) come into L2 meanwhile.
template <int R, int D>
void outputs(const arb_problem& p, const arb_operands& o, const Parts& s, int64_t row, int64_t c, bool fetch) {
  const auto* down = static_cast<const Bf16*>(o.down);
  const Bf16 *w[D], *ahead[D];
  for (int d = 0; d < D; ++d) {
    w[d] = down + (c + d) * p.ld_down;
    ahead[d] = down + std::min(c + D + d, p.cols - 1) * p.ld_down;
  }
  float sums[D][R];
  const Bf16* h = s.h + row * p.inter;
  if (fetch)
    dots_fetching_ahead<R, D>(h, p.inter, w, ahead, p.inter, sums);
  else
    dots<R, D>(h, p.inter, w, p.inter, sums);
  const auto* x = static_cast<const Bf16*>(o.x);
  auto* y = static_cast<Bf16*>(o.y);
  for (int d = 0; d < D; ++d)
    for (int r = 0; r < R; ++r) y[(row + r) * p.ld_y + c + d] = narrow(widen(x[(row + r) * p.ld_x + c + d]) + sums[d][r]);
}

// h = silu(g) * u, rounded to bf16, 16 lanes at a time; silu(g) = g / (1 + e^-g).
void activate(const float* g, const float* u, int64_t count, Bf16* h) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 mask = first_of_16(count - i);
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
  normalise_rows(p, o, s.n);
  // Each block of R token rows over weight rows [first, last), kPairs<R> (kDownRows<R>) a pass, then one;
  // the first block, the one that reads the chunk from memory, fetches the next pass's rows as it goes.
  over_weight_chunks(p.rows, p.inter, [&](auto block, int64_t row, int64_t first, int64_t last) {
    constexpr int R = decltype(block)::value;
    const bool from_memory = row == 0;  // the later blocks find the chunk in L2
    int64_t j = first;
    for (; j + kPairs<R> <= last; j += kPairs<R>) projections<R, kPairs<R>>(p, o, s, row, j, from_memory);
    for (; j < last; ++j) projections<R, 1>(p, o, s, row, j, from_memory);
  });
  for (int64_t r = 0; r < p.rows; ++r) activate(s.g + r * p.inter, s.u + r * p.inter, p.inter, s.h + r * p.inter);
  over_weight_chunks(p.rows, p.cols, [&](auto block, int64_t row, int64_t first, int64_t last) {
    constexpr int R = decltype(block)::value;
    const bool from_memory = row == 0;
    int64_t c = first;
    for (; c + kDownRows<R> <= last; c += kDownRows<R>) outputs<R, kDownRows<R>>(p, o, s, row, c, from_memory);
    for (; c < last; ++c) outputs<R, 1>(p, o, s, row, c, from_memory);
  });
}

}  // namespace arbiter::cpu
