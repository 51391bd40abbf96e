// Attention for bf16 with AVX512-BF16 (vdpbf16ps), one thread: the online softmax of
// attention.cpp (blocks of 64 keys, the query rows of a key/value head's group taken 16 at a
// time) without widening anything to f32 in memory:
//   - a score is a dot product of bf16 pairs straight from the rows of Q and K: per 32 elements
//     of head_dim one vdpbf16ps (16 lanes of pair products summed in f32), and 16 keys' lanes
//     summed together by a tree of in-register shuffles;
//   - P V takes the weights rounded to bf16 in pairs of keys, (p_j, p_j+1) broadcast, against
//     V's rows j and j + 1 interleaved element by element (vpunpck{l,h}wd, done once a block for
//     every row of the group): one vdpbf16ps per 16 outputs and two keys. The interleave leaves
//     the accumulators' lanes in the unpack order (d 0-3, 8-11, ... and 4-7, 12-15, ...), put
//     back in order once per row at the end.
// Rounding P to bf16 is what FlashAttention does on GPUs; the sum of exponentials stays f32. As
// there, a row whose visible keys end at an odd count takes the next key's V row in its last
// pair with weight 0: an infinite value there makes the row's output NaN (0 x inf).
// head_dim up to 256 (its pairs and accumulators in registers).
#include "attention_rows.hpp"
#include "kernels.hpp"
#include "simd_avx512.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace arbiter::cpu {
namespace {

constexpr int64_t kKeyBlock = 64;
constexpr int64_t kRowBlock = 16;
constexpr int kMaxChunks = kAttentionBf16MaxDim / 32;  // 32 bf16 elements of head_dim a chunk
constexpr __mmask32 kAll32 = 0xffffffffu;

__m512bh as_bh(__m512i v) { return (__m512bh)v; }

// Lane i of the result: the sum of the 16 lanes of v[i].
__attribute__((always_inline)) inline __m512 sum_lanes16(__m512 (&v)[16]) {
  // Each step halves the vectors: a and b become one vector holding, per half of its lanes,
  // a's and b's lanes folded in two (256-bit halves, then 128, 64 and 32).
  for (int i = 0; i < 8; ++i) {  // [a.lo + a.hi | b.lo + b.hi], 256-bit halves
    const __m512 lo = _mm512_maskz_shuffle_f32x4(kAll, v[2 * i], v[2 * i + 1], 0x44);  // a.lo, b.lo
    const __m512 hi = _mm512_maskz_shuffle_f32x4(kAll, v[2 * i], v[2 * i + 1], 0xee);  // a.hi, b.hi
    v[i] = _mm512_add_ps(lo, hi);
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit quarters
    const __m512 lo = _mm512_maskz_shuffle_f32x4(kAll, v[2 * i], v[2 * i + 1], 0x88);  // a.q0 a.q2 b.q0 b.q2
    const __m512 hi = _mm512_maskz_shuffle_f32x4(kAll, v[2 * i], v[2 * i + 1], 0xdd);  // a.q1 a.q3 b.q1 b.q3
    v[i] = _mm512_add_ps(lo, hi);
  }
  for (int i = 0; i < 2; ++i) {  // pairs of floats within 128-bit lanes
    const __m512 lo = _mm512_maskz_shuffle_ps(kAll, v[2 * i], v[2 * i + 1], 0x44);  // a0 a1 b0 b1
    const __m512 hi = _mm512_maskz_shuffle_ps(kAll, v[2 * i], v[2 * i + 1], 0xee);  // a2 a3 b2 b3
    v[i] = _mm512_add_ps(lo, hi);
  }
  const __m512 lo = _mm512_maskz_shuffle_ps(kAll, v[0], v[1], 0x88);  // a0 a2 b0 b2
  const __m512 hi = _mm512_maskz_shuffle_ps(kAll, v[0], v[1], 0xdd);  // a1 a3 b1 b3
  return _mm512_add_ps(lo, hi);
}
// sum_lanes16 leaves the sum of v[m + 4 e] in lane 4 m + e (m, e < 4), a transpose, its own
// inverse: key i's products go into v[kKeySlot[i]] so that its sum lands in lane i.
constexpr int kKeySlot[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

// A chunk's accumulators lo (d 0-3, 8-11, 16-19, 24-27) and hi (the rest) back in d order: the
// lanes of lo (0-15) and hi (16-31) that make its first and its second 16 elements. Arrays,
// loaded where used: a vector constant at namespace scope would be built by a static
// initializer, AVX-512 code run when the plugin loads on any CPU.
alignas(64) constexpr int32_t kFirstHalf[16] = {0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23};
alignas(64) constexpr int32_t kSecondHalf[16] = {8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
__m512i lanes(const int32_t (&order)[16]) { return _mm512_load_si512(order); }

__mmask32 chunk_mask(int64_t dim, int c) {
  const int64_t left = dim - 32 * c;
  return left >= 32 ? kAll32 : static_cast<__mmask32>((uint64_t{1} << left) - 1);
}

// The workspace: V's block as interleaved pairs of rows, then each row's accumulators (f32,
// in the unpack order), maximum and sum.
struct Scratch {
  __m512i* value_pairs;  // [kKeyBlock / 2][kChunks][2]
  __m512* sums_of_values;  // [kRowBlock][kChunks][2]
  float* maxima;
  float* sums;
  Scratch(void* w, int chunks) {
    value_pairs = static_cast<__m512i*>(w);
    sums_of_values = reinterpret_cast<__m512*>(value_pairs + kKeyBlock / 2 * chunks * 2);
    maxima = reinterpret_cast<float*>(sums_of_values + kRowBlock * chunks * 2);
    sums = maxima + kRowBlock;
  }
  static size_t bytes(int chunks) {
    return static_cast<size_t>(kKeyBlock / 2 * chunks * 2 + kRowBlock * chunks * 2) * 64 + 2 * kRowBlock * sizeof(float);
  }
};

template <int kChunks>
void attention_chunks(const arb_problem& p, const arb_operands& o, void* workspace) {
  const auto* q = static_cast<const uint16_t*>(o.q);
  const auto* k = static_cast<const uint16_t*>(o.k);
  const auto* v = static_cast<const uint16_t*>(o.v);
  auto* out = static_cast<uint16_t*>(o.o);
  const int64_t dim = p.cols, group = p.heads / p.kv_heads, rows = group * p.q_len;
  const Scratch s(workspace, kChunks);
  const __m512i first_half = lanes(kFirstHalf), second_half = lanes(kSecondHalf);
  __mmask32 mask[kChunks];
  for (int c = 0; c < kChunks; ++c) mask[c] = chunk_mask(dim, c);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t g = 0; g < p.kv_heads; ++g)
      for (int64_t first = 0; first < rows; first += kRowBlock) {
        const int64_t count = std::min(kRowBlock, rows - first);
        const AttentionRows block_rows{p, group, g, first};
        for (int64_t r = 0; r < count; ++r) {
          s.maxima[r] = -INFINITY;
          s.sums[r] = 0.0f;
          for (int c = 0; c < 2 * kChunks; ++c) s.sums_of_values[r * 2 * kChunks + c] = _mm512_setzero_ps();
        }
        const uint16_t* kb = k + b * p.ld_k_batch + g * p.ld_k_head;
        const uint16_t* vb = v + b * p.ld_v_batch + g * p.ld_v_head;
        const int64_t keys = block_rows.seen(count - 1);  // the block's last row sees the most
        for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
          const int64_t block = std::min(kKeyBlock, keys - j0);
          // V's rows j, j + 1 interleaved (a row past the block: zeros, weighed 0).
          for (int64_t t = 0; 2 * t < block; ++t) {
            const uint16_t* even = vb + (j0 + 2 * t) * p.ld_v_token;
            const uint16_t* odd = even + p.ld_v_token;
            const bool has_odd = 2 * t + 1 < block;
            for (int c = 0; c < kChunks; ++c) {
              const __m512i a = _mm512_maskz_loadu_epi16(mask[c], even + 32 * c);
              const __m512i z = has_odd ? _mm512_maskz_loadu_epi16(mask[c], odd + 32 * c) : _mm512_setzero_si512();
              s.value_pairs[(t * kChunks + c) * 2] = _mm512_maskz_unpacklo_epi16(kAll32, a, z);
              s.value_pairs[(t * kChunks + c) * 2 + 1] = _mm512_maskz_unpackhi_epi16(kAll32, a, z);
            }
          }
          for (int64_t r = 0; r < count; ++r) {
            const int64_t mine = std::min(block, block_rows.seen(r) - j0);
            if (mine <= 0) continue;
            const uint16_t* qr =
                q + b * p.ld_q_batch + block_rows.query_of(r) * p.ld_q_token + block_rows.head_of(r) * p.ld_q_head;
            __m512i query[kChunks];
            for (int c = 0; c < kChunks; ++c) query[c] = _mm512_maskz_loadu_epi16(mask[c], qr + 32 * c);
            // Scores, 16 keys at a time: lanes past `mine` are -inf (weight 0).
            alignas(64) float score[kKeyBlock];
            __m512 block_max = _mm512_set1_ps(-INFINITY);
            for (int64_t j = 0; j < mine; j += 16) {
              const int64_t n = std::min<int64_t>(16, mine - j);
              __m512 dot[16];
              for (__m512& d : dot) d = _mm512_setzero_ps();
              for (int i = 0; i < 16; ++i) {
                if (i >= n) continue;
                const uint16_t* kr = kb + (j0 + j + i) * p.ld_k_token;
                __m512& d = dot[kKeySlot[i]];
                for (int c = 0; c < kChunks; ++c)
                  d = _mm512_dpbf16_ps(d, as_bh(query[c]), as_bh(_mm512_maskz_loadu_epi16(mask[c], kr + 32 * c)));
              }
              const __m512 sums = sum_lanes16(dot);  // key i in lane i
              const __mmask16 live = static_cast<__mmask16>((1u << n) - 1u);
              const __m512 scaled = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), live, sums, _mm512_set1_ps(o.alpha));
              _mm512_store_ps(score + j, scaled);
              block_max = _mm512_maskz_max_ps(kAll, block_max, scaled);
            }
            float most = -INFINITY;
            alignas(64) float lanes[16];
            _mm512_store_ps(lanes, block_max);
            for (float x : lanes) most = std::max(most, x);
            const float new_max = std::max(s.maxima[r], most);
            const float rescale = std::exp(s.maxima[r] - new_max);  // 0 for the first block (old max -inf)
            s.maxima[r] = new_max;
            // Weights: e^(score - max), f32 for the sum, bf16 pairs for P V.
            alignas(64) uint32_t pairs[kKeyBlock / 2];
            __m512 total = _mm512_setzero_ps();
            for (int64_t j = 0; j < mine; j += 16) {
              const int64_t n = std::min<int64_t>(16, mine - j);
              const __mmask16 live = static_cast<__mmask16>((1u << n) - 1u);
              const __m512 shifted = _mm512_sub_ps(_mm512_load_ps(score + j), _mm512_set1_ps(new_max));
              const __m512 e = _mm512_maskz_mov_ps(live, exp16(shifted));
              total = _mm512_add_ps(total, e);
              const __m256bh packed = _mm512_cvtneps_pbh(e);
              std::memcpy(pairs + j / 2, &packed, sizeof packed);
            }
            alignas(64) float partial[16];
            _mm512_store_ps(partial, total);
            float sum = 0.0f;
            for (float x : partial) sum += x;
            s.sums[r] = s.sums[r] * rescale + sum;
            __m512 acc[2 * kChunks];
            __m512* kept = s.sums_of_values + r * 2 * kChunks;
            const __m512 factor = _mm512_set1_ps(rescale);
            for (int c = 0; c < 2 * kChunks; ++c) acc[c] = _mm512_mul_ps(kept[c], factor);
            for (int64_t t = 0; 2 * t < mine; ++t) {
              const __m512bh w = as_bh(_mm512_set1_epi32(static_cast<int>(pairs[t])));
              for (int c = 0; c < 2 * kChunks; ++c)
                acc[c] = _mm512_dpbf16_ps(acc[c], as_bh(s.value_pairs[t * 2 * kChunks + c]), w);
            }
            for (int c = 0; c < 2 * kChunks; ++c) kept[c] = acc[c];
          }
        }
        for (int64_t r = 0; r < count; ++r) {
          uint16_t* row =
              out + b * p.ld_o_batch + block_rows.query_of(r) * p.ld_o_token + block_rows.head_of(r) * p.ld_o_head;
          const __m512 inverse = _mm512_set1_ps(1.0f / s.sums[r]);
          const __m512* acc = s.sums_of_values + r * 2 * kChunks;
          for (int c = 0; c < kChunks; ++c) {
            const __m512 first16 = _mm512_maskz_permutex2var_ps(kAll, acc[2 * c], first_half, acc[2 * c + 1]);
            const __m512 second16 = _mm512_maskz_permutex2var_ps(kAll, acc[2 * c], second_half, acc[2 * c + 1]);
            const __m512bh both = _mm512_maskz_cvtne2ps_pbh(kAll32, _mm512_mul_ps(second16, inverse),
                                                           _mm512_mul_ps(first16, inverse));
            _mm512_mask_storeu_epi16(row + 32 * c, mask[c], (__m512i)both);
          }
        }
      }
}

}  // namespace

size_t attention_avx512_bf16_workspace(const arb_problem& problem) {
  return Scratch::bytes(static_cast<int>((problem.cols + 31) / 32)) + 64;  // + 64: aligned at the launch
}

void attention_avx512_bf16(const arb_problem& problem, const arb_operands& operands, void* workspace) {
  // The workspace's start rounded up to 64 bytes (zmm loads and stores of it are aligned).
  void* w = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(workspace) + 63) & ~uintptr_t{63});
  switch ((problem.cols + 31) / 32) {
    case 1: return attention_chunks<1>(problem, operands, w);
    case 2: return attention_chunks<2>(problem, operands, w);
    case 3: return attention_chunks<3>(problem, operands, w);
    case 4: return attention_chunks<4>(problem, operands, w);
    case 5: return attention_chunks<5>(problem, operands, w);
    case 6: return attention_chunks<6>(problem, operands, w);
    case 7: return attention_chunks<7>(problem, operands, w);
    default: return attention_chunks<kMaxChunks>(problem, operands, w);
  }
}

}  // namespace arbiter::cpu
