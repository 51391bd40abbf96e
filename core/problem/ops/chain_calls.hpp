// Building a composite op's chain (Op::chain_steps): each step one single op's call on the
// composite's dtype and device, with its own operands and alignment class.
#pragma once

#include "problem/op.hpp"

#include <arbiter/plugin.h>

#include <cstdint>

namespace arbiter {

// The intermediates a chain keeps, each in a region of whole 256-byte blocks.
inline int64_t chain_region(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Starts `call` as an empty problem of `op` on `composite`'s dtype and device, its operands
// zeroed; the caller sets the op's fields, then finish_chain_step.
void start_chain_step(Call& call, const Op& op, const arb_problem& composite);
// The step's alignment class, from its operands and strides.
void finish_chain_step(Call& call);

// The norm step both composite blocks (mlp, qkv) start with: rmsnorm of the composite's x
// (rows x cols, row stride ld_x) by operands.weight with operands.eps into `normed`, packed.
void norm_step(Call& call, const arb_problem& composite, const arb_operands& operands, void* normed);

// Starts a gemm step: d[rows, n] = a[rows, k] w[n, k]^T (alpha 1), a projection by a weight as
// torch.nn.Linear stores it; the caller may add C, then finish_chain_step.
void start_linear_step(Call& call, const arb_problem& composite, int64_t rows, const void* a, int64_t lda, int64_t k,
                       const void* weight, int64_t ld_weight, int64_t n, void* d, int64_t ldd);

}  // namespace arbiter
