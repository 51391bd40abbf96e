// Stand-in for CUDA's vector types (uint4, float4, ...) in emulated builds: the same members
// and alignments as CUDA's, so that 16-byte vectors stay 16-byte aligned.
#pragma once

#include "arbiter_emulator/device_api.hpp"

namespace arbiter_emulated_cuda {

#define ARBITER_EMU_VECTOR2(NAME, T, ALIGN)                   \
  struct alignas(ALIGN) NAME {                                \
    T x, y;                                                   \
  };                                                          \
  inline constexpr NAME make_##NAME(T x, T y) { return NAME{x, y}; }
#define ARBITER_EMU_VECTOR4(NAME, T, ALIGN)                   \
  struct alignas(ALIGN) NAME {                                \
    T x, y, z, w;                                             \
  };                                                          \
  inline constexpr NAME make_##NAME(T x, T y, T z, T w) { return NAME{x, y, z, w}; }

ARBITER_EMU_VECTOR2(char2, signed char, 2)
ARBITER_EMU_VECTOR2(uchar2, unsigned char, 2)
ARBITER_EMU_VECTOR4(char4, signed char, 4)
ARBITER_EMU_VECTOR4(uchar4, unsigned char, 4)
ARBITER_EMU_VECTOR2(short2, short, 4)
ARBITER_EMU_VECTOR2(ushort2, unsigned short, 4)
ARBITER_EMU_VECTOR4(short4, short, 8)
ARBITER_EMU_VECTOR4(ushort4, unsigned short, 8)
ARBITER_EMU_VECTOR2(int2, int, 8)
ARBITER_EMU_VECTOR2(uint2, unsigned int, 8)
ARBITER_EMU_VECTOR4(int4, int, 16)
ARBITER_EMU_VECTOR4(uint4, unsigned int, 16)
ARBITER_EMU_VECTOR2(float2, float, 8)
ARBITER_EMU_VECTOR4(float4, float, 16)
ARBITER_EMU_VECTOR2(longlong2, long long, 16)
ARBITER_EMU_VECTOR2(ulonglong2, unsigned long long, 16)
ARBITER_EMU_VECTOR2(double2, double, 16)

#undef ARBITER_EMU_VECTOR2
#undef ARBITER_EMU_VECTOR4

struct int3 {
  int x, y, z;
};
struct float3 {
  float x, y, z;
};
inline constexpr uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }
inline constexpr int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline constexpr float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }

}  // namespace arbiter_emulated_cuda

using namespace arbiter_emulated_cuda;  // NOLINT
