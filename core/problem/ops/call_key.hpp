// A call's problem packed into six words: the key the calls' fast path (call_fast_path.hpp)
// builds in registers and the selection cache compares, in place of arb_problem's 48 words.
//
// Why: a gemm call's problem sets 15 words of arb_problem; built, hashed and compared as such
// they kept so many values live that a third of the call went to spilled registers
// (bench/dispatch_overhead.sh). Packed, the same facts take six words.
//
// The packing is lossless on its domain: problems of gemm, rmsnorm, softmax and swiglu with
// a dtype of f32, f16 or bf16, sizes and row strides below 2^32, gemm's batch 1, and every
// field the key does not hold at its only value (zero, struct_size sizeof). Two problems of the
// domain are the same exactly when their keys are; pack_call_key() answers false outside it.
//
//   word 0  the device: device_type | device_id << 32 (a DLDevice's bytes)
//   word 1  the tag: op (bits 0-7), alignment (8-16), activation (17-19), has_c (20),
//           c_is_d (21), has_bias (22), has_residual (23), trans_a (24); the dtype as DLPack
//           has it (code 32-39, bits 40-47, lanes 1 at 48); trans_b (56)
//   word 2  m | n << 32, or rows | cols << 32
//   word 3  gemm: k | lda << 32; rmsnorm, softmax: ld_x | ld_y << 32; swiglu: ld_gate | ld_up << 32
//   word 4  gemm: ldb | ldd << 32; rmsnorm: ld_residual; swiglu: ld_y
//   word 5  gemm: ldc
// Words past an op's (call_key_words) are zero.
#pragma once

#include <arbiter/plugin.h>

#include <cstddef>
#include <cstdint>

namespace arbiter {

inline constexpr size_t kCallKeyWords = 6;

struct CallKey {
  uint64_t word[kCallKeyWords];
};

// Tag fields (word 1).
namespace call_key {
inline constexpr int kAlignmentShift = 8;
inline constexpr int kActivationShift = 17;
inline constexpr uint64_t kHasC = uint64_t{1} << 20;
inline constexpr uint64_t kCIsD = uint64_t{1} << 21;
inline constexpr uint64_t kHasBias = uint64_t{1} << 22;
inline constexpr uint64_t kHasResidual = uint64_t{1} << 23;
// trans_a and trans_b as arb_problem holds them, one word with each in its low bit: shifted
// by this, to bits 24 and 56.
inline constexpr int kTransposesShift = 24;
// The dtype as a DLTensor's header holds it after ndim: code, bits, lanes 1.
constexpr uint64_t dlpack_dtype(uint8_t code, uint8_t bits) {
  return uint64_t{code} << 32 | uint64_t{bits} << 40 | uint64_t{1} << 48;
}
}  // namespace call_key

// The words an op's keys may set: the rest are zero, so comparing these compares the keys
// (the tag, word 1, holds the op).
constexpr size_t call_key_words(arb_op op) {
  switch (op) {
    case ARB_OP_GEMM: return 6;
    case ARB_OP_RMSNORM: return 5;
    case ARB_OP_SWIGLU: return 5;
    default: return 4;  // softmax
  }
}

// Two 32-bit values in one word.
constexpr uint64_t pair_word(uint64_t low, uint64_t high) { return low | high << 32; }

// The hash of a key: its sizes (word 2: m and n, or rows and cols) times an odd constant, then
// times 2^64 / golden ratio so that the top bits, from which the selection cache takes a slot,
// depend on every bit. Keys that differ elsewhere only (the op, dtype, k, strides, flags) share
// a neighbourhood of slots, and the compare tells them apart; hashing the tag and word 3 as
// well cost each gemm call 6 instructions more (bench/dispatch_overhead.sh).
inline uint64_t call_key_hash(const CallKey& key) noexcept {
  return key.word[2] * 0x686239a9u * 0x9e3779b97f4a7c15ull;
}

// The first `words` words of the keys agree.
inline bool same_call_key(const CallKey& a, const CallKey& b, size_t words) noexcept {
#pragma GCC unroll 8
  for (size_t i = 0; i < kCallKeyWords; ++i)
    if (i < words && a.word[i] != b.word[i]) return false;
  return true;
}

// The key of a problem in the domain above; false outside it (key then unspecified). The
// problem must be zero outside its op's words (Op::problem_words(): the selection cache holds
// only such problems).
bool pack_call_key(const arb_problem& problem, CallKey& key) noexcept;

// The problem of a key pack_call_key() built (the calls' fast path's, in the tests).
arb_problem unpack_call_key(const CallKey& key) noexcept;

// A key no call builds: the selection cache's for problems outside the domain.
inline constexpr CallKey kNoCallKey = {{~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}}};

}  // namespace arbiter
