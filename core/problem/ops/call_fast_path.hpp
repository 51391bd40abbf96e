// The calls' common case, built inline on the path of every arb_gemm / arb_rmsnorm /
// arb_softmax / arb_swiglu (core/api/c_api.cpp): each operand checked once by tensor_fast_path.hpp, the
// operands written in place and the problem held as its words (fast_path::Problem), values in
// registers that are hashed and compared with the selection cache's problems and never stored
// (a hit launches with the cache's copy). Always inlined (GCC would keep each out of line: too
// large) so that the hash and the compare fold with the fields just set, the other ops' fields
// being known zeros.
//
// build_call_fast answers false for anything outside the common case and for every error,
// without a message: the caller then runs the op's build_call (gemm.cpp, rmsnorm.cpp,
// softmax.cpp), whose detailed checks accept the call or throw the status and message that
// say what is wrong. A true answer must leave exactly the call build_call would build
// (tests/test_call_fast_path.cpp compares the two on good and bad arguments).
#pragma once

#include "problem/ops/problem_words.hpp"
#include "problem/ops/tensor_fast_path.hpp"
#include "problem/ops/tensor_views.hpp"  // address()

#include <arbiter/arbiter.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace arbiter {

// The words of the problem each builds (start_call writes every other word zero): the cache
// hashes and compares only these.
constexpr ProblemWords fast_problem_words(const arb_gemm_args*) { return kGemmProblemWords; }
constexpr ProblemWords fast_problem_words(const arb_rmsnorm_args*) { return kRmsNormProblemWords; }
constexpr ProblemWords fast_problem_words(const arb_softmax_args*) { return kSoftmaxProblemWords; }
constexpr ProblemWords fast_problem_words(const arb_swiglu_args*) { return kSwigluProblemWords; }

// gemm: a, b, d (c with beta != 0, bias when given) 2-D row-major matrices (bias a vector).
[[gnu::always_inline]] inline bool build_call_fast(const arb_gemm_args* args, fast_path::Problem& p, arb_operands& o) {
  using namespace fast_path;
  if (args == nullptr || args->struct_size < ARB_GEMM_ARGS_STRUCT_SIZE) return false;
  // trans_a and trans_b as one word, as the problem holds them too: each 0 or 1.
  static_assert(offsetof(arb_gemm_args, trans_b) == offsetof(arb_gemm_args, trans_a) + 4 &&
                offsetof(arb_problem, trans_b) == offsetof(arb_problem, trans_a) + 4 &&
                offsetof(arb_problem, trans_a) % 8 == 0);
  uint64_t transposes;
  std::memcpy(&transposes, &args->trans_a, sizeof transposes);
  if ((transposes & ~uint64_t{0x100000001}) != 0 || args->reserved != 0) return false;
  const bool trans_a = (transposes & 1) != 0, trans_b = (transposes >> 32) != 0;
  if (args->activation < ARB_ACT_NONE || args->activation > ARB_ACT_SILU) return false;
  Kind kind;
  Span a, b, d;
  // d first: it gives m and n. Each operand is stored, and each overlap test runs, as soon as
  // its span is known, so that few values are live at once (the order decides nothing: any
  // refusal goes to the detailed checks).
  start_operands(o);
  if (!first_matrix(args->d, kind, d)) return false;
  o.d = d.data;
  const int64_t m = d.rows, n = d.cols;
  if (!matrix(args->a, kind, a) || overlap(d, a) || (trans_a ? a.cols : a.rows) != m) return false;
  o.a = a.data;
  const int64_t k = trans_a ? a.rows : a.cols;  // op(a)'s columns
  if (!matrix(args->b, kind, b) || overlap(d, b) || (trans_b ? b.rows : b.cols) != n ||
      (trans_b ? b.cols : b.rows) != k)
    return false;
  o.b = b.data;
  start_problem(ARB_OP_GEMM, kind, p);
  ARBITER_FAST_SET(p, m, m);
  ARBITER_FAST_SET(p, n, n);
  ARBITER_FAST_SET(p, k, k);
  ARBITER_FAST_SET(p, batch, 1);
  ARBITER_FAST_SET(p, lda, a.ld);
  ARBITER_FAST_SET(p, ldb, b.ld);
  ARBITER_FAST_SET(p, ldd, d.ld);
  p.set<offsetof(arb_problem, trans_a), uint64_t>(transposes);  // trans_a and trans_b
  ARBITER_FAST_SET(p, activation, args->activation);
  o.alpha = args->alpha;
  o.beta = args->beta;
  uint64_t addresses = address(a.data) | address(b.data) | address(d.data);
  uint64_t strides = static_cast<uint64_t>(a.ld | b.ld | d.ld);
  if (args->beta != 0.0f) {
    Span c;
    if (!matrix(args->c, kind, c) || c.rows != m || c.cols != n) return false;
    if (c.data == d.data) {
      if (c.ld != d.ld) return false;
      ARBITER_FAST_SET(p, c_is_d, 1);
    } else if (overlap(d, c)) {
      return false;
    }
    ARBITER_FAST_SET(p, has_c, 1);
    ARBITER_FAST_SET(p, ldc, c.ld);
    o.c = c.data;
    addresses |= address(c.data);
    strides |= static_cast<uint64_t>(c.ld);
  }
  if (args->bias != nullptr) {
    Span bias;
    if (!vector(args->bias, kind, n, bias) || overlap(d, bias)) return false;
    ARBITER_FAST_SET(p, has_bias, 1);
    o.bias = bias.data;
    addresses |= address(bias.data);
  }
  return set_alignment(addresses, strides, kind, p);
}

// The two row ops' x and y: 2-D row-major matrices of one shape that do not overlap.
[[gnu::always_inline]] inline bool bind_rows_fast(const DLTensor* x_tensor, const DLTensor* y_tensor, arb_op op,
                                                  fast_path::Kind& kind, fast_path::Span& x, fast_path::Span& y,
                                                  fast_path::Problem& p, arb_operands& o) {
  using namespace fast_path;
  start_operands(o);  // first: each address is stored as soon as it is checked
  if (!first_matrix(x_tensor, kind, x)) return false;
  o.x = x.data;
  if (!matrix(y_tensor, kind, y)) return false;
  o.y = y.data;
  if (y.rows != x.rows || y.cols != x.cols || overlap(y, x)) return false;
  start_problem(op, kind, p);
  ARBITER_FAST_SET(p, rows, x.rows);
  ARBITER_FAST_SET(p, cols, x.cols);
  ARBITER_FAST_SET(p, ld_x, x.ld);
  ARBITER_FAST_SET(p, ld_y, y.ld);
  return true;
}

[[gnu::always_inline]] inline bool build_call_fast(const arb_softmax_args* args, fast_path::Problem& p, arb_operands& o) {
  using namespace fast_path;
  if (args == nullptr || args->struct_size < ARB_SOFTMAX_ARGS_STRUCT_SIZE) return false;
  Kind kind;
  Span x, y;
  return bind_rows_fast(args->x, args->y, ARB_OP_SOFTMAX, kind, x, y, p, o) &&
         set_alignment(address(x.data) | address(y.data), static_cast<uint64_t>(x.ld | y.ld), kind, p);
}

// rmsnorm: x, y (and a residual) 2-D row-major, the weight a vector of x's columns.
[[gnu::always_inline]] inline bool build_call_fast(const arb_rmsnorm_args* args, fast_path::Problem& p, arb_operands& o) {
  using namespace fast_path;
  if (args == nullptr || args->struct_size < ARB_RMSNORM_ARGS_STRUCT_SIZE || !(args->eps >= 0.0f)) return false;
  // reserved arrived with the field after eps: a shorter struct has none.
  if (args->struct_size >= offsetof(arb_rmsnorm_args, reserved) + sizeof args->reserved && args->reserved != 0)
    return false;
  Kind kind;
  Span x, y, weight;
  if (!bind_rows_fast(args->x, args->y, ARB_OP_RMSNORM, kind, x, y, p, o)) return false;
  if (!vector(args->weight, kind, x.cols, weight) || overlap(y, weight)) return false;
  o.weight = weight.data;
  o.eps = args->eps;
  uint64_t addresses = address(x.data) | address(y.data) | address(weight.data);
  uint64_t strides = static_cast<uint64_t>(x.ld | y.ld);
  if (args->residual != nullptr) {
    // x += residual is written in place: x is an output too.
    Span r;
    if (!matrix(args->residual, kind, r) || r.rows != x.rows || r.cols != x.cols) return false;
    if (overlap(y, r) || overlap(x, r) || overlap(x, weight)) return false;
    ARBITER_FAST_SET(p, has_residual, 1);
    ARBITER_FAST_SET(p, ld_residual, r.ld);
    o.residual = r.data;
    addresses |= address(r.data);
    strides |= static_cast<uint64_t>(r.ld);
  }
  return set_alignment(addresses, strides, kind, p);
}

// swiglu: gate, up and y 2-D row-major of one shape; or, up NULL, gate [rows, 2 cols] holding
// both halves (each with gate's row stride) and y [rows, cols].
[[gnu::always_inline]] inline bool build_call_fast(const arb_swiglu_args* args, fast_path::Problem& p, arb_operands& o) {
  using namespace fast_path;
  if (args == nullptr || args->struct_size < ARB_SWIGLU_ARGS_STRUCT_SIZE) return false;
  Kind kind;
  Span whole, up, y;
  if (!first_matrix(args->gate, kind, whole)) return false;
  Span gate = whole;
  if (args->up != nullptr) {
    if (!matrix(args->up, kind, up) || up.rows != gate.rows || up.cols != gate.cols) return false;
  } else {
    if (whole.cols % 2 != 0) return false;
    gate.cols = whole.cols / 2;
    up = gate;
    up.data = whole.data + (gate.cols << kind.element_shift);
  }
  if (!matrix(args->y, kind, y) || y.rows != gate.rows || y.cols != gate.cols) return false;
  if (overlap(y, whole) || (args->up != nullptr && overlap(y, up))) return false;
  start_call(ARB_OP_SWIGLU, kind, p, o);
  o.gate = gate.data;
  o.up = up.data;
  o.y = y.data;
  ARBITER_FAST_SET(p, rows, gate.rows);
  ARBITER_FAST_SET(p, cols, gate.cols);
  ARBITER_FAST_SET(p, ld_gate, gate.ld);
  ARBITER_FAST_SET(p, ld_up, up.ld);
  ARBITER_FAST_SET(p, ld_y, y.ld);
  return set_alignment(address(gate.data) | address(up.data) | address(y.data),
                       static_cast<uint64_t>(gate.ld | up.ld | y.ld), kind, p);
}

// The same as a Call (tests/test_call_fast_path.cpp compares it with build_call's).
template <typename Args>
bool build_call_fast(const Args* args, Call& call) {
  fast_path::Problem problem;
  if (!build_call_fast(args, problem, call.operands)) return false;
  call.problem = problem.problem();
  return true;
}

}  // namespace arbiter
