// gemm_small for AVX-512F: 8 x 32 register blocks (16 accumulators of 16 lanes), masked
// loads at the right edge; the epilogue shares the 8-lane code of the AVX2 build.
#include "gemm_small_impl.hpp"

namespace arbiter::cpu {
namespace {

struct Avx512 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kRows = 8;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V masked_load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static Mask mask(int64_t count) {  // lanes [0, count) on
    return count >= 16 ? Mask(0xffff) : count <= 0 ? Mask(0) : static_cast<Mask>((1u << count) - 1u);
  }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void gemm_small_avx512(const arb_problem& p, const arb_operands& o) { gemm_small_for<Avx512>(p, o); }

}  // namespace arbiter::cpu
