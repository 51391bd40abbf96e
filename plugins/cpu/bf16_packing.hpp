// Packing and the epilogue for the bf16 GEMMs (gemm_bf16_avx512.cpp, gemm_bf16_amx.cpp): both read A as bf16
// rows and B as "VNNI" pairs, the layout of vdpbf16ps's and tdpbf16ps's B operand. Internal
// linkage: each kernel file compiles it for its own ISA (AVX-512BW at least).
//  - A: [mp][kp] bf16 rows, zeros past m and past k (kp even), so that a 32-bit word is a row's
//    pair (a[i][2q], a[i][2q + 1]);
//  - B: [kp / 2][np] 32-bit words, word (q2, j) = (b[2 q2][j], b[2 q2 + 1][j]) with row 2 q2 in
//    the low half, zeros past n and past k (np a multiple of 32).
#pragma once

#include "gemm_small_impl.hpp"

#include <arbiter/plugin.h>
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

namespace arbiter::cpu {
namespace {

inline int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// op(A) into [mp][kp] rows, zeros past m and past k.
inline void pack_a(const arb_problem& p, const uint16_t* a, uint16_t* out, int64_t mp, int64_t kp) {
  for (int64_t i = 0; i < p.m; ++i) {
    uint16_t* row = out + i * kp;
    if (!p.trans_a) {
      std::memcpy(row, a + i * p.lda, static_cast<size_t>(p.k) * 2);
    } else {  // stored [k][m]
      for (int64_t q = 0; q < p.k; ++q) row[q] = a[q * p.lda + i];
    }
    std::memset(row + p.k, 0, static_cast<size_t>(kp - p.k) * 2);
  }
  std::memset(out + p.m * kp, 0, static_cast<size_t>((mp - p.m) * kp) * 2);
}

// op(B) into VNNI pairs: out[q2 * np + j] = (b[2 q2][j], b[2 q2 + 1][j]).
inline void pack_b(const arb_problem& p, const uint16_t* b, uint32_t* out, int64_t kp, int64_t np) {
  const int64_t pairs = kp / 2, whole_pairs = p.k / 2;
  if (!p.trans_b) {
    // Two rows of 32 columns interleaved by one two-source permute per 16 pairs.
    const __m512i low = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5,
                                         36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
    for (int64_t q2 = 0; q2 < pairs; ++q2) {
      uint32_t* dst = out + q2 * np;
      if (2 * q2 >= p.k) {  // padding past k
        std::memset(dst, 0, static_cast<size_t>(np) * 4);
        continue;
      }
      const uint16_t* r0 = b + 2 * q2 * p.ldb;
      const uint16_t* r1 = 2 * q2 + 1 < p.k ? r0 + p.ldb : nullptr;  // an odd k's last pair: zero
      for (int64_t j = 0; j < np; j += 32) {
        const int64_t valid = std::max<int64_t>(0, std::min<int64_t>(32, p.n - j));
        const __mmask32 mask = valid >= 32 ? ~__mmask32(0) : static_cast<__mmask32>((uint64_t(1) << valid) - 1);
        const __m512i x0 = _mm512_maskz_loadu_epi16(mask, r0 + j);
        const __m512i x1 = r1 ? _mm512_maskz_loadu_epi16(mask, r1 + j) : _mm512_setzero_si512();
        _mm512_storeu_si512(dst + j, _mm512_permutex2var_epi16(x0, low, x1));
        _mm512_storeu_si512(dst + j + 16, _mm512_permutex2var_epi16(x0, high, x1));
      }
    }
    return;
  }
  // Stored [n][k]: a column's pair is one 32-bit word of its row; 16 rows gathered at a time.
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t j = 0; j < np; j += 16) {
    const int64_t valid = std::max<int64_t>(0, std::min<int64_t>(16, p.n - j));
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1u);
    // Byte offsets of rows j .. j + 15 (ldb * 2 bytes apart) fit 32 bits: the kernel refuses
    // matrices whose rows lie 2 GiB apart.
    const __m512i rows = _mm512_mullo_epi32(_mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int>(j))),
                                            _mm512_set1_epi32(static_cast<int>(p.ldb * 2)));
    for (int64_t q2 = 0; q2 < whole_pairs; ++q2) {
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, rows, b + 2 * q2, 1);
      _mm512_storeu_si512(out + q2 * np + j, words);
    }
    int64_t q2 = whole_pairs;
    if (p.k % 2 != 0) {  // odd k: the last element of each row, paired with zero
      for (int64_t c = 0; c < 16; ++c) out[q2 * np + j + c] = c < valid ? b[(j + c) * p.ldb + p.k - 1] : 0u;
      ++q2;
    }
    for (; q2 < pairs; ++q2) _mm512_storeu_si512(out + q2 * np + j, _mm512_setzero_si512());  // padding past k
  }
}

// The epilogue of a block of sums for a bf16 output without an activation (gemm_small's
// Epilogue, 16 lanes at a time with AVX-512 masks): alpha * sum, + beta * C, + bias, rounded to
// nearest even as gemm_small rounds (a NaN stays a quiet NaN). With an activation: gemm_small's.
// The zero-masked forms of the intrinsics throughout: for the plain ones GCC 12 warns that its
// own header reads an uninitialised register (-Wmaybe-uninitialized).
inline void finish_bf16_tile(const Epilogue<ARB_DTYPE_BF16>& e, const float* sums, int rows, int64_t i0, int64_t j0,
                             int64_t valid_cols) {
  const arb_problem& p = e.p;
  if (p.activation != ARB_ACT_NONE) return finish_tile<ARB_DTYPE_BF16>(&e, sums, rows, i0, j0, valid_cols);
  auto widen = [](__m256i bits) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, bits), 16));
  };
  const __m512 alpha = _mm512_set1_ps(e.alpha), beta = _mm512_set1_ps(e.beta);
  for (int r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    for (int64_t j = 0; j < valid_cols; j += 16) {
      const int64_t count = std::min<int64_t>(16, valid_cols - j);
      const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1u);
      __m512 v = _mm512_mul_ps(alpha, _mm512_loadu_ps(sums + r * kTileStride + j));
      if (p.has_c) v = _mm512_fmadd_ps(beta, widen(_mm256_maskz_loadu_epi16(mask, e.c + i * p.ldc + j0 + j)), v);
      if (p.has_bias) v = _mm512_add_ps(v, widen(_mm256_maskz_loadu_epi16(mask, e.bias + j0 + j)));
      const __m512i x = _mm512_castps_si512(v);
      const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(0xffff, x, 16), _mm512_set1_epi32(1));
      __m512i bits = _mm512_maskz_srli_epi32(0xffff, _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                                     _mm512_set1_epi32(0x7f800000));
      bits = _mm512_mask_mov_epi32(bits, nan, _mm512_or_si512(_mm512_maskz_srli_epi32(0xffff, x, 16), _mm512_set1_epi32(0x40)));
      _mm256_mask_storeu_epi16(e.d + i * p.ldd + j0 + j, mask, _mm512_maskz_cvtepi32_epi16(0xffff, bits));
    }
  }
}

}  // namespace
}  // namespace arbiter::cpu
