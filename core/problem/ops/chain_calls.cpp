#include "problem/ops/chain_calls.hpp"

#include "problem/ops/ops.hpp"
#include "problem/ops/tensor_views.hpp"
#include "problem/problem.hpp"

#include <cstring>

namespace arbiter {

void start_chain_step(Call& call, const Op& op, const arb_problem& composite) {
  call.problem = empty_problem(op);
  call.problem.dtype = composite.dtype;
  call.problem.device_type = composite.device_type;
  call.problem.device_id = composite.device_id;
  std::memset(&call.operands, 0, sizeof call.operands);
  call.operands.struct_size = sizeof call.operands;
}

void finish_chain_step(Call& call) { call.problem.alignment = call_alignment(call); }

void norm_step(Call& call, const arb_problem& composite, const arb_operands& operands, void* normed) {
  start_chain_step(call, rmsnorm_op(), composite);
  arb_problem& p = call.problem;
  p.rows = composite.rows;
  p.cols = composite.cols;
  p.ld_x = composite.ld_x;
  p.ld_y = composite.cols;
  call.operands.x = operands.x;
  call.operands.weight = operands.weight;
  call.operands.y = normed;
  call.operands.eps = operands.eps;
  finish_chain_step(call);
}

void start_linear_step(Call& call, const arb_problem& composite, int64_t rows, const void* a, int64_t lda, int64_t k,
                       const void* weight, int64_t ld_weight, int64_t n, void* d, int64_t ldd) {
  start_chain_step(call, gemm_op(), composite);
  arb_problem& p = call.problem;
  p.m = rows;
  p.n = n;
  p.k = k;
  p.lda = lda;
  p.trans_b = 1;
  p.ldb = ld_weight;
  p.ldd = ldd;
  call.operands.a = a;
  call.operands.b = weight;
  call.operands.d = d;
  call.operands.alpha = 1.0f;
}

}  // namespace arbiter
