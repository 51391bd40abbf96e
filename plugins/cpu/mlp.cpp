// The Llama MLP block fused, AVX2 + FMA + F16C, for decode sizes (rows up to kMlpFusedMaxRows):
// y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight. The rows' normalised
// activations n and their products h stay in f32 in the workspace (never rounded to the
// dtype, unlike the chain of single ops), and each weight row is read once per chunk of
// kWeightChunk rows, which stays in L2 while every block of four token rows passes over it:
// at decode the weights are nearly all the block's memory traffic, and they are read once.
// Inside a block, a gate row and its up row (two pairs for one or two token rows) share each
// load of the activations, which share each load of a weight vector. The norm, the weight
// chunks and the down projection are projection_avx2.hpp's, shared with qkv.cpp.
#include "kernels.hpp"
#include "projection_avx2.hpp"

#include <algorithm>

namespace arbiter::cpu {
namespace {

// Gate/up pairs an activation pass takes for R token rows: 2 P R accumulators, at most 8.
template <int R>
inline constexpr int kPairs = R <= 2 ? 2 : 1;

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

template <int32_t Dtype>
void mlp_rows(const arb_problem& p, const arb_operands& o, void* workspace) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  float* n = static_cast<float*>(workspace);  // rows x cols
  float* h = n + p.rows * p.cols;             // rows x inter
  normalise_rows<Dtype>(p, o, n);
  over_weight_chunks(p.rows, p.inter, [&](auto block, int64_t row, int64_t j0, int64_t j1) {
    activation_block<Dtype, decltype(block)::value>(p, o, n, h, row, j0, j1);
  });
  // y[r][c] = x[r][c] + down_c . h_r.
  const auto* x = static_cast<const E*>(o.x);
  auto* y = static_cast<E*>(o.y);
  project_rows<Dtype>(p.rows, h, p.inter, p.inter, static_cast<const E*>(o.down), p.ld_down, p.cols,
                      [&](int64_t r, int64_t c, float s) {
                        L::store1(y + r * p.ld_y + c, L::load1(x + r * p.ld_x + c) + s);
                      });
}

}  // namespace

size_t mlp_fused_workspace(const arb_problem& p) {
  return static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols + p.inter) * sizeof(float);
}

void mlp_fused(const arb_problem& p, const arb_operands& o, void* workspace) {
  on_dtype(p.dtype, [&](auto dtype) { mlp_rows<decltype(dtype)::value>(p, o, workspace); });
}

}  // namespace arbiter::cpu
