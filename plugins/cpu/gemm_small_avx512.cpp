// gemm_small for AVX-512F and VL: 8 x 32 register blocks (16 accumulators of 16 lanes), masked
// loads at the right edge, 8-lane blocks for the last few columns; the epilogue shares the
// 8-lane code of the AVX2 build.
#include "gemm_small_impl.hpp"

namespace arbiter::cpu {
namespace {

// 8 lanes with AVX-512VL's mask registers: masked loads and stores at full speed (AVX2's
// vmaskmov is slow on some CPUs).
struct Avx512Half {
  using V = __m256;
  using Mask = __mmask8;
  using Tail = Avx512Half;
  static constexpr int kLanes = 8;
  static constexpr int kRows = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V masked_load(const float* p, Mask m) { return _mm256_maskz_loadu_ps(m, p); }
  static void masked_store(float* p, Mask m, V v) { _mm256_mask_storeu_ps(p, m, v); }
  static Mask mask(int64_t count) {  // lanes [0, count) on
    return count >= 8 ? Mask(0xff) : count <= 0 ? Mask(0) : static_cast<Mask>((1u << count) - 1u);
  }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
};

struct Avx512 {
  using Tail = Avx512Half;  // right edges of at most 8 columns: half the wasted lanes
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
  static void masked_store(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
};

}  // namespace

void gemm_small_avx512(const arb_problem& p, const arb_operands& o) { gemm_small_for<Avx512>(p, o); }

}  // namespace arbiter::cpu
