// RMSNorm, AVX2: one pass for the (optional) residual add and the sum of squares, one pass
// to scale. f32 accumulation in two vector accumulators.
#include "kernels.hpp"
#include "simd_avx2.hpp"

#include <cmath>

namespace arbiter::cpu {
namespace {

template <int32_t Dtype>
void rmsnorm_rows(const arb_problem& p, const arb_operands& o) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const int64_t n = p.cols;
  const int64_t vector_end = n / 16 * 16;
  const E* weight = static_cast<const E*>(o.weight);
  for (int64_t r = 0; r < p.rows; ++r) {
    E* x = static_cast<E*>(o.x) + r * p.ld_x;
    E* y = static_cast<E*>(o.y) + r * p.ld_y;
    const E* residual = p.has_residual ? static_cast<const E*>(o.residual) + r * p.ld_residual : nullptr;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float tail = 0.0f;
    int64_t c = 0;
    if (residual != nullptr) {
      // x += residual, stored in the dtype; the stored (rounded) sum is what is normalised.
      for (; c < vector_end; c += 16) {
        L::store(x + c, _mm256_add_ps(L::load(x + c), L::load(residual + c)));
        L::store(x + c + 8, _mm256_add_ps(L::load(x + c + 8), L::load(residual + c + 8)));
        const __m256 v0 = L::load(x + c), v1 = L::load(x + c + 8);
        acc0 = _mm256_fmadd_ps(v0, v0, acc0);
        acc1 = _mm256_fmadd_ps(v1, v1, acc1);
      }
      for (; c < n; ++c) {
        L::store1(x + c, L::load1(x + c) + L::load1(residual + c));
        const float v = L::load1(x + c);
        tail += v * v;
      }
    } else {
      for (; c < vector_end; c += 16) {
        const __m256 v0 = L::load(x + c), v1 = L::load(x + c + 8);
        acc0 = _mm256_fmadd_ps(v0, v0, acc0);
        acc1 = _mm256_fmadd_ps(v1, v1, acc1);
      }
      for (; c < n; ++c) {
        const float v = L::load1(x + c);
        tail += v * v;
      }
    }
    const float sum_sq = horizontal_sum(_mm256_add_ps(acc0, acc1)) + tail;
    const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + o.eps);
    const __m256 scale8 = _mm256_set1_ps(scale);
    c = 0;
    for (; c + 8 <= n; c += 8)
      L::store(y + c, _mm256_mul_ps(_mm256_mul_ps(L::load(x + c), scale8), L::load(weight + c)));
    for (; c < n; ++c) L::store1(y + c, L::load1(x + c) * scale * L::load1(weight + c));
  }
}

}  // namespace

void rmsnorm(const arb_problem& p, const arb_operands& o) {
  switch (p.dtype) {
    case ARB_DTYPE_F32: return rmsnorm_rows<ARB_DTYPE_F32>(p, o);
    case ARB_DTYPE_F16: return rmsnorm_rows<ARB_DTYPE_F16>(p, o);
    case ARB_DTYPE_BF16: return rmsnorm_rows<ARB_DTYPE_BF16>(p, o);
    default: return;
  }
}

}  // namespace arbiter::cpu
