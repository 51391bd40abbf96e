// The Llama MLP block fused, AVX2 + FMA + F16C, for decode sizes (rows up to kMlpFusedMaxRows):
// y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight. The rows' normalised
// activations n and their products h stay in f32 in the workspace (never rounded to the
// dtype, unlike the chain of single ops), and each weight row is read once per chunk of
// kWeightChunk rows, which stays in L2 while every block of four token rows passes over it:
// at decode the weights are nearly all the block's memory traffic, and they are read once.
#include "kernels.hpp"
#include "simd_avx2.hpp"

#include <algorithm>
#include <cmath>

namespace arbiter::cpu {
namespace {

constexpr int64_t kRowBlock = 4;      // token rows sharing each weight load
constexpr int64_t kWeightChunk = 16;  // weight rows kept in L2 across the row blocks

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

// For R rows of activations a (f32, row stride lda) and one weight row w (length k): the R
// dot products. Two accumulators a row keep both FMA pipes busy when R is small.
template <int32_t Dtype, int R>
inline void dots(const float* a, int64_t lda, const typename Lanes<Dtype>::Element* w, int64_t k, float* out) {
  using L = Lanes<Dtype>;
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) {
    const __m256 w0 = L::load(w + c), w1 = L::load(w + c + 8);
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(a + r * lda + c), w0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(a + r * lda + c + 8), w1, acc1[r]);
    }
  }
  for (; c + 8 <= k; c += 8) {
    const __m256 w0 = L::load(w + c);
    for (int r = 0; r < R; ++r) acc0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(a + r * lda + c), w0, acc0[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = horizontal_sum(_mm256_add_ps(acc0[r], acc1[r]));
    for (int64_t t = c; t < k; ++t) s += a[r * lda + t] * L::load1(w + t);
    out[r] = s;
  }
}

// h[r][j] = silu(gate_j . n_r) * (up_j . n_r) for R rows from `row` and weight rows [j0, j1).
template <int32_t Dtype, int R>
void activation_block(const arb_problem& p, const arb_operands& o, const float* n, float* h, int64_t row, int64_t j0,
                      int64_t j1) {
  using E = typename Lanes<Dtype>::Element;
  const auto* gate = static_cast<const E*>(o.gate);
  const auto* up = static_cast<const E*>(o.up);
  for (int64_t j = j0; j < j1; ++j) {
    float g[R], u[R];
    dots<Dtype, R>(n + row * p.cols, p.cols, gate + j * p.ld_gate, p.cols, g);
    dots<Dtype, R>(n + row * p.cols, p.cols, up + j * p.ld_up, p.cols, u);
    for (int r = 0; r < R; ++r) h[(row + r) * p.inter + j] = activate1(ARB_ACT_SILU, g[r]) * u[r];
  }
}

// y[r][c] = x[r][c] + down_c . h_r for R rows from `row` and output columns [c0, c1).
template <int32_t Dtype, int R>
void output_block(const arb_problem& p, const arb_operands& o, const float* h, int64_t row, int64_t c0, int64_t c1) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const auto* down = static_cast<const E*>(o.down);
  const auto* x = static_cast<const E*>(o.x);
  auto* y = static_cast<E*>(o.y);
  for (int64_t c = c0; c < c1; ++c) {
    float s[R];
    dots<Dtype, R>(h + row * p.inter, p.inter, down + c * p.ld_down, p.inter, s);
    for (int r = 0; r < R; ++r) L::store1(y + (row + r) * p.ld_y + c, L::load1(x + (row + r) * p.ld_x + c) + s[r]);
  }
}

// Every block of rows (four, then the remainder) over one chunk of weight rows.
template <int32_t Dtype, template <int32_t, int> class Step, typename... Args>
void over_rows(int64_t rows, Args&&... args) {
  int64_t r = 0;
  for (; r + kRowBlock <= rows; r += kRowBlock) Step<Dtype, kRowBlock>::run(r, args...);
  switch (rows - r) {
    case 3: Step<Dtype, 3>::run(r, args...); break;
    case 2: Step<Dtype, 2>::run(r, args...); break;
    case 1: Step<Dtype, 1>::run(r, args...); break;
    default: break;
  }
}
template <int32_t Dtype, int R>
struct ActivationStep {
  static void run(int64_t row, const arb_problem& p, const arb_operands& o, const float* n, float* h, int64_t j0,
                  int64_t j1) {
    activation_block<Dtype, R>(p, o, n, h, row, j0, j1);
  }
};
template <int32_t Dtype, int R>
struct OutputStep {
  static void run(int64_t row, const arb_problem& p, const arb_operands& o, const float* h, int64_t c0, int64_t c1) {
    output_block<Dtype, R>(p, o, h, row, c0, c1);
  }
};

template <int32_t Dtype>
void mlp_rows(const arb_problem& p, const arb_operands& o, void* workspace) {
  using E = typename Lanes<Dtype>::Element;
  float* n = static_cast<float*>(workspace);  // rows x cols
  float* h = n + p.rows * p.cols;             // rows x inter
  for (int64_t r = 0; r < p.rows; ++r)
    normalise_row<Dtype>(static_cast<const E*>(o.x) + r * p.ld_x, static_cast<const E*>(o.weight), p.cols, o.eps,
                         n + r * p.cols);
  for (int64_t j = 0; j < p.inter; j += kWeightChunk)
    over_rows<Dtype, ActivationStep>(p.rows, p, o, n, h, j, std::min(j + kWeightChunk, p.inter));
  for (int64_t c = 0; c < p.cols; c += kWeightChunk)
    over_rows<Dtype, OutputStep>(p.rows, p, o, h, c, std::min(c + kWeightChunk, p.cols));
}

}  // namespace

size_t mlp_fused_workspace(const arb_problem& p) {
  return static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols + p.inter) * sizeof(float);
}

void mlp_fused(const arb_problem& p, const arb_operands& o, void* workspace) {
  switch (p.dtype) {
    case ARB_DTYPE_F32: return mlp_rows<ARB_DTYPE_F32>(p, o, workspace);
    case ARB_DTYPE_F16: return mlp_rows<ARB_DTYPE_F16>(p, o, workspace);
    case ARB_DTYPE_BF16: return mlp_rows<ARB_DTYPE_BF16>(p, o, workspace);
    default: return;
  }
}

}  // namespace arbiter::cpu
