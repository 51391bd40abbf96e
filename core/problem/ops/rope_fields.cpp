#include "problem/ops/rope_fields.hpp"

#include "problem/problem_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace arbiter {

void read_rope_fields(ProblemFields& fields, arb_problem& p) {
  if (auto layout = fields.take("layout")) {
    if (*layout == "half")
      p.rope_layout = ARB_ROPE_SPLIT_HALF;
    else if (*layout == "interleaved")
      p.rope_layout = ARB_ROPE_INTERLEAVED;
    else
      fields.bad(fmt::format("'layout={}': expected half or interleaved", *layout));
  }
  p.rope_theta = fields.take_double("theta").value_or(500000.0);
  p.max_position = fields.take_int("maxpos", 8192);
}

void validate_rope_fields(const arb_problem& p, const char* op) {
  if (p.max_position < 1 || p.max_position > kMaxPositionLimit)
    invalid_argument(fmt::format("{}: max_position = {} must be from 1 to {} (positions exact in f32)", op,
                                 p.max_position, kMaxPositionLimit));
  if (!(p.rope_theta > 1.0) || !std::isfinite(p.rope_theta))
    invalid_argument(fmt::format("{}: theta = {} must be a finite number above 1", op, p.rope_theta));
  if (p.rope_layout != ARB_ROPE_SPLIT_HALF && p.rope_layout != ARB_ROPE_INTERLEAVED)
    invalid_argument(fmt::format("{}: layout {} is neither split-half (0) nor interleaved (1)", op, p.rope_layout));
  if (p.reserved_rope != 0) invalid_argument(fmt::format("{}: reserved_rope must be 0", op));
}

double rope_angle_error_floor(const arb_problem& p, int64_t head_dim) {
  constexpr double kAngleUlps = 8.0;
  const int64_t pairs = std::max<int64_t>(1, head_dim / 2);
  double sum = 0.0;
  for (int64_t i = 0; i < pairs; ++i) {
    const double inv_freq = std::pow(p.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    sum += inv_freq * inv_freq;
  }
  return kAngleUlps * 0x1p-24 * static_cast<double>(p.max_position) * std::sqrt(sum / static_cast<double>(pairs));
}

Matrix check_positions(const DLTensor* t, const DLTensor* like, int leading, const arb_problem& p) {
  check_present(t, "positions");
  if (t->dtype.code != kDLInt || t->dtype.bits != 32 || t->dtype.lanes != 1)
    invalid_argument(fmt::format("positions must be int32, got dtype code {} with {} bits", t->dtype.code, t->dtype.bits));
  int32_t device_type;
  std::memcpy(&device_type, &t->device.device_type, sizeof device_type);
  if (device_type != p.device_type || t->device.device_id != p.device_id)
    invalid_argument("positions must be on x's device");
  bool same = t->ndim == leading;
  for (int i = 0; same && i < t->ndim; ++i) same = t->shape[i] == like->shape[i];
  if (!same) invalid_argument("positions must have x's leading shape (one per token)");
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];  // x's leading sizes: their product was checked
  check_address(t, "positions", sizeof(int32_t));
  if (t->strides != nullptr) {
    int64_t step = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (t->shape[i] > 1 && t->strides[i] != step) invalid_argument("positions must be contiguous");
      step *= t->shape[i];
    }
  }
  Matrix m{"positions", data_of(t), 1, count, count};
  if (static_cast<uint64_t>(count) * 4 > UINTPTR_MAX - address(m.data))
    invalid_argument("positions: its size spans more memory than an address can reach");
  m.bytes = static_cast<uint64_t>(count) * 4;
  return m;
}

void check_position_values(const int32_t* positions, const arb_problem& p) {
  for (int64_t t = 0; t < p.rows; ++t)
    if (positions[t] < 0 || positions[t] >= p.max_position) [[unlikely]]
      invalid_argument(fmt::format("positions[{}] = {} is outside [0, max_position = {})", t, positions[t], p.max_position));
}

}  // namespace arbiter
