// The Llama MLP block fused, AVX2 + FMA + F16C, for decode sizes (rows up to kMlpFusedMaxRows):
// y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight. The rows' normalised
// activations n and their products h stay in f32 in the workspace (never rounded to the
// dtype, unlike the chain of single ops), and each weight row is read once per chunk of
// kWeightChunk rows, which stays in L2 while every block of four token rows passes over it:
// at decode the weights are nearly all the block's memory traffic, and they are read once.
// Inside a block, a gate row and its up row (two pairs for one or two token rows) share each
// load of the activations, which share each load of a weight vector.
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

// Weight rows a dots() pass takes for R token rows: as many as keep W R at 8 or below.
template <int R>
inline constexpr int kPairs = R <= 2 ? 2 : 1;  // gate/up pairs of the activation step
template <int R>
inline constexpr int kDownRows = R <= 2 ? 4 : 2;  // rows of down in the output step

// h[r][j] = silu(gate_j . n_r) * (up_j . n_r) for R rows from `row` and weight rows [j0, j1),
// the gate and up rows of P intermediates a pass.
template <int32_t Dtype, int R, int P>
void activations(const arb_problem& p, const arb_operands& o, const float* n, float* h, int64_t row, int64_t j) {
  using E = typename Lanes<Dtype>::Element;
  const E* w[2 * P];
  for (int q = 0; q < P; ++q) {
    w[2 * q] = static_cast<const E*>(o.gate) + (j + q) * p.ld_gate;
    w[2 * q + 1] = static_cast<const E*>(o.up) + (j + q) * p.ld_up;
  }
  float out[2 * P][R];
  dots<Dtype, R, 2 * P>(n + row * p.cols, p.cols, w, p.cols, out);
  for (int q = 0; q < P; ++q)
    for (int r = 0; r < R; ++r) h[(row + r) * p.inter + j + q] = activate1(ARB_ACT_SILU, out[2 * q][r]) * out[2 * q + 1][r];
}
template <int32_t Dtype, int R>
void activation_block(const arb_problem& p, const arb_operands& o, const float* n, float* h, int64_t row, int64_t j0,
                      int64_t j1) {
  constexpr int P = kPairs<R>;
  int64_t j = j0;
  for (; j + P <= j1; j += P) activations<Dtype, R, P>(p, o, n, h, row, j);
  for (; j < j1; ++j) activations<Dtype, R, 1>(p, o, n, h, row, j);
}

// y[r][c] = x[r][c] + down_c . h_r for R rows from `row` and D output columns from c.
template <int32_t Dtype, int R, int D>
void outputs(const arb_problem& p, const arb_operands& o, const float* h, int64_t row, int64_t c) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const E* w[D];
  for (int d = 0; d < D; ++d) w[d] = static_cast<const E*>(o.down) + (c + d) * p.ld_down;
  float s[D][R];
  dots<Dtype, R, D>(h + row * p.inter, p.inter, w, p.inter, s);
  const auto* x = static_cast<const E*>(o.x);
  auto* y = static_cast<E*>(o.y);
  for (int d = 0; d < D; ++d)
    for (int r = 0; r < R; ++r)
      L::store1(y + (row + r) * p.ld_y + c + d, L::load1(x + (row + r) * p.ld_x + c + d) + s[d][r]);
}
template <int32_t Dtype, int R>
void output_block(const arb_problem& p, const arb_operands& o, const float* h, int64_t row, int64_t c0, int64_t c1) {
  constexpr int D = kDownRows<R>;
  int64_t c = c0;
  for (; c + D <= c1; c += D) outputs<Dtype, R, D>(p, o, h, row, c);
  for (; c < c1; ++c) outputs<Dtype, R, 1>(p, o, h, row, c);
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
