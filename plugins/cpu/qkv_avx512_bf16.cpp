// The input of a Llama attention block fused for bf16 with AVX512-BF16 (vdpbf16ps), decode
// sizes (rows up to kQkvFusedMaxRows): n = rmsnorm(x) * weight, the fused QKV projection n W^T,
// then rope on its q and k heads.
//
// qkv.cpp's plan with the products of mlp_avx512_bf16.cpp (projection_avx512_bf16.hpp): one
// vdpbf16ps multiplies 32 bf16 pairs of a row of W as it lies and a row of n, where the AVX2
// kernel widens every weight to f32 and multiplies 8. n is rounded to bf16 once, as the chain's
// rmsnorm writes it; the projections accumulate in f32 and stay f32 through rope (rope_avx2.hpp's
// turn, as cpu.qkv_fused's), and y is rounded once.
//
// W is nearly all the traffic. Its rows come in weight_chunks.hpp's order, 4 a pass for 3 or 4
// token rows and 8 for 1 or 2 (16 accumulators); the first block of token rows, the one that
// reads each chunk from memory, prefetches the next pass's rows into L2 as it goes, so that from
// 4 rows on (where the products take about as long as the traffic) the two overlap.
//
// Workspace: n [rows][hidden] bf16, then the projections [rows][out] f32 from a 64-byte boundary.
#include "kernels.hpp"
#include "projection_avx512_bf16.hpp"
#include "rope_avx2.hpp"

#include <algorithm>
#include <cstdint>

namespace arbiter::cpu {
namespace {

// y's columns: q's heads, then k's and v's, head_dim each.
int64_t projected_cols(const arb_problem& p) { return (p.heads + 2 * p.kv_heads) * p.head_dim; }

// n's bytes, rounded up to the projections' 64-byte boundary.
size_t normalised_bytes(const arb_problem& p) {
  return (static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols) * sizeof(Bf16) + 63) / 64 * 64;
}

// Weight rows a pass takes for R token rows: 16 accumulators, and 8 streams from memory at one
// or two rows (where the traffic is all of the time).
template <int R>
inline constexpr int kWeightRowsPerPass = R <= 2 ? 8 : 4;

// The workspace's parts.
struct Parts {
  Bf16* n;            // rows x hidden
  float* projected;  // rows x out
  int64_t out;       // projected_cols
};

// The projections of R token rows from `row` by D weight rows from j; with `fetch`, the D rows
// after them (the next pass's, the last row repeated at the end of W) come into L2 meanwhile.
template <int R, int D>
void project(const arb_problem& p, const Bf16* w, const Parts& s, int64_t row, int64_t j, bool fetch) {
  const Bf16 *rows[D], *ahead[D];
  for (int d = 0; d < D; ++d) {
    rows[d] = w + (j + d) * p.ld_w;
    ahead[d] = w + std::min(j + D + d, s.out - 1) * p.ld_w;
  }
  float sums[D][R];
  const Bf16* n = s.n + row * p.cols;
  if (fetch)
    dots_fetching_ahead<R, D>(n, p.cols, rows, ahead, p.cols, sums);
  else
    dots<R, D>(n, p.cols, rows, p.cols, sums);
  for (int d = 0; d < D; ++d)
    for (int r = 0; r < R; ++r) s.projected[(row + r) * s.out + j + d] = sums[d][r];
}

// y's rows from the f32 projections, rounded to bf16 (to nearest even), 16 lanes at a time.
void round_rows(const arb_problem& p, const Parts& s, Bf16* y) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* from = s.projected + r * s.out;
    Bf16* to = y + r * p.ld_y;
    for (int64_t c = 0; c < s.out; c += 16) {
      const __mmask16 mask = first_of_16(s.out - c);
      store_narrowed(to + c, _mm512_maskz_loadu_ps(mask, from + c), mask);
    }
  }
}

}  // namespace

size_t qkv_avx512_bf16_workspace(const arb_problem& p) {
  return normalised_bytes(p) + static_cast<size_t>(p.rows) * static_cast<size_t>(projected_cols(p)) * sizeof(float);
}

void qkv_avx512_bf16(const arb_problem& p, const arb_operands& o, void* workspace) {
  Parts s;
  s.n = static_cast<Bf16*>(workspace);
  s.projected = reinterpret_cast<float*>(static_cast<char*>(workspace) + normalised_bytes(p));
  s.out = projected_cols(p);
  normalise_rows(p, o, s.n);
  const auto* w = static_cast<const Bf16*>(o.b);
  over_weight_chunks(p.rows, s.out, [&](auto block, int64_t row, int64_t first, int64_t last) {
    constexpr int R = decltype(block)::value;
    constexpr int D = kWeightRowsPerPass<R>;
    const bool from_memory = row == 0;  // the later blocks find the chunk in L2
    int64_t j = first;
    for (; j + D <= last; j += D) project<R, D>(p, w, s, row, j, from_memory);
    for (; j < last; ++j) project<R, 1>(p, w, s, row, j, from_memory);
  });
  // q's and k's heads, the first heads + kv_heads of each row, turned in f32.
  turn_heads<ARB_DTYPE_F32>(p.rows, p.heads + p.kv_heads, p.head_dim, p.rope_theta, p.rope_layout,
                            static_cast<const int32_t*>(o.positions),
                            [&](int64_t t, int64_t h) { return s.projected + t * s.out + h * p.head_dim; });
  round_rows(p, s, static_cast<Bf16*>(o.y));
}

}  // namespace arbiter::cpu
