// The constants of Cephes' single-precision e^x (about 1 ulp on [-87, 88]), shared by its
// 8-lane AVX2 form (exp8, simd_avx2.hpp) and its 16-lane AVX-512 form (exp16,
// swiglu_avx512_impl.hpp): different instruction sets, one function, so that a kernel's
// vector body, its tails and its AVX2 twin all compute the same values.
#pragma once

namespace arbiter::cpu::exp_polynomial {

// |x| is clamped here: e^x stays finite above, and below it underflows to 0 rather than to
// a denormal that the 2^n scaling would mangle.
inline constexpr float kClamp = 88.3762626647949f;
inline constexpr float kLog2e = 1.44269504088896341f;
// ln 2 split in two, so that x - n ln 2 keeps its low bits.
inline constexpr float kLn2High = 0.693359375f;
inline constexpr float kLn2Low = -2.12194440e-4f;
// e^r - 1 - r = r^2 P(r) on |r| <= ln 2 / 2, P's coefficients from the highest degree down.
inline constexpr float kCoefficients[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                           4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace arbiter::cpu::exp_polynomial
