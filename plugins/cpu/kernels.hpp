// The cpu plugin's kernels. They are compiled for AVX2 + FMA + F16C (see CMakeLists.txt);
// the plugin's supports() checks the running CPU before any of them can be chosen.
#pragma once

#include <arbiter/plugin.h>

namespace arbiter::cpu {

constexpr int64_t kSmallGemmMax = 64;  // gemm_small: m, n and k up to this

void gemm_small(const arb_problem& problem, const arb_operands& operands);
void rmsnorm(const arb_problem& problem, const arb_operands& operands);
void softmax(const arb_problem& problem, const arb_operands& operands);

}  // namespace arbiter::cpu
