// What the ops that turn by rotary position embeddings share (rope, and qkv's rope on q and
// k): the fields (theta, max_position, layout) in problem text and their checks, the positions
// tensor, and the tolerance's floor for angles computed in f32.
#pragma once

#include "problem/op.hpp"
#include "problem/ops/tensor_views.hpp"

#include <arbiter/plugin.h>

#include <cstdint>

namespace arbiter {

// Positions are exact in f32 up to 2^24; beyond it no f32 kernel can name the angle.
inline constexpr int64_t kMaxPositionLimit = int64_t{1} << 24;

inline const char* rope_layout_name(int32_t layout) { return layout == ARB_ROPE_INTERLEAVED ? "interleaved" : "half"; }

// Problem text: layout=half|interleaved, theta= (500000), maxpos= (8192).
void read_rope_fields(ProblemFields& fields, arb_problem& p);
// max_position, rope_theta, rope_layout and reserved_rope in range; `op` names the op.
void validate_rope_fields(const arb_problem& p, const char* op);

// An honest f32 kernel computes each angle as an f32 product: a relative error of a few units
// of f32 rounding on angles up to max_position * theta^(-2i / dim), which turns each pair by
// that much. The relative norm error of the output is then about that error's root mean
// square over the pairs (the elements are drawn alike), at most this.
double rope_angle_error_floor(const arb_problem& p, int64_t head_dim);

// positions: int32 with `like`'s first `leading` dimensions (one per row), contiguous, on the
// problem's device, aligned; its span checked.
Matrix check_positions(const DLTensor* positions, const DLTensor* like, int leading, const arb_problem& p);
// On the CPU the host can read what a device kernel could only trust: every position in
// [0, max_position).
void check_position_values(const int32_t* positions, const arb_problem& p);

}  // namespace arbiter
