// Element access for the row-major operands of arb_problem, transposes included, widened
// to float. For reference code and packing loops, not for inner loops.
#pragma once

#include <arbiter/float16.hpp>
#include <arbiter/plugin.h>

namespace arbiter::plugins {

// op(A)[i][p] for a gemm problem.
inline float load_a(const arb_problem& pr, const void* a, int64_t i, int64_t p) {
  return load_float(a, pr.trans_a ? p * pr.lda + i : i * pr.lda + p, pr.dtype);
}
// op(B)[p][j] for a gemm problem.
inline float load_b(const arb_problem& pr, const void* b, int64_t p, int64_t j) {
  return load_float(b, pr.trans_b ? j * pr.ldb + p : p * pr.ldb + j, pr.dtype);
}

}  // namespace arbiter::plugins
