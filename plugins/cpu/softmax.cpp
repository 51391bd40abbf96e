// Softmax, AVX2: max pass, exp-sum pass, then exp again and scale, so y is written once
// and no f32 scratch is needed for 16-bit outputs. Every element uses the same exp. A row
// holding a NaN or +inf, or only -inf, is all NaN, as the formula gives (docs/verification.md,
// "Special values"); exp8 clamps its input, so those rows are found in the max pass.
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
    __m256 max8 = _mm256_set1_ps(-INFINITY), nan8 = _mm256_setzero_ps();
    for (; c + 8 <= n; c += 8) {
      const __m256 v = L::load(x + c);
      max8 = _mm256_max_ps(max8, v);
      nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    float max = horizontal_max(max8);
    bool nan = _mm256_movemask_ps(nan8) != 0;
    for (; c < n; ++c) {
      const float v = L::load1(x + c);
      max = std::fmax(max, v);
      nan = nan || std::isnan(v);
    }
    if (nan || !std::isfinite(max)) {
      for (c = 0; c < n; ++c) L::store1(y + c, NAN);
      continue;
    }

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
