// The turn of rotary position embeddings, shared by the kernels that apply it (rope.cu, and
// qkv.cu on its projections): pair i of a head of dim elements turns by the angle
// position * theta^(-2i / dim).
//
// Angles: the gate allows about 8 f32 ulps of error in each angle, and positions reach 2^24,
// where an angle in f32 radians keeps no fraction of a turn. So the angle is formed in double,
// in turns, position * 2^(i * step) / 2pi with step = -2 log2(theta) / dim, and its nearest
// whole number of turns subtracted (exact); only the remainder, within half a turn, goes to
// f32, to sincospif (full precision, no range reduction to do; not the __sinf intrinsics).
#pragma once

#include <cmath>
#include <cstdint>

namespace arbiter::cuda {

constexpr double kInverseTwoPi = 0.15915494309189533577;

// -2 log2(theta) / dim: pair i's frequency (radians a position) is 2^(i * step). Host code.
inline double rope_step(double theta, int64_t dim) { return -2.0 * std::log2(theta) / static_cast<double>(dim); }

// Pair i's frequency, 2^(i * step), in double.
__device__ __forceinline__ double pair_frequency(double step, int64_t i) { return exp2(static_cast<double>(i) * step); }

// cos c and sin s of the angle position * frequency radians.
__device__ __forceinline__ void position_angle(int32_t position, double frequency, float& c, float& s) {
  const double turns = static_cast<double>(position) * frequency * kInverseTwoPi;
  sincospif(static_cast<float>(2.0 * (turns - rint(turns))), &s, &c);
}

// One pair (x1, x2) turned by the angle of cos c and sin s.
__device__ __forceinline__ void turn(float& x1, float& x2, float c, float s) {
  const float y1 = fmaf(x1, c, -x2 * s);
  x2 = fmaf(x2, c, x1 * s);
  x1 = y1;
}

}  // namespace arbiter::cuda
