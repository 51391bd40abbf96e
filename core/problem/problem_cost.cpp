#include "problem/problem_cost.hpp"

#include "problem/op_table.hpp"

namespace arbiter {

double flop_count(const arb_problem& p) {
  const Op* op = find_op(p.op);
  return op != nullptr ? op->flops(p) : 0;
}

double bytes_moved(const arb_problem& p) {
  const Op* op = find_op(p.op);
  return op != nullptr ? op->bytes_moved(p) : 0;
}

double reference_cost(const arb_problem& p) {
  const Op* op = find_op(p.op);
  return op != nullptr ? op->reference_cost(p) : 0;
}

}  // namespace arbiter
