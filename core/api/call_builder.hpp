// From the application's args structs and DLTensors to a problem and its operands, with
// every check the C ABI promises: null pointers, dtypes, devices, shapes, strides.
// Throws Failure(ARB_ERR_INVALID_ARGUMENT or ARB_ERR_UNSUPPORTED) naming the argument.
#pragma once

#include <arbiter/arbiter.h>
#include <arbiter/plugin.h>

namespace arbiter {

struct Call {
  arb_problem problem;
  arb_operands operands;
};

void build_gemm(const arb_gemm_args* args, Call& call);
void build_rmsnorm(const arb_rmsnorm_args* args, Call& call);
void build_softmax(const arb_softmax_args* args, Call& call);

// Dispatches on op (an arb_op); `args` points to that op's args struct.
void build_call(int32_t op, const void* args, Call& call);

}  // namespace arbiter
