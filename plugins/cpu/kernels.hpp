// The cpu plugin's kernels. Each file is compiled for its ISA (see CMakeLists.txt): AVX2 +
// FMA + F16C, and AVX-512F for the *_avx512 kernel. The plugin's supports() checks the
// running CPU before any of them can be chosen.
#pragma once

#include <arbiter/plugin.h>

namespace arbiter::cpu {

constexpr int64_t kSmallGemmMax = 64;  // gemm_small: m, n and k up to this

void gemm_small_avx2(const arb_problem& problem, const arb_operands& operands);
void gemm_small_avx512(const arb_problem& problem, const arb_operands& operands);
void rmsnorm(const arb_problem& problem, const arb_operands& operands);
void softmax(const arb_problem& problem, const arb_operands& operands);

}  // namespace arbiter::cpu
