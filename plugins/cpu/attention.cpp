// Attention, AVX2: FlashAttention's online softmax over blocks of keys, one thread. Per batch
// and key/value head, the query rows that read the head (its group of query heads times
// q_len) are taken kRowBlock at a time; per block of kKeyBlock keys, K and V are widened to
// f32 once and shared by every row of the block (at decode, the 4 to 8 query heads of a group
// read each key once), each score is a dot product of 8-lane FMAs, and each row keeps its
// running maximum, its sum of exponentials and its f32 accumulator, rescaled when the maximum
// grows. Rows are ordered query-major, so a causal block of rows needs the keys its last row
// sees, and each row stops at its own last key.
#include "attention_rows.hpp"
#include "kernels.hpp"
#include "simd_avx2.hpp"

#include <algorithm>
#include <cmath>

namespace arbiter::cpu {
namespace {

constexpr int64_t kKeyBlock = 64;
constexpr int64_t kRowBlock = 16;

// head_dim rounded up to whole vectors: the widened rows are zero-padded to it, so that dot
// products and accumulations need no tails.
int64_t padded_dim(int64_t dim) { return (dim + 7) / 8 * 8; }

// A row of `dim` elements widened to f32 (times `scale`), zeros up to `padded`.
template <int32_t Dtype>
void widen(const typename Lanes<Dtype>::Element* from, int64_t dim, int64_t padded, float scale, float* to) {
  using L = Lanes<Dtype>;
  const __m256 s = _mm256_set1_ps(scale);
  int64_t d = 0;
  for (; d + 8 <= dim; d += 8) _mm256_storeu_ps(to + d, _mm256_mul_ps(L::load(from + d), s));
  for (; d < dim; ++d) to[d] = L::load1(from + d) * scale;
  for (; d < padded; ++d) to[d] = 0.0f;
}

float dot(const float* a, const float* b, int64_t padded) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 16 <= padded; d += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), s1);
  }
  if (d < padded) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), s0);
  return horizontal_sum(_mm256_add_ps(s0, s1));
}

// The workspace, in floats: K and V blocks, the rows' queries and accumulators, their scores,
// maxima and sums.
struct Scratch {
  float *keys, *values, *queries, *sums_of_values, *scores, *maxima, *sums;
  Scratch(float* w, int64_t padded) {
    keys = w;
    values = keys + kKeyBlock * padded;
    queries = values + kKeyBlock * padded;
    sums_of_values = queries + kRowBlock * padded;
    scores = sums_of_values + kRowBlock * padded;
    maxima = scores + kRowBlock * kKeyBlock;
    sums = maxima + kRowBlock;
  }
  static size_t floats(int64_t padded) {
    return static_cast<size_t>(2 * kKeyBlock * padded + 2 * kRowBlock * padded + kRowBlock * kKeyBlock + 2 * kRowBlock);
  }
};

// Scores of one query against `count` keys, four keys a pass: the query's vector is loaded
// once for four products, and the four sums reduced together.
void scores(const float* query, const float* keys, int64_t count, int64_t padded, float* score) {
  int64_t j = 0;
  for (; j + 4 <= count; j += 4) {
    const float* k = keys + j * padded;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t d = 0; d < padded; d += 8) {
      const __m256 q = _mm256_loadu_ps(query + d);
      s0 = _mm256_fmadd_ps(q, _mm256_loadu_ps(k + d), s0);
      s1 = _mm256_fmadd_ps(q, _mm256_loadu_ps(k + padded + d), s1);
      s2 = _mm256_fmadd_ps(q, _mm256_loadu_ps(k + 2 * padded + d), s2);
      s3 = _mm256_fmadd_ps(q, _mm256_loadu_ps(k + 3 * padded + d), s3);
    }
    // hadd twice: [s0 s1 s2 s3] partial sums in each 128-bit half; the halves added.
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
    _mm_storeu_ps(score + j, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
  for (; j < count; ++j) score[j] = dot(query, keys + j * padded, padded);
}

// acc[0, 8 kVectors) = acc * rescale + sum over keys of weight[j] * value[j], the accumulator
// held in registers across the keys.
template <int kVectors>
void accumulate(float* acc, const float* values, const float* weight, int64_t count, int64_t padded, float rescale) {
  __m256 a[kVectors];
  const __m256 r = _mm256_set1_ps(rescale);
  for (int c = 0; c < kVectors; ++c) a[c] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * c), r);
  for (int64_t j = 0; j < count; ++j) {
    const __m256 w = _mm256_set1_ps(weight[j]);
    const float* v = values + j * padded;
    for (int c = 0; c < kVectors; ++c) a[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * c), a[c]);
  }
  for (int c = 0; c < kVectors; ++c) _mm256_storeu_ps(acc + 8 * c, a[c]);
}

// The accumulator in chunks of 8 vectors (64 floats, half of AVX2's registers), then the rest.
void accumulate_row(float* acc, const float* values, const float* weight, int64_t count, int64_t padded, float rescale) {
  int64_t d = 0;
  for (; d + 64 <= padded; d += 64) accumulate<8>(acc + d, values + d, weight, count, padded, rescale);
  switch ((padded - d) / 8) {
    case 1: return accumulate<1>(acc + d, values + d, weight, count, padded, rescale);
    case 2: return accumulate<2>(acc + d, values + d, weight, count, padded, rescale);
    case 3: return accumulate<3>(acc + d, values + d, weight, count, padded, rescale);
    case 4: return accumulate<4>(acc + d, values + d, weight, count, padded, rescale);
    case 5: return accumulate<5>(acc + d, values + d, weight, count, padded, rescale);
    case 6: return accumulate<6>(acc + d, values + d, weight, count, padded, rescale);
    case 7: return accumulate<7>(acc + d, values + d, weight, count, padded, rescale);
    default: return;
  }
}

// One row's scores against `count` keys folded into its running state.
void fold_keys(const float* query, const Scratch& s, int64_t row, int64_t count, int64_t padded) {
  float* score = s.scores + row * kKeyBlock;
  scores(query, s.keys, count, padded, score);
  float block_max = -INFINITY;
  for (int64_t j = 0; j < count; ++j) block_max = std::max(block_max, score[j]);
  const float old_max = s.maxima[row];
  const float new_max = std::max(old_max, block_max);
  const float rescale = std::exp(old_max - new_max);  // 0 for the first block (old_max = -inf)
  const __m256 top = _mm256_set1_ps(new_max);
  __m256 total = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(score + j), top));
    _mm256_storeu_ps(score + j, e);
    total = _mm256_add_ps(total, e);
  }
  float sum = horizontal_sum(total);
  for (; j < count; ++j) sum += score[j] = exp1(score[j] - new_max);
  s.sums[row] = s.sums[row] * rescale + sum;
  s.maxima[row] = new_max;
  accumulate_row(s.sums_of_values + row * padded, s.values, score, count, padded, rescale);
}

template <int32_t Dtype>
void attention_typed(const arb_problem& p, const arb_operands& o, float* workspace) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const auto* q = static_cast<const E*>(o.q);
  const auto* k = static_cast<const E*>(o.k);
  const auto* v = static_cast<const E*>(o.v);
  auto* out = static_cast<E*>(o.o);
  const int64_t dim = p.cols, padded = padded_dim(dim);
  const int64_t group = p.heads / p.kv_heads, rows = group * p.q_len;
  const Scratch s(workspace, padded);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t g = 0; g < p.kv_heads; ++g)
      for (int64_t first = 0; first < rows; first += kRowBlock) {
        const int64_t count = std::min(kRowBlock, rows - first);
        const AttentionRows block_rows{p, group, g, first};
        for (int64_t r = 0; r < count; ++r) {
          const E* query = q + b * p.ld_q_batch + block_rows.query_of(r) * p.ld_q_token + block_rows.head_of(r) * p.ld_q_head;
          widen<Dtype>(query, dim, padded, o.alpha, s.queries + r * padded);
          s.maxima[r] = -INFINITY;
          s.sums[r] = 0.0f;
          std::fill(s.sums_of_values + r * padded, s.sums_of_values + (r + 1) * padded, 0.0f);
        }
        const int64_t keys = block_rows.seen(count - 1);  // the block's last row sees the most
        for (int64_t j0 = 0; j0 < keys; j0 += kKeyBlock) {
          const int64_t block = std::min(kKeyBlock, keys - j0);
          for (int64_t j = 0; j < block; ++j) {
            widen<Dtype>(k + b * p.ld_k_batch + (j0 + j) * p.ld_k_token + g * p.ld_k_head, dim, padded, 1.0f,
                         s.keys + j * padded);
            widen<Dtype>(v + b * p.ld_v_batch + (j0 + j) * p.ld_v_token + g * p.ld_v_head, dim, padded, 1.0f,
                         s.values + j * padded);
          }
          for (int64_t r = 0; r < count; ++r) {
            const int64_t mine = std::min(block, block_rows.seen(r) - j0);
            if (mine > 0) fold_keys(s.queries + r * padded, s, r, mine, padded);
          }
        }
        for (int64_t r = 0; r < count; ++r) {
          E* row = out + b * p.ld_o_batch + block_rows.query_of(r) * p.ld_o_token + block_rows.head_of(r) * p.ld_o_head;
          const float* acc = s.sums_of_values + r * padded;
          const __m256 inverse = _mm256_set1_ps(1.0f / s.sums[r]);
          int64_t d = 0;
          for (; d + 8 <= dim; d += 8) L::store(row + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), inverse));
          for (; d < dim; ++d) L::store1(row + d, acc[d] / s.sums[r]);
        }
      }
}

}  // namespace

size_t attention_workspace(const arb_problem& problem) {
  return Scratch::floats(padded_dim(problem.cols)) * sizeof(float);
}

void attention(const arb_problem& problem, const arb_operands& operands, void* workspace) {
  auto* w = static_cast<float*>(workspace);
  switch (problem.dtype) {
    case ARB_DTYPE_F32: return attention_typed<ARB_DTYPE_F32>(problem, operands, w);
    case ARB_DTYPE_F16: return attention_typed<ARB_DTYPE_F16>(problem, operands, w);
    default: return attention_typed<ARB_DTYPE_BF16>(problem, operands, w);
  }
}

}  // namespace arbiter::cpu
