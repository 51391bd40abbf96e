// Softmax, AVX2: max pass, exp-sum pass, then exp again and scale, so y is written once
// and no f32 scratch is needed for 16-bit outputs. Every element uses the same exp.
#include "kernels.hpp"
#include "simd_avx2.hpp"

#include <cmath>

namespace arbiter::cpu {
namespace {

template <int32_t Dtype>
void softmax_rows(const arb_problem& p, const arb_operands& o) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const int64_t n = p.cols;
  for (int64_t r = 0; r < p.rows; ++r) {
    const E* x = static_cast<const E*>(o.x) + r * p.ld_x;
    E* y = static_cast<E*>(o.y) + r * p.ld_y;
    int64_t c = 0;
    __m256 max8 = _mm256_set1_ps(-INFINITY);
    for (; c + 8 <= n; c += 8) max8 = _mm256_max_ps(max8, L::load(x + c));
    float max = horizontal_max(max8);
    for (; c < n; ++c) max = std::fmax(max, L::load1(x + c));

    const __m256 shift = _mm256_set1_ps(max);
    __m256 sum8 = _mm256_setzero_ps();
    c = 0;
    for (; c + 8 <= n; c += 8) sum8 = _mm256_add_ps(sum8, exp8(_mm256_sub_ps(L::load(x + c), shift)));
    float sum = horizontal_sum(sum8);
    for (; c < n; ++c) sum += exp1(L::load1(x + c) - max);

    const float inverse = 1.0f / sum;
    const __m256 inverse8 = _mm256_set1_ps(inverse);
    c = 0;
    for (; c + 8 <= n; c += 8) L::store(y + c, _mm256_mul_ps(exp8(_mm256_sub_ps(L::load(x + c), shift)), inverse8));
    for (; c < n; ++c) L::store1(y + c, exp1(L::load1(x + c) - max) * inverse);
  }
}

}  // namespace

void softmax(const arb_problem& p, const arb_operands& o) {
  switch (p.dtype) {
    case ARB_DTYPE_F32: return softmax_rows<ARB_DTYPE_F32>(p, o);
    case ARB_DTYPE_F16: return softmax_rows<ARB_DTYPE_F16>(p, o);
    case ARB_DTYPE_BF16: return softmax_rows<ARB_DTYPE_BF16>(p, o);
    default: return;
  }
}

}  // namespace arbiter::cpu
