// arbiter: portable conversions between f32 and the 16-bit float formats (IEEE binary16 and
// bfloat16), round-to-nearest-even, NaN and infinity preserved. Header-only, for plugin
// authors and the runtime alike. Hot loops may use hardware conversions instead; these
// are the definition they must agree with.
#pragma once

#include <arbiter/types.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace arbiter {

namespace detail {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exponent == 31) {  // infinity, or NaN made quiet (as hardware conversion does)
    return detail::bits_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u));
  }
  return detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = detail::float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (ax < 0x38800000u) {  // below 2^-14: subnormal half; scaling by 2^24 is exact
    const float scaled = detail::bits_float(ax) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t rounded = ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float bf16_to_float(uint16_t b) { return detail::bits_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = detail::float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Bytes per element of a dtype; 0 for an invalid one.
inline size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return 4;
    case ARB_DTYPE_F16:
    case ARB_DTYPE_BF16: return 2;
    default: return 0;
  }
}

// Element i of an array of `dtype`, widened to float. For reference paths, not hot loops.
inline float load_float(const void* base, int64_t i, int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return static_cast<const float*>(base)[i];
    case ARB_DTYPE_F16: return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case ARB_DTYPE_BF16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return 0.0f;
  }
}

// Stores v into element i, rounding to nearest even.
inline void store_float(void* base, int64_t i, int32_t dtype, float v) {
  switch (dtype) {
    case ARB_DTYPE_F32: static_cast<float*>(base)[i] = v; break;
    case ARB_DTYPE_F16: static_cast<uint16_t*>(base)[i] = float_to_half(v); break;
    case ARB_DTYPE_BF16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
    default: break;
  }
}

}  // namespace arbiter
