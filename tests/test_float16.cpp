// f16 and bf16 conversions (arbiter/float16.hpp) against hardware and the definitions.
#include <arbiter/float16.hpp>

#include <doctest/doctest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace arbiter;

namespace {
__attribute__((target("f16c"))) uint16_t hardware_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float hardware_float(uint16_t h) { return _cvtsh_ss(h); }
}  // namespace

TEST_CASE("f16: every half value widens exactly and narrows back to itself") {
  const bool f16c = __builtin_cpu_supports("f16c");
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (f16c) {
      const float hw = hardware_float(static_cast<uint16_t>(h));
      REQUIRE(std::memcmp(&f, &hw, sizeof f) == 0);
    }
    if (std::isnan(f)) {
      CHECK(std::isnan(half_to_float(float_to_half(f))));
    } else {
      REQUIRE(float_to_half(f) == h);
    }
  }
}

TEST_CASE("f16: rounding to nearest even agrees with F16C on random and edge floats") {
  if (!__builtin_cpu_supports("f16c")) return;  // nothing to compare with
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    CAPTURE(f);
    REQUIRE(float_to_half(f) == hardware_half(f));
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f, -0.0f, 1.0009765625f, 1.00048828125f})
    CHECK(float_to_half(f) == hardware_half(f));
}

TEST_CASE("bf16: round to nearest even, NaN kept quiet") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  CHECK(float_to_bf16(1.00390625f) == 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  CHECK(float_to_bf16(1.01171875f) == 0x3f82);
  CHECK(float_to_bf16(1.0048828125f) == 0x3f81);  // above halfway: rounds up
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  CHECK(float_to_bf16(INFINITY) == 0x7f80);
  CHECK(float_to_bf16(3.4e38f) == 0x7f80);  // rounds past the largest finite bf16
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    if (!std::isnan(f)) REQUIRE(float_to_bf16(f) == b);
  }
}

TEST_CASE("load_float and store_float use these conversions") {
  uint16_t h[2];
  store_float(h, 1, ARB_DTYPE_F16, 0.5f);
  CHECK(h[1] == 0x3800);
  CHECK(load_float(h, 1, ARB_DTYPE_F16) == 0.5f);
  store_float(h, 0, ARB_DTYPE_BF16, -2.0f);
  CHECK(load_float(h, 0, ARB_DTYPE_BF16) == -2.0f);
  CHECK(dtype_size(ARB_DTYPE_F32) == 4);
  CHECK(dtype_size(0) == 0);
}
