// The work a problem asks for, the same for every kernel: the floor that a time is held
// against in reports (TFLOP/s, GB/s) and in the tuner's too-good-to-be-true check. Each
// op defines its own (core/problem/ops/).
#pragma once

#include <arbiter/plugin.h>

namespace arbiter {

// Floating-point operations of the math itself (gemm: 2mnk, epilogue not counted); 0 for
// ops bound by memory.
double flop_count(const arb_problem& p);

// Bytes every kernel must move at least: each input read once, each output written once.
double bytes_moved(const arb_problem& p);

// The fp64 reference's work in multiply-adds: what verifying on the problem itself costs.
double reference_cost(const arb_problem& p);

}  // namespace arbiter
