// The ops, one file each; op_table.cpp lists them. The C API's per-op entry points use
// these directly, the rest of the runtime goes through the op table.
#pragma once

#include "problem/op.hpp"

namespace arbiter {

const Op& gemm_op();
const Op& rmsnorm_op();
const Op& softmax_op();
const Op& swiglu_op();
const Op& rope_op();
const Op& attention_op();
const Op& mlp_op();
const Op& qkv_op();

}  // namespace arbiter
