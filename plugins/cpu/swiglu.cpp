// SwiGLU, AVX2: y = silu(gate) * up, 8 lanes at a time in f32, silu in the sigmoid form of
// the gemm epilogue (activate8): no cancellation for negative gates, e^-g clamped so that
// gates below -88 give -0 rather than inf / inf. Row tails use one lane of the same function.
#include "kernels.hpp"
#include "simd_avx2.hpp"

namespace arbiter::cpu {
namespace {

template <int32_t Dtype>
void swiglu_rows(const arb_problem& p, const arb_operands& o) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const int64_t n = p.cols;
  for (int64_t r = 0; r < p.rows; ++r) {
    const E* gate = static_cast<const E*>(o.gate) + r * p.ld_gate;
    const E* up = static_cast<const E*>(o.up) + r * p.ld_up;
    E* y = static_cast<E*>(o.y) + r * p.ld_y;
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {  // two vectors in flight: the division's latency overlaps
      const __m256 a = activate8(ARB_ACT_SILU, L::load(gate + c));
      const __m256 b = activate8(ARB_ACT_SILU, L::load(gate + c + 8));
      L::store(y + c, _mm256_mul_ps(a, L::load(up + c)));
      L::store(y + c + 8, _mm256_mul_ps(b, L::load(up + c + 8)));
    }
    for (; c + 8 <= n; c += 8) L::store(y + c, _mm256_mul_ps(activate8(ARB_ACT_SILU, L::load(gate + c)), L::load(up + c)));
    for (; c < n; ++c) L::store1(y + c, activate1(ARB_ACT_SILU, L::load1(gate + c)) * L::load1(up + c));
  }
}

}  // namespace

void swiglu(const arb_problem& p, const arb_operands& o) {
  switch (p.dtype) {
    case ARB_DTYPE_F32: return swiglu_rows<ARB_DTYPE_F32>(p, o);
    case ARB_DTYPE_F16: return swiglu_rows<ARB_DTYPE_F16>(p, o);
    case ARB_DTYPE_BF16: return swiglu_rows<ARB_DTYPE_BF16>(p, o);
    default: return;
  }
}

}  // namespace arbiter::cpu
