// gemm_bf16_avx512: bf16 GEMM for small and medium shapes with AVX512-BF16's vdpbf16ps, which
// multiplies pairs of bf16 values and adds both products into one f32 lane. Nothing is widened
// to f32 first (gemm_small does that, and OpenBLAS, which also copies whole matrices).
//
// Both operands are packed into the workspace once per call (bf16_packing.hpp): A as bf16 rows,
// so that one 32-bit broadcast gives a row's pair (a[i][2q], a[i][2q+1]), and B as VNNI pairs,
// so that one 512-bit load gives 16 columns' pairs (b[2q][j], b[2q+1][j]).
// A register block of Rows x 32 f32 sums (Rows up to 12: 24 accumulators) runs over all of k
// for one 32-column strip of B, which stays in L2 while every row block passes over it; the
// sums then go through gemm_small's epilogue (alpha, beta * C, bias, activation, rounding to
// bf16). vdpbf16ps treats denormal inputs as zero and rounds to nearest even, so results can
// differ from an f32 FMA chain in the last bits, and from run to run not at all: the order of
// the additions is fixed.
#include "bf16_packing.hpp"

#include <arbiter/plugin.hpp>
#include <immintrin.h>

#include <cstring>

namespace arbiter::cpu {
namespace {

constexpr int kBlockRows = 12;
constexpr int64_t kStrip = 32;  // columns per register block: two vectors of 16 f32 sums

struct Packed {
  int64_t kp, np;    // k rounded up to even, n rounded up to kStrip
  uint16_t* a;       // [m][kp]
  uint32_t* b;       // [kp / 2][np], each a pair of bf16 (row 2q in the low half)
};

size_t packed_bytes(const arb_problem& p, int64_t* a_bytes = nullptr) {
  const int64_t kp = round_up(p.k, 2), np = round_up(p.n, kStrip);
  const int64_t a = round_up(p.m * kp * 2, 64);
  if (a_bytes) *a_bytes = a;
  return static_cast<size_t>(a + kp / 2 * np * 4 + 64);  // + 64: aligning the start
}

// Rows x 32 sums of block (i0, j0) over all of k, into `tile` (row stride kTileStride).
template <int Rows>
void block(const Packed& packed, int64_t i0, int64_t j0, float* tile) {
  __m512 sum[Rows][2];
#pragma GCC unroll 12
  for (int r = 0; r < Rows; ++r) sum[r][0] = sum[r][1] = _mm512_setzero_ps();
  const uint16_t* a = packed.a + i0 * packed.kp;
  const uint32_t* b = packed.b + j0;
  const int64_t pairs = packed.kp / 2;
  for (int64_t q2 = 0; q2 < pairs; ++q2) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + q2 * packed.np);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + q2 * packed.np + 16);
#pragma GCC unroll 12
    for (int r = 0; r < Rows; ++r) {
      uint32_t pair;
      std::memcpy(&pair, a + r * packed.kp + 2 * q2, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], av, b0);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], av, b1);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < Rows; ++r) {
    _mm512_store_ps(tile + r * kTileStride, sum[r][0]);
    _mm512_store_ps(tile + r * kTileStride + 16, sum[r][1]);
  }
}

template <int Rows>
void block_rows(int rows, const Packed& packed, int64_t i0, int64_t j0, float* tile) {
  if constexpr (Rows > 0) {
    if (rows == Rows) return block<Rows>(packed, i0, j0, tile);
    block_rows<Rows - 1>(rows, packed, i0, j0, tile);
  }
}

}  // namespace

size_t gemm_bf16_avx512_workspace(const arb_problem& problem) { return packed_bytes(problem); }

void gemm_bf16_avx512(const arb_problem& p, const arb_operands& o, void* workspace, size_t workspace_bytes) {
  int64_t a_bytes = 0;
  if (workspace_bytes < packed_bytes(p, &a_bytes)) throw plugin::Error(ARB_ERR_KERNEL, "gemm_bf16_avx512: workspace too small");
  auto* base = reinterpret_cast<unsigned char*>(round_up(reinterpret_cast<int64_t>(workspace), 64));
  Packed packed{round_up(p.k, 2), round_up(p.n, kStrip), reinterpret_cast<uint16_t*>(base),
                reinterpret_cast<uint32_t*>(base + a_bytes)};
  pack_a(p, static_cast<const uint16_t*>(o.a), packed.a, p.m, packed.kp);
  pack_b(p, static_cast<const uint16_t*>(o.b), packed.b, packed.kp, packed.np);

  using E = uint16_t;
  const Epilogue<ARB_DTYPE_BF16> epilogue{p, static_cast<const E*>(o.c), static_cast<const E*>(o.bias),
                                          static_cast<E*>(o.d), o.alpha, o.beta};
  alignas(64) float tile[kBlockRows * kTileStride];
  for (int64_t j0 = 0; j0 < p.n; j0 += kStrip) {
    const int64_t valid_cols = std::min<int64_t>(kStrip, p.n - j0);
    for (int64_t i0 = 0; i0 < p.m; i0 += kBlockRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kBlockRows, p.m - i0));
      block_rows<kBlockRows>(rows, packed, i0, j0, tile);
      finish_bf16_tile(epilogue, tile, rows, i0, j0, valid_cols);
    }
  }
}

}  // namespace arbiter::cpu
