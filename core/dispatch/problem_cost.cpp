#include "dispatch/problem_cost.hpp"

#include <arbiter/float16.hpp>

namespace arbiter {

double flop_count(const arb_problem& p) {
  if (p.op != ARB_OP_GEMM) return 0;
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
}

double bytes_moved(const arb_problem& p) {
  const double element = static_cast<double>(dtype_size(p.dtype));
  if (p.op == ARB_OP_GEMM) {
    const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), k = static_cast<double>(p.k);
    double elements = m * k + k * n + m * n;
    if (p.has_c) elements += m * n;  // C read (in place: D read, then written)
    if (p.has_bias) elements += n;
    return elements * element;
  }
  const double tile = static_cast<double>(p.rows) * static_cast<double>(p.cols);
  double elements = 2.0 * tile;
  if (p.op == ARB_OP_RMSNORM) elements += static_cast<double>(p.cols) + (p.has_residual ? 2.0 * tile : 0.0);
  return elements * element;
}

}  // namespace arbiter
