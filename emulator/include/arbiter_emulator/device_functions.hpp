// The device built-ins of CUDA C++ in emulated builds: barriers, shuffles and votes (met at
// the emulator's scheduler), atomics, __ldg, address-space conversions, bit and float
// intrinsics. Math runs on the host's libm: results may differ from the GPU's in the last
// bits (the verification gate's tolerances cover that), never in meaning.
#pragma once

#include "arbiter_emulator/device_api.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace arbiter_emulated_cuda {

using arbiter::emu::Where;

// ---- barriers --------------------------------------------------------------------------------
inline int __syncthreads_count(int predicate, Where w = Where::current()) {
  return arbiter::emu::syncthreads_count(predicate, w);
}
inline int __syncthreads_and(int predicate, Where w = Where::current()) {
  return arbiter::emu::syncthreads_count(predicate != 0, w) == static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
}
inline int __syncthreads_or(int predicate, Where w = Where::current()) {
  return arbiter::emu::syncthreads_count(predicate != 0, w) > 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu, Where w = Where::current()) { arbiter::emu::syncwarp(mask, w); }
// Every fiber of a launch runs on the launching host thread, so a fence need only keep the
// compiler from moving memory accesses across it (a thread fence would also draw GCC's -Wtsan
// under the race check's instrumentation).
inline void __threadfence() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// ---- shuffles and votes: 32-bit words through the scheduler -------------------------------------
template <typename T>
T emu_shuffle(arbiter::emu::Shuffle kind, unsigned mask, T value, int operand, int width, Where w) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) % 4 == 0 || sizeof(T) < 4), "shuffle of this type");
  if constexpr (sizeof(T) <= 4) {
    uint32_t word = 0;
    std::memcpy(&word, &value, sizeof(T));
    word = arbiter::emu::shuffle(kind, mask, word, operand, width, w);
    T result;
    std::memcpy(&result, &word, sizeof(T));
    return result;
  } else {
    uint32_t words[sizeof(T) / 4];
    std::memcpy(words, &value, sizeof(T));
    for (uint32_t& word : words) word = arbiter::emu::shuffle(kind, mask, word, operand, width, w);
    T result;
    std::memcpy(&result, words, sizeof(T));
    return result;
  }
}
template <typename T>
T __shfl_sync(unsigned mask, T value, int source, int width = 32, Where w = Where::current()) {
  return emu_shuffle(arbiter::emu::Shuffle::index, mask, value, source, width, w);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32, Where w = Where::current()) {
  return emu_shuffle(arbiter::emu::Shuffle::up, mask, value, static_cast<int>(delta), width, w);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32, Where w = Where::current()) {
  return emu_shuffle(arbiter::emu::Shuffle::down, mask, value, static_cast<int>(delta), width, w);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32, Where w = Where::current()) {
  return emu_shuffle(arbiter::emu::Shuffle::xor_, mask, value, lane_mask, width, w);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, Where w = Where::current()) {
  return arbiter::emu::ballot(mask, predicate, w);
}
inline int __any_sync(unsigned mask, int predicate, Where w = Where::current()) {
  return arbiter::emu::ballot(mask, predicate, w) != 0;
}
inline int __all_sync(unsigned mask, int predicate, Where w = Where::current()) {
  return arbiter::emu::ballot(mask, !predicate, w) == 0;
}
inline unsigned __activemask() { return arbiter::emu::activemask(); }
template <typename T>
unsigned __match_any_sync(unsigned mask, T value, Where w = Where::current()) {
  uint64_t key = 0;
  std::memcpy(&key, &value, sizeof(T) < 8 ? sizeof(T) : 8);
  return arbiter::emu::match_any(mask, key, w);
}
template <typename T>
unsigned __match_all_sync(unsigned mask, T value, int* predicate, Where w = Where::current()) {
  uint64_t key = 0;
  std::memcpy(&key, &value, sizeof(T) < 8 ? sizeof(T) : 8);
  return arbiter::emu::match_all(mask, key, predicate, w);
}

// ---- atomics (every block may run on its own host thread) --------------------------------------------
template <typename T, typename U>
T atomicAdd(T* address, U value) {
  return std::atomic_ref<T>(*address).fetch_add(static_cast<T>(value));
}
template <typename T, typename U>
T atomicSub(T* address, U value) {
  return std::atomic_ref<T>(*address).fetch_sub(static_cast<T>(value));
}
template <typename T, typename U>
T atomicExch(T* address, U value) {
  return std::atomic_ref<T>(*address).exchange(static_cast<T>(value));
}
template <typename T, typename U>
T atomicMin(T* address, U value) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (static_cast<T>(value) < old && !a.compare_exchange_weak(old, static_cast<T>(value))) {
  }
  return old;
}
template <typename T, typename U>
T atomicMax(T* address, U value) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (static_cast<T>(value) > old && !a.compare_exchange_weak(old, static_cast<T>(value))) {
  }
  return old;
}
template <typename T, typename U, typename V>
T atomicCAS(T* address, U compare, V value) {
  T expected = static_cast<T>(compare);
  std::atomic_ref<T>(*address).compare_exchange_strong(expected, static_cast<T>(value));
  return expected;
}
template <typename T, typename U>
T atomicAnd(T* address, U value) {
  return std::atomic_ref<T>(*address).fetch_and(static_cast<T>(value));
}
template <typename T, typename U>
T atomicOr(T* address, U value) {
  return std::atomic_ref<T>(*address).fetch_or(static_cast<T>(value));
}
template <typename T, typename U>
T atomicXor(T* address, U value) {
  return std::atomic_ref<T>(*address).fetch_xor(static_cast<T>(value));
}
inline unsigned atomicInc(unsigned* address, unsigned limit) {
  std::atomic_ref<unsigned> a(*address);
  unsigned old = a.load();
  while (!a.compare_exchange_weak(old, old >= limit ? 0u : old + 1u)) {
  }
  return old;
}
inline unsigned atomicDec(unsigned* address, unsigned limit) {
  std::atomic_ref<unsigned> a(*address);
  unsigned old = a.load();
  while (!a.compare_exchange_weak(old, (old == 0 || old > limit) ? limit : old - 1u)) {
  }
  return old;
}

// ---- loads, address spaces, time -----------------------------------------------------------------------
template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename T>
T __ldcg(const T* p) {
  return *p;
}
template <typename T>
T __ldcs(const T* p) {
  return *p;
}
template <typename T>
void __stcg(T* p, T v) {
  *p = v;
}
template <typename T>
void __stcs(T* p, T v) {
  *p = v;
}
inline size_t __cvta_generic_to_shared(const void* p, Where w = Where::current()) {
  return arbiter::emu::generic_to_shared(p, w);
}
inline void* __cvta_shared_to_generic(size_t address, Where w = Where::current()) {
  return arbiter::emu::shared_to_generic(static_cast<uint32_t>(address), w);
}
inline unsigned __isShared(const void* p) { return arbiter::emu::is_shared(p); }
inline unsigned __isGlobal(const void* p) { return !arbiter::emu::is_shared(p); }
inline long long clock64() { return arbiter::emu::clock64(); }
inline long long clock() { return arbiter::emu::clock64(); }
inline void __nanosleep(unsigned ns) { arbiter::emu::nanosleep(ns); }
[[noreturn]] inline void __trap(Where w = Where::current()) { arbiter::emu::trap("__trap()", w); }
[[noreturn]] inline void __brkpt(Where w = Where::current()) { arbiter::emu::trap("__brkpt()", w); }

// ---- bits ------------------------------------------------------------------------------------------------
inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline int __float_as_int(float v) { return std::bit_cast<int>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }
inline double __longlong_as_double(long long v) { return std::bit_cast<double>(v); }
inline long long __double_as_longlong(double v) { return std::bit_cast<long long>(v); }
inline int __double2hiint(double v) { return static_cast<int>(std::bit_cast<uint64_t>(v) >> 32); }
inline int __double2loint(double v) { return static_cast<int>(std::bit_cast<uint64_t>(v)); }
inline int __popc(unsigned v) { return std::popcount(v); }
inline int __popcll(unsigned long long v) { return std::popcount(v); }
inline int __clz(int v) { return std::countl_zero(static_cast<unsigned>(v)); }
inline int __clzll(long long v) { return std::countl_zero(static_cast<unsigned long long>(v)); }
inline int __ffs(int v) { return v == 0 ? 0 : std::countr_zero(static_cast<unsigned>(v)) + 1; }
inline int __ffsll(long long v) { return v == 0 ? 0 : std::countr_zero(static_cast<unsigned long long>(v)) + 1; }
inline unsigned __brev(unsigned v) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned long long __brevll(unsigned long long v) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(v))) << 32) | __brev(static_cast<unsigned>(v >> 32));
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift & 31)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift & 31));
}
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<uint64_t>(a) * b) >> 32); }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<int64_t>(a) * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline int __mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }

// ---- float intrinsics (host libm: the GPU's approximations are not reproduced) ------------------------------
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline void __sincosf(float x, float* s, float* c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
inline void sincosf(float x, float* s, float* c) { __sincosf(x, s, c); }
// sin(pi x) and cos(pi x) (CUDA's math library, 1 ulp on the GPU; no PTX instruction of its
// own): x less its nearest multiple of 1/2 is exact, so the double sine and cosine of the
// remainder (within a quarter turn), put in its quadrant and rounded once, are what the GPU
// gives to the last bit or so. sin is +-0 at whole x (the sign of x), cos +0 at half-integers;
// NaN for infinities and NaN.
inline void sincospif(float x, float* s, float* c) {
  if (!std::isfinite(x)) {
    *s = *c = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  constexpr double kPi = 3.14159265358979323846264338327950288;
  const double half_turns = std::nearbyint(2.0 * static_cast<double>(x));
  const double rest = static_cast<double>(x) - 0.5 * half_turns;  // in [-1/4, 1/4]
  const double sin_rest = std::sin(kPi * rest), cos_rest = std::cos(kPi * rest);
  double sin_x = 0, cos_x = 0;
  switch (static_cast<int64_t>(std::fmod(half_turns, 4.0)) & 3) {
    case 0: sin_x = sin_rest; cos_x = cos_rest; break;
    case 1: sin_x = cos_rest; cos_x = -sin_rest; break;
    case 2: sin_x = -sin_rest; cos_x = -cos_rest; break;
    default: sin_x = -cos_rest; cos_x = sin_rest; break;
  }
  *s = sin_x == 0 ? std::copysign(0.0f, x) : static_cast<float>(sin_x);
  *c = cos_x == 0 ? 0.0f : static_cast<float>(cos_x);
}
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return std::isnan(x) ? 0.0f : std::clamp(x, 0.0f, 1.0f); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float exp10f(float x) { return std::pow(10.0f, x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline long long __float2ll_rn(float x) { return static_cast<long long>(std::nearbyint(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline float __ll2float_rn(long long x) { return static_cast<float>(x); }

// CUDA's min and max overloads of device code (the C++ names, for every arithmetic pair).
template <typename A, typename B, typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr auto min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmin(static_cast<C>(a), static_cast<C>(b));
  else return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
template <typename A, typename B, typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr auto max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmax(static_cast<C>(a), static_cast<C>(b));
  else return static_cast<C>(a) > static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }

}  // namespace arbiter_emulated_cuda

using namespace arbiter_emulated_cuda;  // NOLINT
