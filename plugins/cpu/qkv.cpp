// The input of a Llama attention block fused, AVX2 + FMA + F16C, for decode sizes (rows up to
// kQkvFusedMaxRows): n = rmsnorm(x) * weight, the fused QKV projection n W^T, then rope on its
// q and k heads. The rows' normalised activations n and their projections stay in f32 in the
// workspace (never rounded to the dtype, unlike the chain of single ops, which rounds n, the
// projection and each turn); y is rounded once. The norm and the projection are
// projection_avx2.hpp's, as mlp.cpp's: each row of W is read once per chunk of weight rows that
// stays in L2 while every block of token rows passes over it. The turn is rope_avx2.hpp's, as
// cpu.rope's, on the f32 projections: per call, the inverse frequencies of a block of pairs;
// per token, their cos and sin, applied to every q and k head.
#include "kernels.hpp"
#include "projection_avx2.hpp"
#include "rope_avx2.hpp"

namespace arbiter::cpu {
namespace {

// y's columns: q's heads, then k's and v's, head_dim each.
int64_t projected_cols(const arb_problem& p) { return (p.heads + 2 * p.kv_heads) * p.head_dim; }

template <int32_t Dtype>
void qkv_rows(const arb_problem& p, const arb_operands& o, void* workspace) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const int64_t out = projected_cols(p);
  float* n = static_cast<float*>(workspace);  // rows x cols
  float* projected = n + p.rows * p.cols;     // rows x out
  normalise_rows<Dtype>(p, o, n);
  project_rows<Dtype>(p.rows, n, p.cols, p.cols, static_cast<const E*>(o.b), p.ld_w, out,
                      [&](int64_t r, int64_t j, float s) { projected[r * out + j] = s; });
  // q's and k's heads, the first heads + kv_heads of each row, turned in f32.
  turn_heads<ARB_DTYPE_F32>(p.rows, p.heads + p.kv_heads, p.head_dim, p.rope_theta, p.rope_layout,
                            static_cast<const int32_t*>(o.positions),
                            [&](int64_t t, int64_t h) { return projected + t * out + h * p.head_dim; });
  auto* y = static_cast<E*>(o.y);
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* from = projected + r * out;
    E* to = y + r * p.ld_y;
    int64_t j = 0;
    for (; j + 8 <= out; j += 8) L::store(to + j, _mm256_loadu_ps(from + j));
    for (; j < out; ++j) L::store1(to + j, from[j]);
  }
}

}  // namespace

size_t qkv_fused_workspace(const arb_problem& p) {
  return static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols + projected_cols(p)) * sizeof(float);
}

void qkv_fused(const arb_problem& p, const arb_operands& o, void* workspace) {
  on_dtype(p.dtype, [&](auto dtype) { qkv_rows<decltype(dtype)::value>(p, o, workspace); });
}

}  // namespace arbiter::cpu
