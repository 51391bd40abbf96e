// SwiGLU in bf16 with AVX512-BF16: the 16-lane loop of swiglu_avx512_impl.hpp with
// vcvtneps2bf16 as the store's rounding (round to nearest even, one instruction where the
// generic store takes about ten). It treats f32 subnormal results as zero, which moves the
// relative norm error by less than 2^-100.
#include "kernels.hpp"
#include "swiglu_avx512_impl.hpp"

namespace arbiter::cpu {
namespace {

struct NativeBf16 {
  using Element = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) { return Lanes16<ARB_DTYPE_BF16>::load(p, m); }
  static void store(uint16_t* p, __mmask16 m, __m512 v) {
    _mm256_mask_storeu_epi16(p, m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
};

}  // namespace

void swiglu_avx512_bf16(const arb_problem& p, const arb_operands& o) { swiglu_rows<NativeBf16>(p, o); }

}  // namespace arbiter::cpu
