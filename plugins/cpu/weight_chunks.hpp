// The order in which the fused CPU kernels for decode sizes (mlp*.cpp, qkv*.cpp) take a
// projection's weight rows and token rows: the weight rows a chunk of kWeightChunk at a time,
// which stays in L2 while every block of kRowBlock token rows passes over it. At decode the
// weights are nearly all the memory traffic, and this reads each of them from memory once.
// No ISA of its own: the AVX2 and the AVX512-BF16 projections both walk it.
//
// Internal linkage only (an unnamed namespace): the files that include it may be built for
// different ISAs, and the linker must never swap one's copy for another's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace arbiter::cpu {
namespace {

constexpr int64_t kRowBlock = 4;      // token rows sharing each weight load
constexpr int64_t kWeightChunk = 16;  // weight rows kept in L2 across the row blocks

// Weight rows [0, count) a chunk of kWeightChunk at a time, and over each chunk every block of
// token rows (kRowBlock, then the remainder): step(block, row, j0, j1), where block is a
// std::integral_constant<int, R> of the block's R rows from `row`.
template <typename Step>
void over_weight_chunks(int64_t rows, int64_t count, Step&& step) {
  static_assert(kRowBlock == 4, "the remainders below are those of four rows");
  for (int64_t j0 = 0; j0 < count; j0 += kWeightChunk) {
    const int64_t j1 = std::min(j0 + kWeightChunk, count);
    int64_t r = 0;
    for (; r + kRowBlock <= rows; r += kRowBlock) step(std::integral_constant<int, kRowBlock>{}, r, j0, j1);
    switch (rows - r) {
      case 3: step(std::integral_constant<int, 3>{}, r, j0, j1); break;
      case 2: step(std::integral_constant<int, 2>{}, r, j0, j1); break;
      case 1: step(std::integral_constant<int, 1>{}, r, j0, j1); break;
      default: break;
    }
  }
}

}  // namespace
}  // namespace arbiter::cpu
