// Small-shape GEMM (m, n, k <= 64), AVX2 + FMA: op(A) and op(B) are packed into f32 tiles
// on the stack (B padded to a multiple of 16 columns with zeros), a 6x16 register-blocked
// micro-kernel accumulates in f32, and a vectorised epilogue applies alpha, beta * C, bias
// and the activation while storing in the output dtype. No allocation, no threads: at these
// sizes a BLAS's set-up costs more than the arithmetic.
#include "kernels.hpp"
#include "simd_avx2.hpp"

namespace arbiter::cpu {
namespace {

constexpr int64_t kMax = kSmallGemmMax;
constexpr int64_t kPackedB = kMax;  // row stride of the packed B tile and the accumulator tile
constexpr int kRowsPerBlock = 6;

template <int32_t Dtype>
void pack_a(const arb_problem& p, const typename Lanes<Dtype>::Element* a, float* packed) {
  using L = Lanes<Dtype>;
  if (!p.trans_a) {
    for (int64_t i = 0; i < p.m; ++i) {
      int64_t q = 0;
      for (; q + 8 <= p.k; q += 8) _mm256_storeu_ps(packed + i * p.k + q, L::load(a + i * p.lda + q));
      for (; q < p.k; ++q) packed[i * p.k + q] = L::load1(a + i * p.lda + q);
    }
  } else {  // stored [k][m]
    for (int64_t q = 0; q < p.k; ++q)
      for (int64_t i = 0; i < p.m; ++i) packed[i * p.k + q] = L::load1(a + q * p.lda + i);
  }
}

template <int32_t Dtype>
void pack_b(const arb_problem& p, const typename Lanes<Dtype>::Element* b, float* packed, int64_t padded_n) {
  using L = Lanes<Dtype>;
  if (!p.trans_b) {
    for (int64_t q = 0; q < p.k; ++q) {
      int64_t j = 0;
      for (; j + 8 <= p.n; j += 8) _mm256_storeu_ps(packed + q * kPackedB + j, L::load(b + q * p.ldb + j));
      for (; j < p.n; ++j) packed[q * kPackedB + j] = L::load1(b + q * p.ldb + j);
      for (; j < padded_n; ++j) packed[q * kPackedB + j] = 0.0f;
    }
  } else {  // stored [n][k]
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t q = 0; q < p.k; ++q) packed[q * kPackedB + j] = L::load1(b + j * p.ldb + q);
    for (int64_t q = 0; q < p.k; ++q)
      for (int64_t j = p.n; j < padded_n; ++j) packed[q * kPackedB + j] = 0.0f;
  }
}

// acc[Rows x 16] = a[Rows x k] * b[k x 16]
template <int Rows>
void micro_kernel(const float* a, int64_t k, const float* b, float* acc) {
  __m256 sum[Rows][2];
  for (int r = 0; r < Rows; ++r) sum[r][0] = sum[r][1] = _mm256_setzero_ps();
  for (int64_t q = 0; q < k; ++q) {
    const __m256 b0 = _mm256_loadu_ps(b + q * kPackedB);
    const __m256 b1 = _mm256_loadu_ps(b + q * kPackedB + 8);
    for (int r = 0; r < Rows; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * k + q);
      sum[r][0] = _mm256_fmadd_ps(av, b0, sum[r][0]);
      sum[r][1] = _mm256_fmadd_ps(av, b1, sum[r][1]);
    }
  }
  for (int r = 0; r < Rows; ++r) {
    _mm256_storeu_ps(acc + r * kPackedB, sum[r][0]);
    _mm256_storeu_ps(acc + r * kPackedB + 8, sum[r][1]);
  }
}

void multiply(const float* a, const float* b, float* acc, int64_t m, int64_t k, int64_t padded_n) {
  for (int64_t j = 0; j < padded_n; j += 16) {
    int64_t i = 0;
    for (; i + kRowsPerBlock <= m; i += kRowsPerBlock)
      micro_kernel<kRowsPerBlock>(a + i * k, k, b + j, acc + i * kPackedB + j);
    const float* a_rest = a + i * k;
    float* acc_rest = acc + i * kPackedB + j;
    switch (m - i) {
      case 5: micro_kernel<5>(a_rest, k, b + j, acc_rest); break;
      case 4: micro_kernel<4>(a_rest, k, b + j, acc_rest); break;
      case 3: micro_kernel<3>(a_rest, k, b + j, acc_rest); break;
      case 2: micro_kernel<2>(a_rest, k, b + j, acc_rest); break;
      case 1: micro_kernel<1>(a_rest, k, b + j, acc_rest); break;
      default: break;
    }
  }
}

template <int32_t Dtype>
void epilogue(const arb_problem& p, const arb_operands& o, const float* acc) {
  using L = Lanes<Dtype>;
  using E = typename L::Element;
  const E* c = static_cast<const E*>(o.c);
  const E* bias = static_cast<const E*>(o.bias);
  E* d = static_cast<E*>(o.d);
  const __m256 alpha = _mm256_set1_ps(o.alpha), beta = _mm256_set1_ps(o.beta);
  for (int64_t i = 0; i < p.m; ++i) {
    const float* row = acc + i * kPackedB;
    int64_t j = 0;
    for (; j + 8 <= p.n; j += 8) {
      __m256 v = _mm256_mul_ps(alpha, _mm256_loadu_ps(row + j));
      if (p.has_c) v = _mm256_fmadd_ps(beta, L::load(c + i * p.ldc + j), v);
      if (p.has_bias) v = _mm256_add_ps(v, L::load(bias + j));
      L::store(d + i * p.ldd + j, activate8(p.activation, v));
    }
    for (; j < p.n; ++j) {
      float v = o.alpha * row[j];
      if (p.has_c) v = o.beta * L::load1(c + i * p.ldc + j) + v;
      if (p.has_bias) v += L::load1(bias + j);
      L::store1(d + i * p.ldd + j, activate1(p.activation, v));
    }
  }
}

template <int32_t Dtype>
void gemm_small_typed(const arb_problem& p, const arb_operands& o) {
  using E = typename Lanes<Dtype>::Element;
  alignas(32) float a[kMax * kMax];
  alignas(32) float b[kMax * kPackedB];
  alignas(32) float acc[kMax * kPackedB];
  const int64_t padded_n = (p.n + 15) / 16 * 16;
  pack_a<Dtype>(p, static_cast<const E*>(o.a), a);
  pack_b<Dtype>(p, static_cast<const E*>(o.b), b, padded_n);
  multiply(a, b, acc, p.m, p.k, padded_n);
  epilogue<Dtype>(p, o, acc);
}

}  // namespace

void gemm_small(const arb_problem& p, const arb_operands& o) {
  switch (p.dtype) {
    case ARB_DTYPE_F32: return gemm_small_typed<ARB_DTYPE_F32>(p, o);
    case ARB_DTYPE_F16: return gemm_small_typed<ARB_DTYPE_F16>(p, o);
    case ARB_DTYPE_BF16: return gemm_small_typed<ARB_DTYPE_BF16>(p, o);
    default: return;
  }
}

}  // namespace arbiter::cpu
