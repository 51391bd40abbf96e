// __half and __nv_bfloat16 for emulated builds: 16-bit storage, conversions rounded to
// nearest even exactly as cvt.rn.f16.f32 / cvt.rn.bf16.f32 do (NaN becomes 0x7fff, the
// canonical NaN), arithmetic computed wider and rounded once to 16 bits, as the GPU's
// instructions round. The pairs (__half2, __nv_bfloat162) hold .x (low) and .y (high).
#pragma once

#include "vector_types.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace arbiter_emulated_cuda {

namespace float16_detail {

// |d| rounded to nearest even into a binary format with `mantissa_bits` fraction bits and
// exponent bias `bias` (subnormals, overflow to infinity included); NaN is 0x7fff. One
// function for every input width: a float widens to double exactly.
inline uint16_t round_to_format(double d, int mantissa_bits, int bias, uint16_t infinity) {
  const uint64_t u = std::bit_cast<uint64_t>(d);
  const uint16_t sign = static_cast<uint16_t>((u >> 63) << 15);
  const uint64_t magnitude = u & 0x7fffffffffffffffull;
  if (magnitude > 0x7ff0000000000000ull) return 0x7fff;  // NaN
  if (magnitude == 0x7ff0000000000000ull) return static_cast<uint16_t>(sign | infinity);
  const int raw_exponent = static_cast<int>(magnitude >> 52);
  if (raw_exponent == 0) return sign;  // a double subnormal: far below either format's range
  const int exponent = raw_exponent - 1023;
  const uint64_t significand = (magnitude & 0xfffffffffffffull) | (1ull << 52);  // 1.f x 2^exponent
  const bool normal = exponent >= 1 - bias;
  const int ulp_exponent = (normal ? exponent : 1 - bias) - mantissa_bits;
  const int shift = ulp_exponent - (exponent - 52);  // > 0: both formats are narrower than double
  if (shift >= 64) return sign;                      // below half the smallest subnormal
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  kept += rest > half || (rest == half && (kept & 1u));
  const uint64_t bits = normal ? (static_cast<uint64_t>(exponent + bias - 1) << mantissa_bits) + kept : kept;
  return static_cast<uint16_t>(sign | (bits >= infinity ? infinity : bits));
}

inline uint16_t double_to_half_bits(double d) { return round_to_format(d, 10, 15, 0x7c00); }
inline uint16_t double_to_bfloat16_bits(double d) { return round_to_format(d, 7, 127, 0x7f80); }
inline uint16_t float_to_half_bits(float f) { return double_to_half_bits(f); }
inline uint16_t float_to_bfloat16_bits(float f) { return double_to_bfloat16_bits(f); }

// cvt.f32.f16: exact, except that every NaN becomes the canonical 0x7fffffff (an H200 does so:
// tests/emulator/golden/). bf16 widens by a shift, so its NaNs keep sign and payload.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f && mantissa != 0) return std::bit_cast<float>(0x7fffffffu);
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u);
  if (exponent == 0) {
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

inline float bfloat16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace float16_detail

struct __half_raw {
  unsigned short x;
};
struct __nv_bfloat16_raw {
  unsigned short x;
};

// One 16-bit float type per format; Traits gives the conversions.
template <typename Traits>
struct Float16 {
  unsigned short __x = 0;
  Float16() = default;
  Float16(float f) : __x(Traits::from_float(f)) {}                      // NOLINT: implicit, as in CUDA
  Float16(double d) : __x(Traits::from_double(d)) {}                    // NOLINT
  Float16(int i) : __x(Traits::from_double(static_cast<double>(i))) {}  // NOLINT
  Float16(unsigned int i) : __x(Traits::from_double(static_cast<double>(i))) {}      // NOLINT
  Float16(long long i) : __x(Traits::from_double(static_cast<double>(i))) {}         // NOLINT
  Float16(unsigned long long i) : __x(Traits::from_double(static_cast<double>(i))) {}  // NOLINT
  Float16(typename Traits::Raw r) : __x(r.x) {}                         // NOLINT
  operator float() const { return Traits::to_float(__x); }
  operator typename Traits::Raw() const { return typename Traits::Raw{__x}; }
  static Float16 from_bits(unsigned short bits) {
    Float16 h;
    h.__x = bits;
    return h;
  }
  static Float16 rounded(double d) { return from_bits(Traits::from_double(d)); }
  Float16& operator+=(Float16 o) { return *this = rounded(double(float(*this)) + double(float(o))); }
  Float16& operator-=(Float16 o) { return *this = rounded(double(float(*this)) - double(float(o))); }
  Float16& operator*=(Float16 o) { return *this = rounded(double(float(*this)) * double(float(o))); }
  Float16& operator/=(Float16 o) { return *this = rounded(double(float(*this)) / double(float(o))); }
  Float16& operator++() { return *this += Float16(1.0f); }
  Float16& operator--() { return *this -= Float16(1.0f); }
};
template <typename T>
Float16<T> operator+(Float16<T> a, Float16<T> b) { return Float16<T>::rounded(double(float(a)) + double(float(b))); }
template <typename T>
Float16<T> operator-(Float16<T> a, Float16<T> b) { return Float16<T>::rounded(double(float(a)) - double(float(b))); }
template <typename T>
Float16<T> operator*(Float16<T> a, Float16<T> b) { return Float16<T>::rounded(double(float(a)) * double(float(b))); }
template <typename T>
Float16<T> operator/(Float16<T> a, Float16<T> b) { return Float16<T>::rounded(double(float(a)) / double(float(b))); }
template <typename T>
Float16<T> operator-(Float16<T> a) { return Float16<T>::from_bits(static_cast<unsigned short>(a.__x ^ 0x8000u)); }
template <typename T>
Float16<T> operator+(Float16<T> a) { return a; }
template <typename T>
bool operator==(Float16<T> a, Float16<T> b) { return float(a) == float(b); }
template <typename T>
bool operator!=(Float16<T> a, Float16<T> b) { return float(a) != float(b); }
template <typename T>
bool operator<(Float16<T> a, Float16<T> b) { return float(a) < float(b); }
template <typename T>
bool operator<=(Float16<T> a, Float16<T> b) { return float(a) <= float(b); }
template <typename T>
bool operator>(Float16<T> a, Float16<T> b) { return float(a) > float(b); }
template <typename T>
bool operator>=(Float16<T> a, Float16<T> b) { return float(a) >= float(b); }

struct HalfTraits {
  using Raw = __half_raw;
  static unsigned short from_float(float f) { return float16_detail::float_to_half_bits(f); }
  static unsigned short from_double(double d) { return float16_detail::double_to_half_bits(d); }
  static float to_float(unsigned short h) { return float16_detail::half_bits_to_float(h); }
};
struct Bfloat16Traits {
  using Raw = __nv_bfloat16_raw;
  static unsigned short from_float(float f) { return float16_detail::float_to_bfloat16_bits(f); }
  static unsigned short from_double(double d) { return float16_detail::double_to_bfloat16_bits(d); }
  static float to_float(unsigned short b) { return float16_detail::bfloat16_bits_to_float(b); }
};

using __half = Float16<HalfTraits>;
using __nv_bfloat16 = Float16<Bfloat16Traits>;
using half = __half;
using nv_bfloat16 = __nv_bfloat16;
static_assert(sizeof(__half) == 2 && sizeof(__nv_bfloat16) == 2, "16-bit storage");

template <typename T>
struct alignas(4) Float16Pair {
  T x, y;
  Float16Pair() = default;
  Float16Pair(T a, T b) : x(a), y(b) {}
};
using __half2 = Float16Pair<__half>;
using __nv_bfloat162 = Float16Pair<__nv_bfloat16>;
using half2 = __half2;
using nv_bfloat162 = __nv_bfloat162;

// ---- conversions ---------------------------------------------------------------------------------
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half __double2half(double d) { return __half(d); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { return __half::from_bits(u); }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __half __short_as_half(short s) { return __half::from_bits(static_cast<unsigned short>(s)); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return float(b); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16::from_bits(u); }
inline short __bfloat16_as_short(__nv_bfloat16 b) { return static_cast<short>(b.__x); }
inline __nv_bfloat16 __short_as_bfloat16(short s) { return __nv_bfloat16::from_bits(static_cast<unsigned short>(s)); }

inline __half2 __float2half2_rn(float f) { return {__half(f), __half(f)}; }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline __half2 __half2half2(__half a) { return {a, a}; }
inline float2 __half22float2(__half2 h) { return {float(h.x), float(h.y)}; }
inline __half2 __float22half2_rn(float2 f) { return {__half(f.x), __half(f.y)}; }
inline float __low2float(__half2 h) { return float(h.x); }
inline float __high2float(__half2 h) { return float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __nv_bfloat162 __float2bfloat162_rn(float f) { return {__nv_bfloat16(f), __nv_bfloat16(f)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }
inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return {a, a}; }
inline float2 __bfloat1622float2(__nv_bfloat162 b) { return {float(b.x), float(b.y)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return {__nv_bfloat16(f.x), __nv_bfloat16(f.y)}; }
inline float __low2float(__nv_bfloat162 b) { return float(b.x); }
inline float __high2float(__nv_bfloat162 b) { return float(b.y); }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 b) { return b.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 b) { return b.y; }

// ---- arithmetic and math, for both formats ----------------------------------------------------------
template <typename T>
Float16<T> __hadd(Float16<T> a, Float16<T> b) { return a + b; }
template <typename T>
Float16<T> __hsub(Float16<T> a, Float16<T> b) { return a - b; }
template <typename T>
Float16<T> __hmul(Float16<T> a, Float16<T> b) { return a * b; }
template <typename T>
Float16<T> __hdiv(Float16<T> a, Float16<T> b) { return a / b; }
template <typename T>
Float16<T> __hfma(Float16<T> a, Float16<T> b, Float16<T> c) {
  return Float16<T>::rounded(double(float(a)) * double(float(b)) + double(float(c)));
}
template <typename T>
Float16<T> __hneg(Float16<T> a) { return -a; }
template <typename T>
Float16<T> __habs(Float16<T> a) { return Float16<T>::from_bits(static_cast<unsigned short>(a.__x & 0x7fffu)); }
template <typename T>
Float16<T> __hmax(Float16<T> a, Float16<T> b) { return Float16<T>(std::fmax(float(a), float(b))); }
template <typename T>
Float16<T> __hmin(Float16<T> a, Float16<T> b) { return Float16<T>(std::fmin(float(a), float(b))); }
template <typename T>
bool __hisnan(Float16<T> a) { return std::isnan(float(a)); }
template <typename T>
int __hisinf(Float16<T> a) { return std::isinf(float(a)) ? (float(a) > 0 ? 1 : -1) : 0; }
template <typename T>
bool __heq(Float16<T> a, Float16<T> b) { return a == b; }
template <typename T>
bool __hlt(Float16<T> a, Float16<T> b) { return a < b; }
template <typename T>
bool __hgt(Float16<T> a, Float16<T> b) { return a > b; }
template <typename T>
Float16<T> hexp(Float16<T> a) { return Float16<T>(std::exp(float(a))); }
template <typename T>
Float16<T> hlog(Float16<T> a) { return Float16<T>(std::log(float(a))); }
template <typename T>
Float16<T> hsqrt(Float16<T> a) { return Float16<T>(std::sqrt(float(a))); }
template <typename T>
Float16<T> hrsqrt(Float16<T> a) { return Float16<T>(1.0f / std::sqrt(float(a))); }
template <typename T>
Float16<T> hrcp(Float16<T> a) { return Float16<T>(1.0f / float(a)); }
template <typename T>
Float16Pair<T> __hadd2(Float16Pair<T> a, Float16Pair<T> b) { return {a.x + b.x, a.y + b.y}; }
template <typename T>
Float16Pair<T> __hsub2(Float16Pair<T> a, Float16Pair<T> b) { return {a.x - b.x, a.y - b.y}; }
template <typename T>
Float16Pair<T> __hmul2(Float16Pair<T> a, Float16Pair<T> b) { return {a.x * b.x, a.y * b.y}; }
template <typename T>
Float16Pair<T> __hfma2(Float16Pair<T> a, Float16Pair<T> b, Float16Pair<T> c) {
  return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
template <typename T>
Float16Pair<T> operator+(Float16Pair<T> a, Float16Pair<T> b) { return __hadd2(a, b); }
template <typename T>
Float16Pair<T> operator*(Float16Pair<T> a, Float16Pair<T> b) { return __hmul2(a, b); }

}  // namespace arbiter_emulated_cuda

using namespace arbiter_emulated_cuda;  // NOLINT
