// gemm_small for AVX2 + FMA: 6 x 16 register blocks (12 accumulators of 8 lanes).
#include "gemm_small_impl.hpp"

namespace arbiter::cpu {
namespace {

struct Avx2 {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  static constexpr int kRows = 6;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V masked_load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static Mask mask(int64_t count) {  // lanes [0, count) on
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};

}  // namespace

void gemm_small_avx2(const arb_problem& p, const arb_operands& o) { gemm_small_for<Avx2>(p, o); }

}  // namespace arbiter::cpu
