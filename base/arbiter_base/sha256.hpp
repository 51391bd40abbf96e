// SHA-256 (FIPS 180-4): plugin content hashes (the host), kernel source hashes and compile-cache
// keys (the generated plugin). Small, dependency-free, streaming; on x86-64 CPUs with the SHA
// extensions (Zen, Ice Lake and later) the compression runs on them (about 10x the portable
// code: the host hashes every plugin file when a context is created).
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ARBITER_SHA256_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace arbiter {

class Sha256 {
 public:
  // portable_only: never the SHA extensions (for testing one against the other).
  explicit Sha256(bool portable_only = false) : portable_only_(portable_only) {}

  // Whether this CPU's SHA extensions are used.
  static bool uses_sha_extensions() {
#ifdef ARBITER_SHA256_X86
    return has_sha_extensions();
#else
    return false;
#endif
  }

  void update(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    length_ += size;
    if (buffered_ > 0) {
      const size_t take = size < 64 - buffered_ ? size : 64 - buffered_;
      for (size_t i = 0; i < take; ++i) buffer_[buffered_ + i] = bytes[i];
      buffered_ += take;
      bytes += take;
      size -= take;
      if (buffered_ < 64) return;
      compress_blocks(buffer_.data(), 1);
      buffered_ = 0;
    }
    if (size >= 64) {
      compress_blocks(bytes, size / 64);
      bytes += size / 64 * 64;
      size %= 64;
    }
    for (size_t i = 0; i < size; ++i) buffer_[i] = bytes[i];
    buffered_ = size;
  }
  void update(std::string_view text) { update(text.data(), text.size()); }

  // Lower-case hex digest; the object is spent afterwards.
  std::string hex_digest() {
    const uint64_t bits = length_ * 8;
    const unsigned char pad = 0x80;
    update(&pad, 1);
    const unsigned char zero = 0;
    while (buffered_ != 56) update(&zero, 1);
    unsigned char length[8];
    for (int j = 0; j < 8; ++j) length[j] = static_cast<unsigned char>(bits >> (56 - 8 * j));
    update(length, 8);
    char out[65];
    for (int j = 0; j < 8; ++j) std::snprintf(out + 8 * j, 9, "%08x", static_cast<unsigned>(h_[j]));
    return std::string(out, 64);
  }

 private:
  static constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  static constexpr uint32_t kRound[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};

  void compress_blocks(const unsigned char* blocks, size_t count) {
#ifdef ARBITER_SHA256_X86
    if (!portable_only_ && has_sha_extensions()) return compress_with_sha_extensions(blocks, count);
#endif
    for (size_t i = 0; i < count; ++i) compress(blocks + 64 * i);
  }

#ifdef ARBITER_SHA256_X86
  static bool has_sha_extensions() {
    static const bool has = [] {
      unsigned a = 0, b = 0, c = 0, d = 0;
      if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return false;
      return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)) != 0;  // CPUID.7.0:EBX.SHA
    }();
    return has;
  }

  // The SHA-NI rounds: state as ABEF / CDGH, four rounds per message vector; the schedule
  // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four words at a time.
  __attribute__((target("sha,sse4.1"))) void compress_with_sha_extensions(const unsigned char* data, size_t count) {
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h_[0])), 0xB1);  // CDAB
    __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h_[4])), 0x1B);  // EFGH
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
    for (; count > 0; --count, data += 64) {
      const __m128i abef = state0, cdgh = state1;
      __m128i w[16];
      for (int i = 0; i < 16; ++i) {
        if (i < 4) {
          w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * i)), byte_swap);
        } else {
          const __m128i part = _mm_add_epi32(_mm_sha256msg1_epu32(w[i - 4], w[i - 3]), _mm_alignr_epi8(w[i - 1], w[i - 2], 4));
          w[i] = _mm_sha256msg2_epu32(part, w[i - 1]);
        }
        __m128i message = _mm_add_epi32(w[i], _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kRound[4 * i])));
        state1 = _mm_sha256rnds2_epu32(state1, state0, message);
        message = _mm_shuffle_epi32(message, 0x0E);
        state0 = _mm_sha256rnds2_epu32(state0, state1, message);
      }
      state0 = _mm_add_epi32(state0, abef);
      state1 = _mm_add_epi32(state1, cdgh);
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
    state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
    state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
    state1 = _mm_alignr_epi8(state1, tmp, 8);     // HGFE
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&h_[0]), state0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&h_[4]), state1);
  }
#endif

  // The portable compression of one block.
  void compress(const unsigned char* block) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(block[4 * i]) << 24 | uint32_t(block[4 * i + 1]) << 16 | uint32_t(block[4 * i + 2]) << 8 |
             block[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], k = h_[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      k = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a; h_[1] += b; h_[2] += c; h_[3] += d; h_[4] += e; h_[5] += f; h_[6] += g; h_[7] += k;
  }

  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;
  bool portable_only_ = false;
};

// Lower-case hex digest of the bytes.
inline std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes);
  return hash.hex_digest();
}

}  // namespace arbiter
