// The small-shape GEMM (m, n, k <= 64), written once over an ISA description and built
// twice: gemm_small_avx2.cpp (8-lane vectors) and gemm_small_avx512.cpp (16 lanes).
//
// At these sizes a BLAS's set-up (dispatch, packing, threading decisions) costs as much as
// the arithmetic, so this kernel does as little as possible around a register-blocked
// micro-kernel of Isa::kRows x (2 * Isa::kLanes), one vector wide for narrow matrices:
//  - f32: A is read in place (a strided broadcast serves either layout) and B rows are
//    loaded in place (masked loads at the right edge); only a transposed B is packed
//    (8 x 8 register transposes), and not even that for m <= 4 (dot products of rows);
//  - f16/bf16: A and B are widened once into f32 tiles on the stack;
//  - the epilogue (alpha, beta * C, bias, activation, rounding to the dtype) runs on each
//    block's sums, eight lanes at a time, and stores straight into D.
// No allocation, no threads. Internal linkage throughout (see simd_avx2.hpp).
//
// An Isa provides: V (vector), Mask, Tail (the ISA for narrow right edges), kLanes, kRows, zero(), set1(x), load(p), store(p, v),
// masked_load(p, mask), masked_store(p, mask, v), mask(count), broadcast(p), fma(a, b, c),
// add(a, b) and mul(a, b).
#pragma once

#include "kernels.hpp"
#include "simd_avx2.hpp"

#include <algorithm>

namespace arbiter::cpu {
namespace {

constexpr int64_t kMaxSize = kSmallGemmMax;
constexpr int64_t kPanel = kMaxSize;      // row stride of the packed B panel (zeros past n)
constexpr int64_t kTileStride = 32;       // row stride of a block's sums (2 x 16 lanes at most)

// An f32 operand in memory: element (r, c) at data[r * row_stride + c * col_stride].
struct F32View {
  const float* data;
  int64_t row_stride, col_stride;
};

// The epilogue, on 8 lanes at a time.
template <int32_t Dtype>
struct Epilogue {
  using E = typename Lanes<Dtype>::Element;
  const arb_problem& p;
  const E* c;
  const E* bias;
  E* d;
  float alpha, beta;

  // Finishes 8 accumulated lanes of row i from column j on, `valid` of them real.
  __attribute__((always_inline)) void store8(int64_t i, int64_t j, __m256 sum, int64_t valid) const {
    using L = Lanes<Dtype>;
    if (valid <= 0) return;
    __m256 v = _mm256_mul_ps(_mm256_set1_ps(alpha), sum);
    if (valid >= 8) {
      if (p.has_c) v = _mm256_fmadd_ps(_mm256_set1_ps(beta), L::load(c + i * p.ldc + j), v);
      if (p.has_bias) v = _mm256_add_ps(v, L::load(bias + j));
      L::store(d + i * p.ldd + j, activate8(p.activation, v));
      return;
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    for (int64_t l = 0; l < valid; ++l) {
      float x = lanes[l];
      if (p.has_c) x = beta * L::load1(c + i * p.ldc + j + l) + x;
      if (p.has_bias) x += L::load1(bias + j + l);
      L::store1(d + i * p.ldd + j + l, activate1(p.activation, x));
    }
  }
};

// 8-lane vectors (AVX2 + FMA): the ISA of gemm_small_avx2.
struct Avx2 {
  using Tail = Avx2;  // nothing narrower
  using V = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  static constexpr int kRows = 6;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V masked_load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static Mask mask(int64_t count) {  // lanes [0, count) on
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void masked_store(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
};

// Where a block's sums go. Plain f32 (no C, bias or activation) is stored from registers
// straight into D, scaled by alpha; everything else goes through the dtype's epilogue,
// behind one indirect call per block, so the (heavily unrolled) blocks are not
// instantiated once per dtype.
struct BlockSink {
  float* direct_d;  // non-null: plain f32, D's data
  int64_t ldd;
  float alpha;
  const void* epilogue;
  void (*finish)(const void* epilogue, const float* tile, int rows, int64_t i0, int64_t j0, int64_t valid_cols);
};

template <int32_t Dtype>
void finish_tile(const void* epilogue, const float* tile, int rows, int64_t i0, int64_t j0, int64_t valid_cols) {
  const auto& e = *static_cast<const Epilogue<Dtype>*>(epilogue);
  for (int r = 0; r < rows; ++r)
    for (int64_t j = 0; j < valid_cols; j += 8)
      e.store8(i0 + r, j0 + j, _mm256_loadu_ps(tile + r * kTileStride + j), valid_cols - j);
}

// One Rows x (Vectors * kLanes) block of D at (i0, j0): accumulate in registers over k,
// then hand the sums to the epilogue. B rows start at b.data + q * b.row_stride + j0
// (column stride 1); MaskedB loads only the valid columns of a block that runs past B's
// last column.
template <typename Isa, int Rows, int Vectors, bool MaskedB>
void block(const F32View a, const F32View b, int64_t k, int64_t i0, int64_t j0, int64_t valid_cols,
           const BlockSink& sink) {
  using V = typename Isa::V;
  constexpr int kLanes = Isa::kLanes;
  // An FMA's latency is a few cycles and two issue per cycle: a small block (few rows or
  // columns) keeps enough independent sums in flight by splitting k over kSplit sets of
  // accumulators, added together at the end (a fixed order: results stay deterministic).
  constexpr int kChains = Rows * Vectors;
  constexpr int kSplit = kChains >= 8 ? 1 : kChains >= 4 ? 2 : 4;
  V sum[kSplit][Rows][Vectors];
#pragma GCC unroll 16
  for (int s = 0; s < kSplit; ++s)
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < Vectors; ++v) sum[s][r][v] = Isa::zero();
  typename Isa::Mask masks[Vectors];
#pragma GCC unroll 4
  for (int v = 0; v < Vectors; ++v) masks[v] = Isa::mask(valid_cols - v * kLanes);
  const float* a_q = a.data + i0 * a.row_stride;  // column q of A's rows, advancing with q
  const float* b_row = b.data + j0;               // row q of B, advancing with q
  const int64_t a_rs = a.row_stride, a_step = a.col_stride, b_step = b.row_stride;
  // One step of k into accumulator set `acc`.
  auto step = [&](V (&acc)[Rows][Vectors]) __attribute__((always_inline)) {
    V bv[Vectors];
#pragma GCC unroll 4
    for (int v = 0; v < Vectors; ++v)
      bv[v] = MaskedB ? Isa::masked_load(b_row + v * kLanes, masks[v]) : Isa::load(b_row + v * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const V av = Isa::broadcast(a_q + r * a_rs);
#pragma GCC unroll 4
      for (int v = 0; v < Vectors; ++v) acc[r][v] = Isa::fma(av, bv[v], acc[r][v]);
    }
    a_q += a_step;
    b_row += b_step;
  };
  int64_t q = 0;
  for (; q + kSplit <= k; q += kSplit)
#pragma GCC unroll 4
    for (int s = 0; s < kSplit; ++s) step(sum[s]);
  for (; q < k; ++q) step(sum[0]);
  if (sink.direct_d != nullptr) {
    const V alpha = Isa::set1(sink.alpha);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < Vectors; ++v) {
        V total = sum[0][r][v];
#pragma GCC unroll 4
        for (int s = 1; s < kSplit; ++s) total = Isa::add(total, sum[s][r][v]);
        float* out = sink.direct_d + (i0 + r) * sink.ldd + j0 + v * kLanes;
        if (MaskedB || valid_cols - v * kLanes < kLanes) {
          Isa::masked_store(out, masks[v], Isa::mul(alpha, total));
        } else {
          Isa::store(out, Isa::mul(alpha, total));
        }
      }
    return;
  }
  alignas(64) float tile[Rows * kTileStride];
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < Vectors; ++v) {
      V total = sum[0][r][v];
#pragma GCC unroll 4
      for (int s = 1; s < kSplit; ++s) total = Isa::add(total, sum[s][r][v]);
      Isa::store(tile + r * kTileStride + v * kLanes, total);
    }
  sink.finish(sink.epilogue, tile, Rows, i0, j0, std::min<int64_t>(valid_cols, Vectors * kLanes));
}

// A row of blocks: two vectors wide while the columns last, one vector for a narrow rest.
template <typename Isa, int Rows>
void row_block(const F32View& a, const F32View& b, bool b_padded, const arb_problem& p, int64_t i0,
               const BlockSink& sink) {
  constexpr int64_t kLanes = Isa::kLanes;
  int64_t j = 0;
  for (; j + 2 * kLanes <= p.n; j += 2 * kLanes) block<Isa, Rows, 2, false>(a, b, p.k, i0, j, 2 * kLanes, sink);
  const int64_t rest = p.n - j;
  if (rest == 0) return;
  // A packed panel holds zeros past n (and kPanel is a multiple of 2 * kLanes): plain loads.
  using Tail = typename Isa::Tail;  // a narrower vector for a narrow edge, if the ISA has one
  if (rest > kLanes) {
    if (b_padded) return block<Isa, Rows, 2, false>(a, b, p.k, i0, j, rest, sink);
    if (rest - kLanes > Tail::kLanes || Tail::kLanes == kLanes) return block<Isa, Rows, 2, true>(a, b, p.k, i0, j, rest, sink);
    // One full vector, then a narrow one: fewer idle lanes than a second wide vector.
    block<Isa, Rows, 1, false>(a, b, p.k, i0, j, kLanes, sink);
    j += kLanes;
    const int64_t edge = rest - kLanes;
    if (edge == Tail::kLanes) return block<Tail, Rows, 1, false>(a, b, p.k, i0, j, edge, sink);
    return block<Tail, Rows, 1, true>(a, b, p.k, i0, j, edge, sink);
  }
  if (b_padded || rest == kLanes) return block<Isa, Rows, 1, false>(a, b, p.k, i0, j, rest, sink);
  if (rest == Tail::kLanes) return block<Tail, Rows, 1, false>(a, b, p.k, i0, j, rest, sink);
  if (rest < Tail::kLanes) return block<Tail, Rows, 1, true>(a, b, p.k, i0, j, rest, sink);
  block<Isa, Rows, 1, true>(a, b, p.k, i0, j, rest, sink);
}

// The rows left after whole blocks: one instantiation per count, 1 .. Isa::kRows - 1.
template <typename Isa, int Rows>
void remaining_rows(int64_t rows, const F32View& a, const F32View& b, bool b_padded, const arb_problem& p, int64_t i0,
                    const BlockSink& sink) {
  if constexpr (Rows > 0) {
    if (rows == Rows) return row_block<Isa, Rows>(a, b, b_padded, p, i0, sink);
    remaining_rows<Isa, Rows - 1>(rows, a, b, b_padded, p, i0, sink);
  }
}

template <typename Isa>
void multiply(const F32View& a, const F32View& b, bool b_padded, const arb_problem& p, const BlockSink& sink) {
  int64_t i = 0;
  for (; i + Isa::kRows <= p.m; i += Isa::kRows) row_block<Isa, Isa::kRows>(a, b, b_padded, p, i, sink);
  remaining_rows<Isa, Isa::kRows - 1>(p.m - i, a, b, b_padded, p, i, sink);
}

// Transposes an 8 x 8 block of floats held in eight registers (row r in rows[r]).
inline void transpose8x8(__m256 rows[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(rows[0], rows[1]), t1 = _mm256_unpackhi_ps(rows[0], rows[1]);
  const __m256 t2 = _mm256_unpacklo_ps(rows[2], rows[3]), t3 = _mm256_unpackhi_ps(rows[2], rows[3]);
  const __m256 t4 = _mm256_unpacklo_ps(rows[4], rows[5]), t5 = _mm256_unpackhi_ps(rows[4], rows[5]);
  const __m256 t6 = _mm256_unpacklo_ps(rows[6], rows[7]), t7 = _mm256_unpackhi_ps(rows[6], rows[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  rows[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  rows[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  rows[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  rows[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  rows[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  rows[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  rows[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  rows[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// op(B) widened into a [k x kPanel] f32 panel, zeros past column n.
template <int32_t Dtype>
void pack_b(const arb_problem& p, const typename Lanes<Dtype>::Element* b, float* panel) {
  using L = Lanes<Dtype>;
  for (int64_t q = 0; q < p.k; ++q)
    for (int64_t j = p.n; j < kPanel; ++j) panel[q * kPanel + j] = 0.0f;
  if (!p.trans_b) {
    for (int64_t q = 0; q < p.k; ++q) {
      int64_t j = 0;
      for (; j + 8 <= p.n; j += 8) _mm256_storeu_ps(panel + q * kPanel + j, L::load(b + q * p.ldb + j));
      for (; j < p.n; ++j) panel[q * kPanel + j] = L::load1(b + q * p.ldb + j);
    }
  } else {  // stored [n][k]: 8 x 8 blocks transposed in registers, scalar edges
    const int64_t n8 = p.n / 8 * 8, k8 = p.k / 8 * 8;
    for (int64_t j = 0; j < n8; j += 8) {
      for (int64_t q = 0; q < k8; q += 8) {
        __m256 rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = L::load(b + (j + r) * p.ldb + q);
        transpose8x8(rows);
        for (int r = 0; r < 8; ++r) _mm256_storeu_ps(panel + (q + r) * kPanel + j, rows[r]);
      }
      for (int64_t q = k8; q < p.k; ++q)
        for (int64_t r = 0; r < 8; ++r) panel[q * kPanel + j + r] = L::load1(b + (j + r) * p.ldb + q);
    }
    for (int64_t j = n8; j < p.n; ++j)
      for (int64_t q = 0; q < p.k; ++q) panel[q * kPanel + j] = L::load1(b + j * p.ldb + q);
  }
}

// op(A) widened into an [m x k] f32 tile.
template <int32_t Dtype>
void pack_a(const arb_problem& p, const typename Lanes<Dtype>::Element* a, float* tile) {
  using L = Lanes<Dtype>;
  if (!p.trans_a) {
    for (int64_t i = 0; i < p.m; ++i) {
      int64_t q = 0;
      for (; q + 8 <= p.k; q += 8) _mm256_storeu_ps(tile + i * p.k + q, L::load(a + i * p.lda + q));
      for (; q < p.k; ++q) tile[i * p.k + q] = L::load1(a + i * p.lda + q);
    }
  } else {  // stored [k][m]
    for (int64_t q = 0; q < p.k; ++q)
      for (int64_t i = 0; i < p.m; ++i) tile[i * p.k + q] = L::load1(a + q * p.lda + i);
  }
}

// Decode-shaped products, m <= kDotRows with B stored [n][k] (weights [out, in]): every
// output is a dot product of two contiguous rows, so nothing is packed. Four columns at a
// time keep four independent sums in flight; the epilogue takes them eight lanes at a time.
constexpr int64_t kDotRows = 4;

template <int32_t Dtype>
void dot_rows(const arb_problem& p, const arb_operands& o, const Epilogue<Dtype>& epilogue) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const E* a = static_cast<const E*>(o.a);
  const E* b = static_cast<const E*>(o.b);
  const int64_t k8 = p.k / 8 * 8;
  // The dot products of row a_row with rows j .. j + Group - 1 of B, into sums.
  auto dots = [&]<int Group>(const E* a_row, int64_t j, float* sums) __attribute__((always_inline)) {
    __m256 acc[Group];
#pragma GCC unroll 4
    for (int g = 0; g < Group; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t q = 0; q < k8; q += 8) {
      const __m256 av = L::load(a_row + q);
#pragma GCC unroll 4
      for (int g = 0; g < Group; ++g) acc[g] = _mm256_fmadd_ps(av, L::load(b + (j + g) * p.ldb + q), acc[g]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < Group; ++g) {
      float s = horizontal_sum(acc[g]);
      for (int64_t q = k8; q < p.k; ++q) s += L::load1(a_row + q) * L::load1(b + (j + g) * p.ldb + q);
      sums[g] = s;
    }
  };
  alignas(32) float sums[8];
  for (int64_t i = 0; i < p.m; ++i) {
    const E* a_row = a + i * p.lda;
    for (int64_t j0 = 0; j0 < p.n; j0 += 8) {
      const int64_t count = std::min<int64_t>(8, p.n - j0);
      int64_t j = 0;
      for (; j + 4 <= count; j += 4) dots.template operator()<4>(a_row, j0 + j, sums + j);
      for (; j < count; ++j) dots.template operator()<1>(a_row, j0 + j, sums + j);
      epilogue.store8(i, j0, _mm256_load_ps(sums), count);
    }
  }
}

template <typename Isa, int32_t Dtype>
void gemm_small_typed(const arb_problem& p, const arb_operands& o) {
  using E = typename Lanes<Dtype>::Element;
  const Epilogue<Dtype> epilogue{p, static_cast<const E*>(o.c), static_cast<const E*>(o.bias), static_cast<E*>(o.d),
                                 o.alpha, o.beta};
  const bool plain = Dtype == ARB_DTYPE_F32 && !p.has_c && !p.has_bias && p.activation == ARB_ACT_NONE;
  const BlockSink sink{plain ? static_cast<float*>(o.d) : nullptr, p.ldd, o.alpha, &epilogue, &finish_tile<Dtype>};
  if (p.trans_b && !p.trans_a && p.m <= kDotRows) return dot_rows<Dtype>(p, o, epilogue);
  alignas(64) float b_panel[kMaxSize * kPanel];
  if constexpr (Dtype == ARB_DTYPE_F32) {
    const auto* a = static_cast<const float*>(o.a);
    const F32View a_view = p.trans_a ? F32View{a, 1, p.lda} : F32View{a, p.lda, 1};
    if (!p.trans_b) {
      multiply<Isa>(a_view, F32View{static_cast<const float*>(o.b), p.ldb, 1}, false, p, sink);
      return;
    }
    pack_b<Dtype>(p, static_cast<const E*>(o.b), b_panel);
    multiply<Isa>(a_view, F32View{b_panel, kPanel, 1}, true, p, sink);
  } else {
    alignas(64) float a_tile[kMaxSize * kMaxSize];
    pack_a<Dtype>(p, static_cast<const E*>(o.a), a_tile);
    pack_b<Dtype>(p, static_cast<const E*>(o.b), b_panel);
    multiply<Isa>(F32View{a_tile, p.k, 1}, F32View{b_panel, kPanel, 1}, true, p, sink);
  }
}

template <typename Isa>
void gemm_small_for(const arb_problem& p, const arb_operands& o) {
  switch (p.dtype) {
    case ARB_DTYPE_F32: return gemm_small_typed<Isa, ARB_DTYPE_F32>(p, o);
    case ARB_DTYPE_F16: return gemm_small_typed<Isa, ARB_DTYPE_F16>(p, o);
    case ARB_DTYPE_BF16: return gemm_small_typed<Isa, ARB_DTYPE_BF16>(p, o);
    default: return;
  }
}

}  // namespace
}  // namespace arbiter::cpu
