// arbiter_ptx_probes: runs every inline-PTX wrapper the cuda plugin's kernels use (and the
// math library functions the emulator computes its own way: sincospif), on fixed inputs, and
// writes every lane's outputs. On a GPU this is the ground truth that the SIMT
// emulator (tests/emulator) is held to: the file a GPU run writes is committed as golden data.
//
//   arbiter_ptx_probes --list                   the probes, one per line
//   arbiter_ptx_probes [--probe=NAME ...] [--out=FILE]
//
// Without --probe every probe runs (bench/gpu-check.sh runs one process per probe, so that a
// fault costs one probe). Output (appended to FILE, default stdout), line-oriented text:
//   # ...                                   a comment: the device, the probe's inputs
//   <probe> <where> <hex> [<hex> ...]       raw outputs: 32-bit words (16-bit ones for b16 data)
//   result <probe> ok | MISMATCH <n> first: <where> | SKIPPED <why> | ERROR <why>
// The inputs are functions of the indices, written out in each probe's comment. `result`
// compares the outputs with what the PTX ISA's documented layouts predict (computed on the
// host here); the raw outputs, not that prediction, are the golden data.
#include "common.cuh"
#include "launch.cuh"
#include "sm80_ptx.cuh"
#include "sm90_ptx.cuh"
#include "tensor_map.hpp"

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace arbiter::cuda;

// ---- output ---------------------------------------------------------------------------------

FILE* out = stdout;

void line(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vfprintf(out, format, args);
  va_end(args);
  std::fputc('\n', out);
}

std::string hex_words(const uint32_t* words, size_t count) {
  std::string s;
  char buffer[16];
  for (size_t i = 0; i < count; ++i) {
    std::snprintf(buffer, sizeof buffer, i ? " %08x" : "%08x", words[i]);
    s += buffer;
  }
  return s;
}

std::string hex_halves(const uint16_t* halves, size_t count) {
  std::string s;
  char buffer[16];
  for (size_t i = 0; i < count; ++i) {
    std::snprintf(buffer, sizeof buffer, i ? " %04x" : "%04x", halves[i]);
    s += buffer;
  }
  return s;
}

int probes_mismatched = 0;  // probes whose outputs differ from the prediction (the exit status)

// Counts differences between outputs and predictions; remembers the first.
struct Comparison {
  size_t mismatches = 0;
  std::string first;
  void expect(bool same, const std::string& where) {
    if (!same && mismatches++ == 0) first = where;
  }
  void report(const char* probe) const {
    if (mismatches == 0) line("result %s ok", probe);
    else line("result %s MISMATCH %zu first: %s", probe, mismatches, first.c_str());
    probes_mismatched += mismatches != 0;
  }
};

std::string format(const char* f, ...) {
  char buffer[512];
  va_list args;
  va_start(args, f);
  std::vsnprintf(buffer, sizeof buffer, f, args);
  va_end(args);
  return buffer;
}

// A CUDA failure ends the probe (and, when sticky, the process: one probe per process).
struct CudaError {
  std::string what;
};
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw CudaError{format("%s: %s", what, cudaGetErrorString(status))};
}

template <typename T>
struct DeviceBuffer {
  T* data = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    check(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(T)), "cudaMalloc");
    check(cudaMemset(data, 0, n * sizeof(T)), "cudaMemset");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& v) {
    check(cudaMemcpy(data, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download() const {
    std::vector<T> v(count);
    check(cudaMemcpy(v.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return v;
  }
};

void finish(cudaError_t launched, const char* what) {
  check(launched, what);
  check(cudaDeviceSynchronize(), what);
}

// ---- host-side 16-bit encodings (for inputs and predictions only) ----------------------------

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Exact for the small integers and short fractions the probes use (no rounding happens).
uint16_t bf16_exact(float f) { return static_cast<uint16_t>(float_bits(f) >> 16); }
uint16_t f16_exact(float f) {
  // Normal numbers and zero only: sign, exponent rebiased from 127 to 15, 10 mantissa bits.
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) == 0) return static_cast<uint16_t>(u >> 16);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exponent = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent) << 10) | ((u >> 13) & 0x3ffu));
}
float f16_value(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ffu;
  if (exponent == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mantissa), -24);
  return bits_float(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

// ---- probe: f16/bf16 conversions ---------------------------------------------------------------
// Inputs: the f32 bit patterns in kConvertInputs (zeros, ties, the f16 range's ends,
// subnormals, infinities, NaNs with payloads) through from_float<__half / __nv_bfloat16>
// (cvt.rn.f16.f32, cvt.rn.bf16.f32), and the 16-bit patterns in kWidenInputs through
// to_float (cvt.f32.f16, cvt.f32.bf16).

constexpr uint32_t kConvertInputs[] = {
    0x00000000, 0x80000000, 0x3f800000, 0x3f800001, 0x3f801000, 0x3f802000, 0x3f803000, 0x3f808000,
    0x3f818000, 0x3f818001, 0xbf808000, 0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, 0x33800000,
    0x33000000, 0x33400000, 0x38800000, 0x387fc000, 0x00000001, 0x007fffff, 0x7f7fffff, 0x7f800000,
    0xff800000, 0x7fc00000, 0x7f800001, 0xffc12345, 0x40490fdb, 0xc2f6e979, 0x3eaaaaab, 0x4b800001};
constexpr uint16_t kWidenInputs[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x7c00,
                                     0xfc00, 0x7e00, 0x7c01, 0xfe3f, 0x3555, 0xc248, 0x7f7f, 0xff81};
constexpr int kConvertCount = sizeof kConvertInputs / sizeof kConvertInputs[0];
constexpr int kWidenCount = sizeof kWidenInputs / sizeof kWidenInputs[0];

__global__ void convert_kernel(const uint32_t* in, const uint16_t* widen_in, uint16_t* to_f16, uint16_t* to_bf16,
                               uint32_t* from_f16, uint32_t* from_bf16) {
  const int i = threadIdx.x;
  if (i < kConvertCount) {
    const float f = __uint_as_float(in[i]);
    const __half h = from_float<__half>(f);
    const __nv_bfloat16 b = from_float<__nv_bfloat16>(f);
    to_f16[i] = *reinterpret_cast<const uint16_t*>(&h);
    to_bf16[i] = *reinterpret_cast<const uint16_t*>(&b);
  }
  if (i < kWidenCount) {
    const uint16_t bits = widen_in[i];
    from_f16[i] = __float_as_uint(to_float(*reinterpret_cast<const __half*>(&bits)));
    from_bf16[i] = __float_as_uint(to_float(*reinterpret_cast<const __nv_bfloat16*>(&bits)));
  }
}

// Round to nearest even, the IEEE way, for the prediction (NaNs: quiet, payload kept high).
uint16_t predict_bf16(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}
uint16_t predict_f16(uint32_t u) {
  const uint32_t sign = (u >> 16) & 0x8000u, magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent < -25) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
  // Exact value in units of 2^-24 (the f16 subnormal step), rounded to nearest even.
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  if (exponent < -14) {
    const int shift = -exponent - 14 + 13;  // to units of 2^-24
    const uint32_t kept = mantissa >> shift, rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
    const uint32_t rounded = kept + (rest > half || (rest == half && (kept & 1u)));
    return static_cast<uint16_t>(sign | rounded);  // may carry into the smallest normal: still right
  }
  const uint32_t kept = mantissa >> 13, rest = mantissa & 0x1fffu;
  uint32_t bits = (static_cast<uint32_t>(exponent + 15) << 10) | (kept & 0x3ffu);
  bits += rest > 0x1000u || (rest == 0x1000u && (kept & 1u));
  return static_cast<uint16_t>(sign | bits);
}

void probe_convert() {
  DeviceBuffer<uint32_t> in(kConvertCount), from_f16(kWidenCount), from_bf16(kWidenCount);
  DeviceBuffer<uint16_t> widen_in(kWidenCount), to_f16(kConvertCount), to_bf16(kConvertCount);
  in.upload(std::vector<uint32_t>(std::begin(kConvertInputs), std::end(kConvertInputs)));
  widen_in.upload(std::vector<uint16_t>(std::begin(kWidenInputs), std::end(kWidenInputs)));
  finish(launch_kernel(convert_kernel, dim3(1), dim3(32), 0, nullptr, in.data, widen_in.data, to_f16.data, to_bf16.data,
                       from_f16.data, from_bf16.data),
         "convert_kernel");
  const auto h = to_f16.download(), b = to_bf16.download();
  const auto fh = from_f16.download(), fb = from_bf16.download();
  line("# convert: from_float<__half>, from_float<__nv_bfloat16> of the f32 patterns; to_float of the 16-bit ones");
  Comparison cmp;
  for (int i = 0; i < kConvertCount; ++i) {
    const uint32_t u = kConvertInputs[i];
    line("convert f32=%08x f16=%04x bf16=%04x", u, h[i], b[i]);
    // NaNs: only that the result is a NaN (the payload the hardware keeps is what the golden data says).
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    cmp.expect(nan ? (h[i] & 0x7fffu) > 0x7c00u : h[i] == predict_f16(u), format("f16 of %08x: %04x", u, h[i]));
    cmp.expect(nan ? (b[i] & 0x7fffu) > 0x7f80u : b[i] == predict_bf16(u), format("bf16 of %08x: %04x", u, b[i]));
  }
  for (int i = 0; i < kWidenCount; ++i) {
    const uint16_t v = kWidenInputs[i];
    line("widen b16=%04x from_f16=%08x from_bf16=%08x", v, fh[i], fb[i]);
    const float want_h = f16_value(v);
    const bool nan_h = (v & 0x7fffu) > 0x7c00u, nan_b = (v & 0x7fffu) > 0x7f80u;
    const bool inf_h = (v & 0x7fffu) == 0x7c00u;
    cmp.expect(nan_h ? std::isnan(bits_float(fh[i]))
               : inf_h ? fh[i] == ((v & 0x8000u ? 0xff800000u : 0x7f800000u))
                       : fh[i] == float_bits(want_h),
               format("f32 of f16 %04x: %08x", v, fh[i]));
    cmp.expect(nan_b ? std::isnan(bits_float(fb[i])) : fb[i] == static_cast<uint32_t>(v) << 16,
               format("f32 of bf16 %04x: %08x", v, fb[i]));
  }
  cmp.report("convert");
}

// ---- probe: sincospif (the math library, not an instruction: rope's angles) --------------------
// Inputs: the finite f32 values in kSinCosPiInputs (zeros, quarter and half turns, whole numbers
// where the sine is an exact zero, fractions, values up to 2^24 whose fraction of a turn is
// all that counts). Predicted: sin(pi x) and cos(pi x) in long double after the exact reduction
// of x modulo 2; the GPU's results within 1 ulp of them, and exactly 0 or +-1 at multiples of 1/2.

constexpr float kSinCosPiInputs[] = {0.0f,     -0.0f,       0.25f,      0.5f,       -0.5f,      1.0f,
                                     -1.0f,    1.5f,        2.0f,       -2.0f,      0.75f,      1.0f / 3,
                                     1.0f / 6, 0.1234567f,  -0.4999f,   0.999999f,  3.3f,       -123.456f,
                                     1e-20f,   12345.678f,  4194304.5f, 16777215.0f, 1e-5f,     -0.0625f};
constexpr int kSinCosPiCount = sizeof kSinCosPiInputs / sizeof kSinCosPiInputs[0];

__global__ void sincospi_kernel(const float* in, float* sines, float* cosines) {
  const int i = threadIdx.x;
  if (i < kSinCosPiCount) sincospif(in[i], &sines[i], &cosines[i]);
}

// Within 1 ulp of `want`; exact where x is a multiple of 1/2 (the results are 0 and +-1).
bool within_ulp(float got, long double want, bool exact) {
  if (exact) return got == static_cast<float>(want);
  const float rounded = std::fabs(static_cast<float>(want));
  return std::fabs(static_cast<long double>(got) - want) <= std::nextafter(rounded, INFINITY) - rounded;
}

void probe_sincospi() {
  DeviceBuffer<float> in(kSinCosPiCount), sines(kSinCosPiCount), cosines(kSinCosPiCount);
  in.upload(std::vector<float>(std::begin(kSinCosPiInputs), std::end(kSinCosPiInputs)));
  finish(launch_kernel(sincospi_kernel, dim3(1), dim3(32), 0, nullptr, in.data, sines.data, cosines.data),
         "sincospi_kernel");
  const auto s = sines.download(), c = cosines.download();
  line("# sincospi: sincospif of the f32 inputs, sin then cos");
  Comparison cmp;
  constexpr long double kPi = 3.141592653589793238462643383279502884L;
  for (int i = 0; i < kSinCosPiCount; ++i) {
    const float x = kSinCosPiInputs[i];
    line("sincospi x=%08x %08x %08x", float_bits(x), float_bits(s[i]), float_bits(c[i]));
    const long double turn = std::fmod(static_cast<long double>(x), 2.0L);  // exact
    const bool exact = std::floor(2 * turn) == 2 * turn;
    const long double sine = exact ? std::round(std::sin(kPi * turn)) : std::sin(kPi * turn);
    const long double cosine = exact ? std::round(std::cos(kPi * turn)) : std::cos(kPi * turn);
    cmp.expect(within_ulp(s[i], sine, exact), format("sin(pi * %a): %a", x, s[i]));
    cmp.expect(within_ulp(c[i], cosine, exact), format("cos(pi * %a): %a", x, c[i]));
  }
  cmp.report("sincospi");
}

// ---- probe: cp.async with zero fill ------------------------------------------------------------
// One warp. Global: 32 x 16 bytes, byte b of lane l = (l * 16 + b) & 0xff. Shared: 2 x 512
// bytes, filled with 0xab first. Group 1: lane l copies its 16 bytes to shared[l * 16] with
// src_bytes = {16, 0, 8, 4}[l % 4]; commit. Group 2: the same to shared[512 + l * 16] with
// src_bytes 16; commit. wait_group 1 (group 1 done; group 2 may be in flight), __syncwarp,
// read group 1's half; wait_group 0, __syncwarp, read group 2's half.

__global__ void cp_async_kernel(const uint8_t* global, uint8_t* first, uint8_t* second) {
  __shared__ __align__(16) uint8_t shared[1024];
  const int lane = threadIdx.x;
  for (int i = lane; i < 1024; i += 32) shared[i] = 0xab;
  __syncwarp();
  constexpr int kBytes[4] = {16, 0, 8, 4};
  sm80::copy_async(shared_address(shared + lane * 16), global + lane * 16, kBytes[lane % 4]);
  sm80::copy_commit();
  sm80::copy_async(shared_address(shared + 512 + lane * 16), global + lane * 16, 16);
  sm80::copy_commit();
  sm80::copy_wait<1>();
  __syncwarp();
  for (int i = lane; i < 512; i += 32) first[i] = shared[i];
  sm80::copy_wait<0>();
  __syncwarp();
  for (int i = lane; i < 512; i += 32) second[i] = shared[512 + i];
}

void probe_cp_async() {
  DeviceBuffer<uint8_t> global(512), first(512), second(512);
  std::vector<uint8_t> g(512);
  for (int i = 0; i < 512; ++i) g[static_cast<size_t>(i)] = static_cast<uint8_t>(i & 0xff);
  global.upload(g);
  finish(launch_kernel(cp_async_kernel, dim3(1), dim3(32), 0, nullptr, global.data, first.data, second.data),
         "cp_async_kernel");
  const auto a = first.download(), b = second.download();
  line("# cp_async: per lane the 16 shared bytes after wait_group 1 (src_bytes 16/0/8/4 by lane %% 4), then group 2's");
  Comparison cmp;
  const int bytes[4] = {16, 0, 8, 4};
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t w1[4], w2[4];
    std::memcpy(w1, &a[static_cast<size_t>(lane) * 16], 16);
    std::memcpy(w2, &b[static_cast<size_t>(lane) * 16], 16);
    line("cp_async lane=%d group1 %s group2 %s", lane, hex_words(w1, 4).c_str(), hex_words(w2, 4).c_str());
    for (int i = 0; i < 16; ++i) {
      const uint8_t want1 = i < bytes[lane % 4] ? static_cast<uint8_t>(lane * 16 + i) : 0;
      cmp.expect(a[static_cast<size_t>(lane * 16 + i)] == want1, format("group 1 lane %d byte %d", lane, i));
      cmp.expect(b[static_cast<size_t>(lane * 16 + i)] == static_cast<uint8_t>(lane * 16 + i),
                 format("group 2 lane %d byte %d", lane, i));
    }
  }
  cmp.report("cp_async");
}

// ---- probe: ldmatrix.x4 -------------------------------------------------------------------------
// One warp. Shared: 32 rows of 16 bytes at 32-byte pitch (the other 16 bytes 0xeeee). Row r
// of matrix q is stored at slot q * 8 + (5 r) % 8; its element c (16-bit) = q * 64 + r * 8 + c.
// Lane l passes the address of row l % 8 of matrix l / 8.

template <bool kTrans>
__global__ void ldmatrix_kernel(uint32_t* result) {
  __shared__ __align__(16) uint16_t shared[32 * 16];
  const int lane = threadIdx.x;
  for (int slot = 0; slot < 32; ++slot) {
    const int q = slot / 8, r = ((slot % 8) * 5) % 8;  // 5 * 5 = 25 = 1 (mod 8): the inverse permutation
    if (lane < 16) shared[slot * 16 + lane] = lane < 8 ? static_cast<uint16_t>(q * 64 + r * 8 + lane) : 0xeeee;
  }
  __syncwarp();
  const int q = lane / 8, r = lane % 8;
  uint32_t reg[4];
  if constexpr (kTrans)
    sm80::ldmatrix_x4_trans(shared_address(shared + (q * 8 + (5 * r) % 8) * 16), reg);
  else
    sm80::ldmatrix_x4(shared_address(shared + (q * 8 + (5 * r) % 8) * 16), reg);
  for (int i = 0; i < 4; ++i) result[lane * 4 + i] = reg[i];
}

// .trans: lane l gets, in r[q], rows 2 (l % 4) and 2 (l % 4) + 1 of column l / 4 of matrix q.
template <bool kTrans>
void probe_ldmatrix(const char* name) {
  DeviceBuffer<uint32_t> result(128);
  finish(launch_kernel(ldmatrix_kernel<kTrans>, dim3(1), dim3(32), 0, nullptr, result.data), "ldmatrix_kernel");
  const auto r = result.download();
  line("# %s: r[0..3] per lane; element c of row r of matrix q holds q*64 + r*8 + c", name);
  Comparison cmp;
  for (int lane = 0; lane < 32; ++lane) {
    line("%s lane=%d %s", name, lane, hex_words(&r[static_cast<size_t>(lane) * 4], 4).c_str());
    for (int q = 0; q < 4; ++q) {
      const int g = lane / 4, t = lane % 4;
      const uint32_t lo = static_cast<uint32_t>(kTrans ? q * 64 + 2 * t * 8 + g : q * 64 + g * 8 + 2 * t);
      const uint32_t hi = lo + (kTrans ? 8 : 1);
      cmp.expect(r[static_cast<size_t>(lane * 4 + q)] == (lo | (hi << 16)), format("lane %d r[%d]", lane, q));
    }
  }
  cmp.report(name);
}

// ---- probe: mma.sync m16n8k16 ---------------------------------------------------------------------
// One warp. Registers, whatever the layout: half h of a[r] of lane l = v((l * 8 + r * 2 + h)),
// of b[r] = v(l * 4 + r * 2 + h + 1000), accumulator d[i] of lane l = c(l * 4 + i), with
//   integers:  v(x) = (7 x) % 17 - 8, c(x) = (5 x) % 11 - 5  (every sum exact in f32);
//   fractions: v(x) = ((37 x) % 255 - 127) / 128, c(x) = ((53 x) % 97 - 48) / 64.
// Outputs: d[0..3] per lane. Predicted from the fragment layout of sm80_ptx.cuh (PTX ISA).

template <typename T>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  const int lane = threadIdx.x;
  uint32_t fa[4], fb[2];
  float acc[4];
  for (int i = 0; i < 4; ++i) fa[i] = a[lane * 4 + i];
  for (int i = 0; i < 2; ++i) fb[i] = b[lane * 2 + i];
  for (int i = 0; i < 4; ++i) acc[i] = c[lane * 4 + i];
  sm80::mma_16816<T>(acc, fa, fb[0], fb[1]);
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = acc[i];
}

template <typename T>
void probe_mma(const char* name, bool fractions) {
  auto v = [&](int x) { return fractions ? static_cast<float>((37 * x) % 255 - 127) / 128.0f : static_cast<float>((7 * x) % 17 - 8); };
  auto cv = [&](int x) { return fractions ? static_cast<float>((53 * x) % 97 - 48) / 64.0f : static_cast<float>((5 * x) % 11 - 5); };
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  auto encode = [&](float f) { return kBf16 ? bf16_exact(f) : f16_exact(f); };
  std::vector<uint32_t> a(128), b(64);
  std::vector<float> c(128);
  double A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const float lo = v(lane * 8 + r * 2), hi = v(lane * 8 + r * 2 + 1);
      a[static_cast<size_t>(lane * 4 + r)] = encode(lo) | (static_cast<uint32_t>(encode(hi)) << 16);
      const int row = g + 8 * (r % 2), col = 2 * t + 8 * (r / 2);  // a[r]: rows g / g+8, cols 2t / 2t+8
      A[row][col] = lo;
      A[row][col + 1] = hi;
    }
    for (int r = 0; r < 2; ++r) {
      const float lo = v(lane * 4 + r * 2 + 1000), hi = v(lane * 4 + r * 2 + 1001);
      b[static_cast<size_t>(lane * 2 + r)] = encode(lo) | (static_cast<uint32_t>(encode(hi)) << 16);
      B[2 * t + 8 * r][g] = lo;
      B[2 * t + 8 * r + 1][g] = hi;
    }
    for (int i = 0; i < 4; ++i) {
      c[static_cast<size_t>(lane * 4 + i)] = cv(lane * 4 + i);
      C[g + 8 * (i / 2)][2 * t + i % 2] = cv(lane * 4 + i);
    }
  }
  DeviceBuffer<uint32_t> da(128), db(64);
  DeviceBuffer<float> dc(128), dd(128);
  da.upload(a);
  db.upload(b);
  dc.upload(c);
  finish(launch_kernel(mma_kernel<T>, dim3(1), dim3(32), 0, nullptr, da.data, db.data, dc.data, dd.data), name);
  const auto d = dd.download();
  line("# %s: d[0..3] per lane (%s inputs)", name, fractions ? "fractional" : "integer");
  Comparison cmp;
  double worst = 0;
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t words[4];
    std::memcpy(words, &d[static_cast<size_t>(lane) * 4], 16);
    line("%s lane=%d %s", name, lane, hex_words(words, 4).c_str());
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      double want = C[row][col];
      for (int k = 0; k < 16; ++k) want += A[row][k] * B[k][col];
      const double got = d[static_cast<size_t>(lane * 4 + i)];
      worst = std::max(worst, std::fabs(got - want));
      // Integers: exact. Fractions: products are exact, sums of 17 terms of magnitude <= 1
      // in f32 (or the tensor core's own accumulation) stay within 2^-18.
      cmp.expect(fractions ? std::fabs(got - want) <= std::ldexp(1.0, -18) : got == want,
                 format("lane %d d[%d]: %.9g, predicted %.9g", lane, i, got, want));
    }
  }
  line("# %s: largest difference from the fp64 prediction %.3g", name, worst);
  cmp.report(name);
}

// ---- sm_90a probes ------------------------------------------------------------------------------

#if defined(ARBITER_SM90)
// Waits for a phase with a time limit (clock64 cycles), so that a probe whose barrier never
// completes reports it instead of hanging. Returns false on timeout.
__device__ bool wait_with_limit(uint32_t bar, uint32_t parity) {
  const long long start = clock64();
  while (!sm90::barrier_try_wait(bar, parity))
    if (clock64() - start > 4000000000LL) return false;
  return true;
}
#endif

// ---- probe: mbarrier phases, arrivals and transaction counts -----------------------------------
// One block of 64 threads (two warps). Thread 0 initialises the barrier for 2 arrivals. The
// steps, each between __syncthreads, with try_wait(parity 0) and try_wait(parity 1) recorded
// by threads 0 and 32 after each (a 0/1 pair per step):
//   0: fresh               1: thread 0 arrives        2: thread 32 arrives (phase 0 completes)
//   3: thread 0 arrive.expect_tx 128 bytes            4: thread 32 arrives (tx still pending)
//   5: thread 0's TMA load of one 64 x 1 bf16 box completes the transactions (waited for)
// Also recorded: step 5's waits succeeded (1) or timed out (0), and the 64 elements loaded.

__global__ void mbarrier_kernel(const __grid_constant__ CUtensorMap map, uint32_t* steps, uint16_t* loaded) {
#if defined(ARBITER_SM90)
  using namespace sm90;
  // The box lands at a 1024-aligned address, where the 128B swizzle leaves row 0 in place.
  extern __shared__ unsigned char shared_raw[];
  const uint32_t raw = shared_address(shared_raw);
  const uint32_t tile_address = (raw + 1023) & ~1023u;
  const uint16_t* tile = reinterpret_cast<const uint16_t*>(shared_raw + (tile_address - raw));
  __shared__ __align__(8) uint64_t barrier;
  const uint32_t bar = shared_address(&barrier);
  const int t = threadIdx.x;
  const bool recorder = t == 0 || t == 32;
  const int who = t / 32;
  auto record = [&](int step) {
    if (recorder) {
      steps[(step * 2 + who) * 2 + 0] = barrier_try_wait(bar, 0);
      steps[(step * 2 + who) * 2 + 1] = barrier_try_wait(bar, 1);
    }
    __syncthreads();
  };
  if (t == 0) {
    barrier_init(bar, 2);
    barrier_init_fence();
  }
  __syncthreads();
  record(0);
  if (t == 0) barrier_arrive(bar);
  __syncthreads();
  record(1);
  if (t == 32) barrier_arrive(bar);
  __syncthreads();
  record(2);
  if (t == 0) barrier_expect_bytes(bar, 128);
  __syncthreads();
  record(3);
  if (t == 32) barrier_arrive(bar);
  __syncthreads();
  record(4);
  if (t == 0) tma_load_2d(tile_address, &map, bar, 0, 3);
  const bool done = wait_with_limit(bar, 1);
  if (recorder) steps[24 + who] = done;
  __syncthreads();
  record(5);
  if (t < 64) loaded[t] = tile[t];
#else
  __trap();
#endif
}

// A [rows, cols] bf16 matrix (ld elements per row) whose element (r, c) has the bits r * 128 + c.
std::vector<uint16_t> tagged_matrix(int rows, int cols, int ld) {
  std::vector<uint16_t> m(static_cast<size_t>(rows) * static_cast<size_t>(ld), 0xdead);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m[static_cast<size_t>(r * ld + c)] = static_cast<uint16_t>(r * 128 + c);
  return m;
}

void probe_mbarrier() {
  DeviceBuffer<uint16_t> matrix(8 * 64);
  matrix.upload(tagged_matrix(8, 64, 64));
  CUtensorMap map;
  if (!make_tile_map(map, matrix.data, 8, 64, 64, Dtype::bf16, 1, 64)) throw CudaError{"cuTensorMapEncodeTiled failed"};
  DeviceBuffer<uint32_t> steps(26);
  DeviceBuffer<uint16_t> loaded(64);
  finish(launch_kernel(mbarrier_kernel, dim3(1), dim3(64), 128 + 1024, nullptr, map, steps.data, loaded.data), "mbarrier_kernel");
  const auto s = steps.download();
  const auto l = loaded.download();
  line("# mbarrier: per step, try_wait(parity 0) and (parity 1) seen by threads 0 and 32; step 5's waits; the box");
  // Parity p's phase counts as complete when the current phase's parity differs from p.
  const uint32_t predicted[6][2] = {{0, 1}, {0, 1}, {1, 0}, {1, 0}, {1, 0}, {0, 1}};
  Comparison cmp;
  for (int step = 0; step < 6; ++step)
    for (int who = 0; who < 2; ++who) {
      const uint32_t p0 = s[static_cast<size_t>((step * 2 + who) * 2)], p1 = s[static_cast<size_t>((step * 2 + who) * 2 + 1)];
      line("mbarrier step=%d thread=%d parity0=%u parity1=%u", step, who * 32, p0, p1);
      cmp.expect(p0 == predicted[step][0] && p1 == predicted[step][1], format("step %d thread %d", step, who * 32));
    }
  line("mbarrier tx_wait thread0=%u thread32=%u", s[24], s[25]);
  cmp.expect(s[24] == 1 && s[25] == 1, "the transaction-count wait timed out");
  line("mbarrier box %s", hex_halves(l.data(), 64).c_str());
  for (int c = 0; c < 64; ++c) cmp.expect(l[static_cast<size_t>(c)] == 3 * 128 + c, format("box element %d", c));
  cmp.report("mbarrier");
}

// ---- probe: TMA 2-D tile loads, 128-byte swizzle, zero fill ----------------------------------------
// Global: bf16 [100, 72] at ld = 80, element (r, c) = the bits r * 128 + c (padding 0xdead).
// Tensor map as the Hopper GEMM makes it (make_tile_map: 64-element-wide boxes, 128B swizzle),
// boxes of 64 x 32. Loads at (inner, outer) = (0, 0), (64, 80) (8 columns and 20 rows inside),
// (-8, -4) (negative coordinates: zeros before the start), each into a 1024-aligned 4 KiB
// shared tile; outputs: the tile's 2048 16-bit words in shared-memory order, 64 per line.
// Predicted: element (r, c) of the box at byte r * 128 + ((2c / 16) ^ (r % 8)) * 16 + 2c % 16.

__global__ void tma_kernel(const __grid_constant__ CUtensorMap map, int32_t inner, int32_t outer, uint16_t* result,
                           uint32_t* completed) {
#if defined(ARBITER_SM90)
  using namespace sm90;
  extern __shared__ unsigned char shared_raw[];
  const uint32_t raw = shared_address(shared_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* tile = shared_raw + (base - raw);
  __shared__ __align__(8) uint64_t barrier;
  const uint32_t bar = shared_address(&barrier);
  if (threadIdx.x == 0) {
    barrier_init(bar, 1);
    barrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    barrier_expect_bytes(bar, 64 * 32 * 2);
    tma_load_2d(base, &map, bar, inner, outer);
  }
  const bool done = wait_with_limit(bar, 0);
  if (threadIdx.x == 0) *completed = done;
  const uint16_t* words = reinterpret_cast<const uint16_t*>(tile);
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) result[i] = words[i];
#else
  __trap();
#endif
}

void probe_tma() {
  constexpr int kRows = 100, kCols = 72, kLd = 80;
  DeviceBuffer<uint16_t> matrix(static_cast<size_t>(kRows * kLd));
  matrix.upload(tagged_matrix(kRows, kCols, kLd));
  CUtensorMap map;
  if (!make_tile_map(map, matrix.data, kRows, kCols, kLd, Dtype::bf16, 32, 64))
    throw CudaError{"cuTensorMapEncodeTiled failed"};
  const int coordinates[3][2] = {{0, 0}, {64, 80}, {-8, -4}};
  Comparison cmp;
  line("# tma_2d: the 4 KiB tile in shared-memory order after each load, 64 words a line");
  for (const auto& at : coordinates) {
    DeviceBuffer<uint16_t> result(2048);
    DeviceBuffer<uint32_t> completed(1);
    finish(launch_kernel(tma_kernel, dim3(1), dim3(128), 4096 + 1024, nullptr, map, at[0], at[1], result.data,
                         completed.data),
           "tma_kernel");
    const auto r = result.download();
    const uint32_t done = completed.download()[0];
    line("tma_2d at=%d,%d completed=%u", at[0], at[1], done);
    cmp.expect(done == 1, format("load at %d,%d never completed", at[0], at[1]));
    for (int row = 0; row < 32; ++row)
      line("tma_2d at=%d,%d line=%d %s", at[0], at[1], row, hex_halves(&r[static_cast<size_t>(row) * 64], 64).c_str());
    for (int row = 0; row < 32; ++row)
      for (int col = 0; col < 64; ++col) {
        const int gr = at[1] + row, gc = at[0] + col;
        const uint16_t want = gr >= 0 && gr < kRows && gc >= 0 && gc < kCols ? static_cast<uint16_t>(gr * 128 + gc) : 0;
        const int byte = row * 128 + (((2 * col) / 16) ^ (row % 8)) * 16 + (2 * col) % 16;
        cmp.expect(r[static_cast<size_t>(byte / 2)] == want, format("at %d,%d box element (%d, %d)", at[0], at[1], row, col));
      }
  }
  cmp.report("tma_2d");
}

// ---- probe: wgmma from shared-memory descriptors ---------------------------------------------------
// A [128, 64] and B [N, 64] bf16 or f16 (K inner), loaded by TMA as the Hopper GEMM loads a
// stage (boxes 128 x 64 and N x 64, 128B swizzle), then, exactly as its consumers do,
// warpgroup h computes rows 64 h .. 64 h + 63: four wgmma.m64nNk16, descriptors
// descriptor(tile_a + h * 8 KiB + kk * 32) and descriptor(tile_b + kk * 32), kk = 0..3, one
// commit, wait_group 0. A[i][k] = (3 i + 5 k) % 9 - 4, B[j][k] = (7 j + 3 k) % 11 - 5 (exact).
// N = 128: 256 threads, warpgroups 0 and 1 consume. N = 256 (with setmaxnreg as in the
// kernel): 384 threads, warpgroup 0 gives up registers and loads, 1 and 2 consume.
// Outputs: per consumer thread its N / 2 accumulators. Predicted: the m64nNk16 layout
// d[4 j + f] = D[16 w + l / 4 + 8 (f / 2)][8 j + 2 (l % 4) + f % 2] (w = warp in the warpgroup).

template <typename T, int kN>
struct WgmmaProbe {
  static constexpr int kThreads = kN == 256 ? 384 : 256;
  static constexpr int kTileA = 128 * 64 * 2, kTileB = kN * 64 * 2;
  static constexpr int kShared = kTileA + kTileB + 1024;
  static constexpr int kAccumulators = kN / 2;
};

template <typename T, int kN>
__global__ void __launch_bounds__(WgmmaProbe<T, kN>::kThreads, 1)
    wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, float* result,
                 uint32_t* completed) {
#if defined(ARBITER_SM90)
  using namespace sm90;
  using P = WgmmaProbe<T, kN>;
  extern __shared__ unsigned char shared_raw[];
  __shared__ __align__(8) uint64_t barrier;
  const uint32_t raw = shared_address(shared_raw);
  const uint32_t tile_a = (raw + 1023) & ~1023u, tile_b = tile_a + P::kTileA;
  const uint32_t bar = shared_address(&barrier);
  if (threadIdx.x == 0) {
    barrier_init(bar, 1);
    barrier_init_fence();
  }
  __syncthreads();
  const int warpgroup = threadIdx.x / 128;
  if constexpr (kN == 256) {
    if (warpgroup == 0) {
      registers_decrease<40>();
      if (threadIdx.x == 0) {
        barrier_expect_bytes(bar, P::kTileA + P::kTileB);
        tma_load_2d(tile_a, &map_a, bar, 0, 0);
        tma_load_2d(tile_b, &map_b, bar, 0, 0);
        wait_with_limit(bar, 0);  // no copy in flight when the producer leaves
      }
      return;
    }
    registers_increase<232>();
  } else {
    if (threadIdx.x == 0) {
      barrier_expect_bytes(bar, P::kTileA + P::kTileB);
      tma_load_2d(tile_a, &map_a, bar, 0, 0);
      tma_load_2d(tile_b, &map_b, bar, 0, 0);
    }
  }
  constexpr int kFirstConsumer = kN == 256 ? 1 : 0;  // warpgroup
  const int half = warpgroup - kFirstConsumer;
  const int t = threadIdx.x % 128;
  const bool done = wait_with_limit(bar, 0);
  if (t == 0) completed[half] = done;
  if (!done) return;
  float d[P::kAccumulators];
  for (int i = 0; i < P::kAccumulators; ++i) d[i] = 0.0f;
  fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t desc_a = descriptor(tile_a + static_cast<uint32_t>(half * 64 * 128 + kk * 32));
    const uint64_t desc_b = descriptor(tile_b + static_cast<uint32_t>(kk * 32));
    if constexpr (kN == 256) {
      wgmma_m64n256k16<T>(d, desc_a, desc_b);
    } else {
      wgmma_m64n128k16<T>(d, desc_a, desc_b);
    }
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(d);
  for (int i = 0; i < P::kAccumulators; ++i) result[(half * 128 + t) * P::kAccumulators + i] = d[i];
#else
  __trap();
#endif
}

template <typename T, int kN>
void probe_wgmma(const char* name) {
  using P = WgmmaProbe<T, kN>;
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  auto encode = [&](float f) { return kBf16 ? bf16_exact(f) : f16_exact(f); };
  auto a_value = [](int i, int k) { return static_cast<float>((3 * i + 5 * k) % 9 - 4); };
  auto b_value = [](int j, int k) { return static_cast<float>((7 * j + 3 * k) % 11 - 5); };
  std::vector<uint16_t> a(128 * 64), b(static_cast<size_t>(kN) * 64);
  for (int i = 0; i < 128; ++i)
    for (int k = 0; k < 64; ++k) a[static_cast<size_t>(i * 64 + k)] = encode(a_value(i, k));
  for (int j = 0; j < kN; ++j)
    for (int k = 0; k < 64; ++k) b[static_cast<size_t>(j * 64 + k)] = encode(b_value(j, k));
  DeviceBuffer<uint16_t> da(a.size()), db(b.size());
  da.upload(a);
  db.upload(b);
  const Dtype dtype = kBf16 ? Dtype::bf16 : Dtype::f16;
  CUtensorMap map_a, map_b;
  if (!make_tile_map(map_a, da.data, 128, 64, 64, dtype, 128, 64) || !make_tile_map(map_b, db.data, kN, 64, 64, dtype, kN, 64))
    throw CudaError{"cuTensorMapEncodeTiled failed"};
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, wgmma_kernel<T, kN>), "cudaFuncGetAttributes");
  line("# %s: %d registers a thread at launch", name, attributes.numRegs);
  if (kN == 256 && attributes.numRegs != 168) {  // setmaxnreg.inc to 232 would wait forever
    line("result %s SKIPPED %d registers at launch, setmaxnreg needs 168", name, attributes.numRegs);
    return;
  }
  check(cudaFuncSetAttribute(wgmma_kernel<T, kN>, cudaFuncAttributeMaxDynamicSharedMemorySize, P::kShared),
        "cudaFuncSetAttribute");
  DeviceBuffer<float> result(static_cast<size_t>(256) * P::kAccumulators);
  DeviceBuffer<uint32_t> completed(2);
  finish(launch_kernel(wgmma_kernel<T, kN>, dim3(1), dim3(P::kThreads), P::kShared, nullptr, map_a, map_b, result.data,
                       completed.data),
         name);
  const auto r = result.download();
  const auto done = completed.download();
  line("# %s: per consumer thread (half * 128 + thread of the warpgroup) its %d accumulators", name, P::kAccumulators);
  Comparison cmp;
  cmp.expect(done[0] == 1 && done[1] == 1, "the TMA loads never completed");
  for (int thread = 0; thread < 256; ++thread) {
    std::vector<uint32_t> words(P::kAccumulators);
    std::memcpy(words.data(), &r[static_cast<size_t>(thread) * P::kAccumulators], words.size() * 4);
    line("%s thread=%d %s", name, thread, hex_words(words.data(), words.size()).c_str());
    const int half = thread / 128, t = thread % 128, warp = t / 32, lane = t % 32;
    for (int i = 0; i < P::kAccumulators; ++i) {
      const int j = i / 4, f = i % 4;
      const int row = 64 * half + 16 * warp + lane / 4 + 8 * (f / 2), col = 8 * j + 2 * (lane % 4) + f % 2;
      float want = 0;
      for (int k = 0; k < 64; ++k) want += a_value(row, k) * b_value(col, k);
      cmp.expect(r[static_cast<size_t>(thread * P::kAccumulators + i)] == want,
                 format("thread %d d[%d] (row %d, col %d)", thread, i, row, col));
    }
  }
  cmp.report(name);
}

// ---- probe: a cluster of 8 blocks and distributed shared memory -----------------------------------
// 16 blocks of 64 threads in clusters of 8 (__cluster_dims__, as softmax_cluster8). Block b
// sets its 4 shared floats to 100 b + i; cluster.sync(); thread t < 32 reads float t / 8 of
// cluster rank t % 8 through map_shared_rank; cluster.sync(). Outputs per block: block_rank,
// num_blocks, dim_blocks.x and the 32 floats read.

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define ARBITER_PROBE_CLUSTER __cluster_dims__(8, 1, 1)
#else
#define ARBITER_PROBE_CLUSTER
#endif

__global__ void ARBITER_PROBE_CLUSTER cluster_kernel(uint32_t* info, float* read) {
#if defined(ARBITER_SM90)
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ float values[4];
  if (threadIdx.x < 4) values[threadIdx.x] = static_cast<float>(100 * blockIdx.x + threadIdx.x);
  cluster.sync();
  if (threadIdx.x < 32) read[blockIdx.x * 32 + threadIdx.x] = *cluster.map_shared_rank(&values[threadIdx.x / 8], threadIdx.x % 8);
  if (threadIdx.x == 0) {
    info[blockIdx.x * 3 + 0] = cluster.block_rank();
    info[blockIdx.x * 3 + 1] = cluster.num_blocks();
    info[blockIdx.x * 3 + 2] = cluster.dim_blocks().x;
  }
  cluster.sync();
#else
  __trap();
#endif
}

#undef ARBITER_PROBE_CLUSTER

void probe_cluster() {
  DeviceBuffer<uint32_t> info(16 * 3);
  DeviceBuffer<float> read(16 * 32);
  finish(launch_kernel(cluster_kernel, dim3(16), dim3(64), 0, nullptr, info.data, read.data), "cluster_kernel");
  const auto i = info.download();
  const auto r = read.download();
  line("# cluster: per block, block_rank num_blocks dim_blocks.x, then the 32 floats read from the ranks");
  Comparison cmp;
  for (int block = 0; block < 16; ++block) {
    std::vector<uint32_t> words(32);
    std::memcpy(words.data(), &r[static_cast<size_t>(block) * 32], 128);
    line("cluster block=%d rank=%u blocks=%u dim=%u %s", block, i[static_cast<size_t>(block * 3)],
         i[static_cast<size_t>(block * 3 + 1)], i[static_cast<size_t>(block * 3 + 2)], hex_words(words.data(), 32).c_str());
    cmp.expect(i[static_cast<size_t>(block * 3)] == static_cast<uint32_t>(block % 8) && i[static_cast<size_t>(block * 3 + 1)] == 8 &&
                   i[static_cast<size_t>(block * 3 + 2)] == 8,
               format("block %d's cluster position", block));
    for (int t = 0; t < 32; ++t) {
      const int source = block / 8 * 8 + t % 8;
      cmp.expect(r[static_cast<size_t>(block * 32 + t)] == static_cast<float>(100 * source + t / 8),
                 format("block %d thread %d", block, t));
    }
  }
  cmp.report("cluster");
}

// ---- the probes -------------------------------------------------------------------------------------

struct Probe {
  const char* name;
  int major;  // the compute capability it needs: 8 (sm_80 and up) or 9 (sm_90a)
  std::function<void()> run;
};

const std::vector<Probe>& probes() {
  static const std::vector<Probe> all = {
      {"convert", 8, probe_convert},
      {"sincospi", 8, probe_sincospi},
      {"cp_async", 8, probe_cp_async},
      {"ldmatrix_x4", 8, [] { probe_ldmatrix<false>("ldmatrix_x4"); }},
      {"ldmatrix_x4_trans", 8, [] { probe_ldmatrix<true>("ldmatrix_x4_trans"); }},
      {"mma_m16n8k16_bf16", 8, [] { probe_mma<__nv_bfloat16>("mma_m16n8k16_bf16", false); }},
      {"mma_m16n8k16_f16", 8, [] { probe_mma<__half>("mma_m16n8k16_f16", false); }},
      {"mma_m16n8k16_bf16_fractions", 8, [] { probe_mma<__nv_bfloat16>("mma_m16n8k16_bf16_fractions", true); }},
      {"mbarrier", 9, probe_mbarrier},
      {"tma_2d", 9, probe_tma},
      {"wgmma_m64n128k16_bf16", 9, [] { probe_wgmma<__nv_bfloat16, 128>("wgmma_m64n128k16_bf16"); }},
      {"wgmma_m64n128k16_f16", 9, [] { probe_wgmma<__half, 128>("wgmma_m64n128k16_f16"); }},
      {"wgmma_m64n256k16_bf16", 9, [] { probe_wgmma<__nv_bfloat16, 256>("wgmma_m64n256k16_bf16"); }},
      {"cluster", 9, probe_cluster},
  };
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> wanted;
  const char* out_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--list") {
      for (const Probe& p : probes()) std::printf("%s\n", p.name);
      return 0;
    }
    if (arg.rfind("--probe=", 0) == 0) wanted.push_back(arg.substr(8));
    else if (arg.rfind("--out=", 0) == 0) out_path = argv[i] + 6;
    else {
      std::fprintf(stderr, "usage: arbiter_ptx_probes [--list] [--probe=NAME ...] [--out=FILE]\n");
      return 2;
    }
  }
  if (out_path != nullptr && (out = std::fopen(out_path, "a")) == nullptr) {
    std::fprintf(stderr, "arbiter_ptx_probes: cannot open %s\n", out_path);
    return 2;
  }
  for (const std::string& name : wanted) {
    bool known = false;
    for (const Probe& p : probes()) known |= name == p.name;
    if (!known) {
      std::fprintf(stderr, "arbiter_ptx_probes: no probe named %s (--list)\n", name.c_str());
      return 2;
    }
  }
  cudaDeviceProp prop{};
  if (const cudaError_t s = cudaGetDeviceProperties(&prop, 0); s != cudaSuccess) {
    // Skipped only where there is no GPU or no driver at all; a driver too old for this
    // runtime (the same error code) is an error: the probes could have run.
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    const bool no_device = s == cudaErrorNoDevice || driver == nullptr;
    if (driver != nullptr) dlclose(driver);
    for (const Probe& p : probes())
      if (wanted.empty() || std::find(wanted.begin(), wanted.end(), p.name) != wanted.end())
        line("result %s %s %s: %s", p.name, no_device ? "SKIPPED" : "ERROR", no_device ? "no CUDA device" : "CUDA unusable",
             cudaGetErrorString(s));
    return no_device ? 77 : 1;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  line("# device %s sm_%d%d, driver %d, runtime %d", prop.name, prop.major, prop.minor, driver, runtime);
  int failed = 0;
  for (const Probe& p : probes()) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), p.name) == wanted.end()) continue;
    if (prop.major < p.major || (p.major == 9 && prop.major != 9)) {
      line("result %s SKIPPED needs sm_%d0%s", p.name, p.major, p.major == 9 ? "a" : " or later");
      continue;
    }
    try {
      p.run();
    } catch (const CudaError& e) {
      line("result %s ERROR %s", p.name, e.what.c_str());
      ++failed;
    }
    std::fflush(out);
  }
  return failed == 0 && probes_mismatched == 0 ? 0 : 1;
}
