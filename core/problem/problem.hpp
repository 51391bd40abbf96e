// The problem: the C struct arb_problem (plugin.h) and what the runtime does with it.
// Two problems are the same exactly when their bytes are (the struct has no padding and is
// always built zero-filled), so the selection cache can compare and hash raw words: those of
// the problem's op (ProblemWords below), every other word being zero.
#pragma once

#include <arbiter/float16.hpp>
#include <arbiter/plugin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace arbiter {

class Op;

// Zero-filled, struct_size set, the op's defaults applied (gemm: batch 1).
arb_problem empty_problem(arb_op op);
arb_problem empty_problem(const Op& op);

// The problem as words, for the hash and the compare below.
inline constexpr size_t kProblemWords = sizeof(arb_problem) / sizeof(uint64_t);
static_assert(sizeof(arb_problem) % sizeof(uint64_t) == 0);
inline uint64_t problem_word(const arb_problem& problem, size_t i) noexcept {
  uint64_t word;
  __builtin_memcpy(&word, reinterpret_cast<const char*>(&problem) + i * sizeof word, sizeof word);
  return word;
}

// The words of arb_problem a problem may set: bit i for word i (problem_word). Every op has its
// own (Op::problem_words(): the header and the op's fields), every other word of its problems
// being zero: problems are built zero-filled (empty_problem, the calls' fast path), so comparing
// an op's words alone compares whole problems. The cache compares only these, so an op's cost
// does not grow with the fields later ops append to arb_problem.
using ProblemWords = uint64_t;
static_assert(kProblemWords <= 64, "arb_problem outgrew ProblemWords: widen the mask");
inline constexpr ProblemWords kAllProblemWords =
    kProblemWords == 64 ? ~ProblemWords{0} : (ProblemWords{1} << kProblemWords) - 1;
// The words that hold bytes [begin, end) of arb_problem.
constexpr ProblemWords problem_words(size_t begin, size_t end) {
  ProblemWords words = 0;
  for (size_t i = begin / sizeof(uint64_t); i * sizeof(uint64_t) < end; ++i) words |= ProblemWords{1} << i;
  return words;
}
// struct_size, op, dtype, device, alignment, flags: every op's.
inline constexpr ProblemWords kProblemHeaderWords = problem_words(0, offsetof(arb_problem, m));
static_assert(offsetof(arb_problem, m) == 4 * sizeof(uint64_t));

// Every word outside `words` is zero.
inline bool problem_within(const arb_problem& problem, ProblemWords words) noexcept {
  uint64_t stray = 0;
  for (size_t i = 0; i < kProblemWords; ++i)
    if ((~words >> i & 1) != 0) stray |= problem_word(problem, i);
  return stray == 0;
}

// Do the problems agree on `words`? With every word (the default), are they the same? Both run
// on every call (the selection cache), inline: `words` a constant there, the loop unrolls into
// the op's words alone, two at a time (GCC's vector extension: SSE2 on any x86-64); the hash
// below folds with a problem built in the same function (the fields of other ops are known zeros).
inline bool same_problem(const arb_problem& a, const arb_problem& b, ProblemWords words = kAllProblemWords) noexcept {
  typedef uint64_t Pair __attribute__((vector_size(16)));
  constexpr size_t kPairs = kProblemWords / 2;
  Pair differ = {0, 0};
#pragma GCC unroll 32
  for (size_t i = 0; i < kPairs; ++i) {
    if ((words >> (2 * i) & 3) == 0) continue;
    Pair x, y;
    __builtin_memcpy(&x, reinterpret_cast<const char*>(&a) + i * sizeof x, sizeof x);
    __builtin_memcpy(&y, reinterpret_cast<const char*>(&b) + i * sizeof y, sizeof y);
    differ |= x ^ y;
  }
  uint64_t rest = differ[0] | differ[1];
  for (size_t i = kPairs * 2; i < kProblemWords; ++i)
    if ((words >> i & 1) != 0) rest |= problem_word(a, i) ^ problem_word(b, i);
  return rest == 0;
}

// One independent multiply per word (a different odd constant for each position, so no
// chain of dependent multiplies), then one multiply by 2^64 / golden ratio (Fibonacci hashing):
// its top bits depend on every bit of the sum, and the selection cache takes its slot from them.
// A zero word adds nothing: the hash over an op's words alone (words outside them zero) is this
// hash. The constants fit an imul's 32-bit immediate: one instruction per word, its load included.
inline constexpr auto kProblemHashMultipliers = [] {
  std::array<uint64_t, kProblemWords> m{};
  uint64_t k = 0x9e3779b97f4a7c15ull;
  for (uint64_t& v : m) v = ((k += 0xd6e8feb86659fd93ull) >> 33) | 1u;  // below 2^31
  return m;
}();
// The words the hash reads: the op and dtype, and the sizes (gemm's m, n, k and batch; the
// row ops' rows and cols; rope's and attention's heads, q_len, kv_len and kv_heads; mlp's
// inter; qkv's head_dim). Problems that differ only in strides, alignment or flags share a slot's
// neighbourhood and are told apart by the compare, which reads every word of the op; hashing
// those words too cost each gemm call 16 instructions more (bench/dispatch_overhead.sh).
inline constexpr ProblemWords kHashedProblemWords =
    problem_words(offsetof(arb_problem, op), offsetof(arb_problem, dtype) + sizeof(int32_t)) |
    problem_words(offsetof(arb_problem, m), offsetof(arb_problem, batch) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, rows), offsetof(arb_problem, cols) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, heads), offsetof(arb_problem, heads) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, q_len), offsetof(arb_problem, kv_heads) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, inter), offsetof(arb_problem, inter) + sizeof(int64_t)) |
    problem_words(offsetof(arb_problem, head_dim), offsetof(arb_problem, head_dim) + sizeof(int64_t));
// The selection cache hashes a problem with a call key (call_key.hpp: the calls' fast path's
// gemm, rmsnorm, softmax and swiglu) by that key, and any other problem by this.
inline uint64_t problem_hash(const arb_problem& problem, ProblemWords words = kAllProblemWords) noexcept {
  words &= kHashedProblemWords;
  uint64_t h = 0;
#pragma GCC unroll 64
  for (size_t i = 0; i < kProblemWords; ++i)
    if ((words >> i & 1) != 0) h += problem_word(problem, i) * kProblemHashMultipliers[i];
  return h * 0x9e3779b97f4a7c15ull;
}
// The largest power of two, at most 256, that divides every value (addresses, byte strides).
// On the path of every call, hence inline.
inline int32_t alignment_class(std::initializer_list<uint64_t> values) noexcept {
  uint64_t combined = 256;
  for (uint64_t v : values) combined |= v;
  return static_cast<int32_t>(combined & (~combined + 1));  // lowest set bit
}

// The alignment class of the problem's row strides alone (buffers assumed 256-byte aligned):
// every row-stride field of arb_problem, those of other ops being zero. The element size is
// a power of two, so OR-ing the strides before scaling loses nothing.
inline int32_t stride_alignment(const arb_problem& p) noexcept {
  const auto strides = static_cast<uint64_t>(p.lda | p.ldb | p.ldc | p.ldd | p.ld_x | p.ld_y | p.ld_residual |
                                                  p.ld_gate | p.ld_up | p.ld_head | p.ld_q_batch |
                                                  p.ld_q_token | p.ld_q_head | p.ld_k_batch | p.ld_k_token |
                                                  p.ld_k_head | p.ld_v_batch | p.ld_v_token | p.ld_v_head |
                                                  p.ld_o_batch | p.ld_o_token | p.ld_o_head | p.ld_down | p.ld_w);
  return alignment_class({strides * static_cast<uint64_t>(dtype_size(p.dtype))});
}

// The canonical key: the problem written in the problem syntax with every field explicit,
// e.g. "gemm f32 m=8 n=16 k=4 ta=0 tb=0 act=none bias=0 beta=0 lda=4 ldb=16 ldd=16 align=256 device=cpu".
// parse_problem(problem_key(p)).problem == p.
std::string problem_key(const arb_problem& problem);

// The problem class: the key without sizes and row strides (op, dtype, device, transposes,
// epilogue, fused inputs, alignment). Verification verdicts hold per kernel and class.
std::string problem_class_key(const arb_problem& problem);

// Throws Failure(ARB_ERR_INVALID_ARGUMENT) if sizes, strides or enums are out of range.
void validate_problem(const arb_problem& problem);
void validate_problem(const Op& op, const arb_problem& problem);
// Throws Failure(ARB_ERR_INVALID_ARGUMENT) if ld < row_length ("lda = 3 is below ...").
void check_row_stride(const char* name, int64_t ld, int64_t row_length);

}  // namespace arbiter
