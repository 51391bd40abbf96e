// Each op's words of arb_problem (Op::problem_words(), problem.hpp): the header and the op's
// fields. Constants, so that the calls' fast path (call_fast_path.hpp) hashes and compares just
// these; an op's fields appended to arb_problem later get their own range here.
#pragma once

#include "problem/problem.hpp"

#include <arbiter/plugin.h>

#include <cstddef>

namespace arbiter {

// gemm: m through c_is_d.
inline constexpr ProblemWords kGemmProblemWords =
    kProblemHeaderWords | problem_words(offsetof(arb_problem, m), offsetof(arb_problem, rows));
// softmax: rows, cols, ld_x, ld_y.
inline constexpr ProblemWords kSoftmaxProblemWords =
    kProblemHeaderWords | problem_words(offsetof(arb_problem, rows), offsetof(arb_problem, ld_residual));
// rmsnorm: those, ld_residual and has_residual.
inline constexpr ProblemWords kRmsNormProblemWords =
    kProblemHeaderWords |
    problem_words(offsetof(arb_problem, rows), offsetof(arb_problem, has_residual) + sizeof(int32_t));

// swiglu: rows, cols, ld_x (zero for swiglu: its gate has ld_gate), ld_y, and
// its own ld_gate, ld_up (plugin ABI 1.1).
inline constexpr ProblemWords kSwigluProblemWords =
    kProblemHeaderWords | problem_words(offsetof(arb_problem, rows), offsetof(arb_problem, ld_residual)) |
    problem_words(offsetof(arb_problem, ld_gate), offsetof(arb_problem, ld_up) + sizeof(int64_t));

// rope: rows (tokens), cols (head_dim), ld_x (the token stride), and its own fields (plugin
// ABI 1.2): heads through reserved_rope.
inline constexpr ProblemWords kRopeProblemWords =
    kProblemHeaderWords | problem_words(offsetof(arb_problem, rows), offsetof(arb_problem, ld_y)) |
    problem_words(offsetof(arb_problem, heads), offsetof(arb_problem, reserved_rope) + sizeof(int32_t));

// attention: batch (gemm's word), cols (head_dim), heads (rope's word) and its own fields
// (plugin ABI 1.3): q_len through reserved_attention.
inline constexpr ProblemWords kAttentionProblemWords =
    kProblemHeaderWords | problem_words(offsetof(arb_problem, batch), offsetof(arb_problem, batch) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, cols), offsetof(arb_problem, cols) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, heads), offsetof(arb_problem, heads) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, q_len), offsetof(arb_problem, reserved_attention) + sizeof(int32_t));

// mlp: rows, cols (hidden), ld_x, ld_y; ld_gate, ld_up (swiglu's words: the gate and up
// weights' row strides) and its own fields (plugin ABI 1.4): inter and ld_down.
inline constexpr ProblemWords kMlpProblemWords =
    kProblemHeaderWords | problem_words(offsetof(arb_problem, rows), offsetof(arb_problem, ld_residual)) |
    problem_words(offsetof(arb_problem, ld_gate), offsetof(arb_problem, ld_up) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, inter), offsetof(arb_problem, ld_down) + sizeof(int64_t));

// qkv: rows, cols (hidden), ld_x, ld_y; heads and rope's fields (max_position, rope_theta,
// rope_layout; ld_head zero), kv_heads (attention's word) and its own fields (plugin ABI 1.5):
// head_dim and ld_w.
inline constexpr ProblemWords kQkvProblemWords =
    kProblemHeaderWords | problem_words(offsetof(arb_problem, rows), offsetof(arb_problem, ld_residual)) |
    problem_words(offsetof(arb_problem, heads), offsetof(arb_problem, reserved_rope) + sizeof(int32_t)) |
    problem_words(offsetof(arb_problem, kv_heads), offsetof(arb_problem, kv_heads) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, head_dim), sizeof(arb_problem));

static_assert(offsetof(arb_problem, c_is_d) + sizeof(int32_t) == offsetof(arb_problem, rows),
              "a field between gemm's and the row ops': give it to its op");

}  // namespace arbiter
