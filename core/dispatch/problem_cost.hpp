// The work a problem asks for, the same for every kernel: the floor that a time is held
// against in reports (TFLOP/s, GB/s) and in the tuner's too-good-to-be-true check.
#pragma once

#include <arbiter/plugin.h>

namespace arbiter {

// Floating-point operations of the math itself: 2mnk for gemm (epilogue not counted), 0
// for the row ops, which are bound by memory.
double flop_count(const arb_problem& p);

// Bytes every kernel must move at least: each input read once, each output written once.
// gemm: A, B, D, and C and the bias when present. rmsnorm: x, weight, y, and with a
// residual also the residual read and x written back. softmax: x and y.
double bytes_moved(const arb_problem& p);

}  // namespace arbiter
