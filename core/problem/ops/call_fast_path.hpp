// The calls' common case, built inline on the path of every arb_gemm / arb_rmsnorm /
// arb_softmax / arb_swiglu (core/api/c_api.cpp): each operand checked once by tensor_fast_path.hpp, the
// operands written in place and the problem held as its call key (call_key.hpp), values in
// registers that are hashed and compared with the selection cache's keys and never stored (a
// hit launches with the cache's copy of the problem). Always inlined (GCC would keep each out
// of line: too large) so that the hash and the compare fold with the words just set.
//
// build_call_fast answers false for anything outside the common case and for every error,
// without a message: the caller then runs the op's build_call (gemm.cpp, rmsnorm.cpp,
// softmax.cpp), whose detailed checks accept the call or throw the status and message that
// say what is wrong. A true answer must leave exactly the call build_call would build: its
// operands, and the key of its problem (tests/test_call_fast_path.cpp compares the two on good
// and bad arguments).
#pragma once

#include "problem/ops/call_key.hpp"
#include "problem/ops/tensor_fast_path.hpp"
#include "problem/ops/tensor_views.hpp"  // address()

#include <arbiter/arbiter.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace arbiter {

// The words of the key each builds (start_key writes every other word zero): the cache
// compares only these.
constexpr size_t fast_key_words(const arb_gemm_args*) { return call_key_words(ARB_OP_GEMM); }
constexpr size_t fast_key_words(const arb_rmsnorm_args*) { return call_key_words(ARB_OP_RMSNORM); }
constexpr size_t fast_key_words(const arb_softmax_args*) { return call_key_words(ARB_OP_SOFTMAX); }
constexpr size_t fast_key_words(const arb_swiglu_args*) { return call_key_words(ARB_OP_SWIGLU); }

// gemm: a, b, d (c with beta != 0, bias when given) 2-D row-major matrices (bias a vector).
[[gnu::always_inline]] inline bool build_call_fast(const arb_gemm_args* args, CallKey& key, arb_operands& o) {
  using namespace fast_path;
  if (args == nullptr || args->struct_size < ARB_GEMM_ARGS_STRUCT_SIZE) return false;
  // trans_a and trans_b as one word, each 0 or 1: shifted as it is into the key's tag.
  static_assert(offsetof(arb_gemm_args, trans_b) == offsetof(arb_gemm_args, trans_a) + 4);
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
  // The key's words and the alignment's inputs gathered as each operand is checked: fewer
  // values live through the checks that follow.
  uint64_t addresses = address(d.data);
  uint64_t strides = static_cast<uint64_t>(d.ld);
  start_key(ARB_OP_GEMM, kind, key);
  key.word[2] = pair_word(static_cast<uint64_t>(m), static_cast<uint64_t>(n));
  if (!matrix(args->a, kind, a) || overlap(d, a) || (trans_a ? a.cols : a.rows) != m) return false;
  o.a = a.data;
  const int64_t k = trans_a ? a.rows : a.cols;  // op(a)'s columns
  key.word[3] = pair_word(static_cast<uint64_t>(k), static_cast<uint64_t>(a.ld));
  addresses |= address(a.data);
  strides |= static_cast<uint64_t>(a.ld);
  if (!matrix(args->b, kind, b) || overlap(d, b) || (trans_b ? b.rows : b.cols) != n ||
      (trans_b ? b.cols : b.rows) != k)
    return false;
  o.b = b.data;
  key.word[4] = pair_word(static_cast<uint64_t>(b.ld), static_cast<uint64_t>(d.ld));
  addresses |= address(b.data);
  strides |= static_cast<uint64_t>(b.ld);
  key.word[1] |= transposes << call_key::kTransposesShift |
                 static_cast<uint64_t>(args->activation) << call_key::kActivationShift;
  // alpha and beta copied as one word, and beta tested as bits: beta != 0.0f exactly when
  // its bits other than the sign are not all zero (a NaN reads C, as the compare would).
  static_assert(offsetof(arb_gemm_args, beta) == offsetof(arb_gemm_args, alpha) + 4 &&
                offsetof(arb_operands, beta) == offsetof(arb_operands, alpha) + 4);
  uint64_t scalars;
  std::memcpy(&scalars, &args->alpha, sizeof scalars);
  std::memcpy(&o.alpha, &scalars, sizeof scalars);
  const bool reads_c = (scalars >> 32 & 0x7fffffff) != 0;
  if (reads_c) {
    Span c;
    if (!matrix(args->c, kind, c) || c.rows != m || c.cols != n) return false;
    if (c.data == d.data) {
      if (c.ld != d.ld) return false;
      key.word[1] |= call_key::kCIsD;
    } else if (overlap(d, c)) {
      return false;
    }
    key.word[1] |= call_key::kHasC;
    key.word[5] = static_cast<uint64_t>(c.ld);
    o.c = c.data;
    addresses |= address(c.data);
    strides |= static_cast<uint64_t>(c.ld);
  }
  if (args->bias != nullptr) {
    Span bias;
    if (!vector(args->bias, kind, n, bias) || overlap(d, bias)) return false;
    key.word[1] |= call_key::kHasBias;
    o.bias = bias.data;
    addresses |= address(bias.data);
  }
  return set_alignment(addresses, strides, kind, key);
}

// The two row ops' x and y: 2-D row-major matrices of one shape that do not overlap.
[[gnu::always_inline]] inline bool bind_rows_fast(const DLTensor* x_tensor, const DLTensor* y_tensor, arb_op op,
                                                  fast_path::Kind& kind, fast_path::Span& x, fast_path::Span& y,
                                                  CallKey& key, arb_operands& o) {
  using namespace fast_path;
  start_operands(o);  // first: each address is stored as soon as it is checked
  if (!first_matrix(x_tensor, kind, x)) return false;
  o.x = x.data;
  if (!matrix(y_tensor, kind, y)) return false;
  o.y = y.data;
  if (y.rows != x.rows || y.cols != x.cols || overlap(y, x)) return false;
  start_key(op, kind, key);
  key.word[2] = pair_word(static_cast<uint64_t>(x.rows), static_cast<uint64_t>(x.cols));
  key.word[3] = pair_word(static_cast<uint64_t>(x.ld), static_cast<uint64_t>(y.ld));
  return true;
}

[[gnu::always_inline]] inline bool build_call_fast(const arb_softmax_args* args, CallKey& key, arb_operands& o) {
  using namespace fast_path;
  if (args == nullptr || args->struct_size < ARB_SOFTMAX_ARGS_STRUCT_SIZE) return false;
  Kind kind;
  Span x, y;
  return bind_rows_fast(args->x, args->y, ARB_OP_SOFTMAX, kind, x, y, key, o) &&
         set_alignment(address(x.data) | address(y.data), static_cast<uint64_t>(x.ld | y.ld), kind, key);
}

// rmsnorm: x, y (and a residual) 2-D row-major, the weight a vector of x's columns.
[[gnu::always_inline]] inline bool build_call_fast(const arb_rmsnorm_args* args, CallKey& key, arb_operands& o) {
  using namespace fast_path;
  if (args == nullptr || args->struct_size < ARB_RMSNORM_ARGS_STRUCT_SIZE || !(args->eps >= 0.0f)) return false;
  // reserved arrived with the field after eps: a shorter struct has none.
  if (args->struct_size >= offsetof(arb_rmsnorm_args, reserved) + sizeof args->reserved && args->reserved != 0)
    return false;
  Kind kind;
  Span x, y, weight;
  if (!bind_rows_fast(args->x, args->y, ARB_OP_RMSNORM, kind, x, y, key, o)) return false;
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
    key.word[1] |= call_key::kHasResidual;
    key.word[4] = static_cast<uint64_t>(r.ld);
    o.residual = r.data;
    addresses |= address(r.data);
    strides |= static_cast<uint64_t>(r.ld);
  }
  return set_alignment(addresses, strides, kind, key);
}

// swiglu: gate, up and y 2-D row-major of one shape; or, up NULL, gate [rows, 2 cols] holding
// both halves (each with gate's row stride) and y [rows, cols].
[[gnu::always_inline]] inline bool build_call_fast(const arb_swiglu_args* args, CallKey& key, arb_operands& o) {
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
  start_call(ARB_OP_SWIGLU, kind, key, o);
  o.gate = gate.data;
  o.up = up.data;
  o.y = y.data;
  key.word[2] = pair_word(static_cast<uint64_t>(gate.rows), static_cast<uint64_t>(gate.cols));
  key.word[3] = pair_word(static_cast<uint64_t>(gate.ld), static_cast<uint64_t>(up.ld));
  key.word[4] = static_cast<uint64_t>(y.ld);
  return set_alignment(address(gate.data) | address(up.data) | address(y.data),
                       static_cast<uint64_t>(gate.ld | up.ld | y.ld), kind, key);
}

// The same as a Call, its problem unpacked from the key (tests/test_call_fast_path.cpp
// compares it with build_call's).
template <typename Args>
bool build_call_fast(const Args* args, Call& call, CallKey& key) {
  if (!build_call_fast(args, key, call.operands)) return false;
  call.problem = unpack_call_key(key);
  return true;
}

}  // namespace arbiter
