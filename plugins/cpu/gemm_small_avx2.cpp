// gemm_small for AVX2 + FMA: 6 x 16 register blocks (12 accumulators of 8 lanes). The ISA
// description, Avx2, lives in gemm_small_impl.hpp.
#include "gemm_small_impl.hpp"

namespace arbiter::cpu {

void gemm_small_avx2(const arb_problem& p, const arb_operands& o) { gemm_small_for<Avx2>(p, o); }

}  // namespace arbiter::cpu
