// Tensor-core GEMM with mma.sync for sm_80 and up: D[m,n] = epilogue(A[m,k] . B[n,k]^T),
// f16 or bf16 operands, f32 accumulation. The classic Ampere structure:
//   - a 128 x 128 block tile, k in steps of 32, 3 shared-memory stages filled by cp.async
//     (16-byte copies, zero-filled past the edges of m, n and k);
//   - 8 warps as 2 (m) x 4 (n), each owning a 64 x 32 tile: 4 x 4 mma.m16n8k16 per 16 of k,
//     fragments loaded with ldmatrix from an XOR-swizzled layout (conflict-free);
//   - the epilogue (alpha, beta * C, bias, activation) from the accumulators, bounds-checked.
// Needs A [m,k] and B [n,k] (ta=0 tb=1), k a multiple of 8 and 16-byte aligned rows.
#include "gemm_epilogue.cuh"
#include "launch.cuh"
#include "sm80_ptx.cuh"

#include <cstdint>

namespace arbiter::cuda {
namespace {

using namespace sm80;

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 32, kStages = 3;
constexpr int kThreads = 256;
constexpr int kWarpM = 64, kWarpN = 32;          // 2 x 4 warps
constexpr int kChunksPerRow = kBlockK * 2 / 16;  // 16-byte chunks in a 32-element row: 4
constexpr int kTileBytes = kBlockM * kBlockK * 2;
constexpr int kStageBytes = 2 * kTileBytes;  // A and B
constexpr int kSharedBytes = kStages * kStageBytes;  // 48 KiB

// Byte offset of chunk c of row r in a [128][32] tile: the chunk index XOR-swizzled by
// (r / 2) % 4, so that ldmatrix's 8 rows of one chunk column fall in 8 different banks.
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return static_cast<uint32_t>(row * (kBlockK * 2) + ((chunk ^ ((row >> 1) & 3)) * 16));
}

// Loads one k-tile of A (rows of m) or B (rows of n) into a stage: 128 rows x 4 chunks, two
// chunks per thread. Rows past `rows` and chunks past k are zero-filled.
template <typename T>
__device__ __forceinline__ void load_tile(uint32_t stage, const T* matrix, int64_t ld, int64_t first_row,
                                          int64_t rows, int64_t k0, int64_t k) {
#pragma unroll
  for (int i = 0; i < kBlockM * kChunksPerRow / kThreads; ++i) {
    const int index = threadIdx.x + i * kThreads;
    const int row = index / kChunksPerRow, chunk = index % kChunksPerRow;
    const int64_t global_row = first_row + row, global_k = k0 + chunk * 8;
    const bool inside = global_row < rows && global_k < k;  // k % 8 == 0: a chunk is all in or all out
    const T* src = inside ? matrix + global_row * ld + global_k : matrix;  // a valid address either way
    copy_async(stage + tile_offset(row, chunk), src, inside ? 16 : 0);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) gemm_sm80_kernel(GemmArgs g) {
  extern __shared__ __align__(128) unsigned char shared[];
  const uint32_t base = shared_address(shared);
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / 4, warp_n = warp % 4;  // 2 x 4
  const int64_t block_m = static_cast<int64_t>(blockIdx.y) * kBlockM;
  const int64_t block_n = static_cast<int64_t>(blockIdx.x) * kBlockN;
  const int k_tiles = static_cast<int>((g.k + kBlockK - 1) / kBlockK);

  float acc[4][4][4] = {};  // [m16 tile][n8 tile][fragment]

  auto stage_a = [&](int s) { return base + static_cast<uint32_t>(s * kStageBytes); };
  auto stage_b = [&](int s) { return base + static_cast<uint32_t>(s * kStageBytes + kTileBytes); };
  auto load_stage = [&](int s, int k_tile) {
    const int64_t k0 = static_cast<int64_t>(k_tile) * kBlockK;
    load_tile(stage_a(s), a, g.lda, block_m, g.m, k0, g.k);
    load_tile(stage_b(s), b, g.ldb, block_n, g.n, k0, g.k);
  };

  // Prologue: the first kStages - 1 tiles in flight (a group per stage, empty past the end,
  // so that wait_group counts the same in every iteration).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    copy_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    copy_wait<kStages - 2>();  // tile kt has landed (this thread's copies)
    __syncthreads();           // everyone's copies; and every warp is done with tile kt - 1
    const int next = kt + kStages - 1;
    if (next < k_tiles) load_stage(next % kStages, next);  // overwrites the stage of tile kt - 1
    copy_commit();

    const int s = kt % kStages;
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      uint32_t fa[4][4], fb[2][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // A: rows warp_m * 64 + i * 16 + (lane % 16), chunk 2 kk + lane / 16
        const int row = warp_m * kWarpM + i * 16 + lane % 16;
        ldmatrix_x4(stage_a(s) + tile_offset(row, kk * 2 + lane / 16), fa[i]);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {  // B: two n8 tiles per ldmatrix.x4
        const int row = warp_n * kWarpN + j * 16 + (lane / 16) * 8 + lane % 8;
        ldmatrix_x4(stage_b(s) + tile_offset(row, kk * 2 + (lane / 8) % 2), fb[j]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_16816<T>(acc[i][j], fa[i], fb[j / 2][(j % 2) * 2], fb[j / 2][(j % 2) * 2 + 1]);
    }
  }
  copy_wait<0>();  // no copy may still target shared memory when the block exits

  // Accumulator layout of m16n8: d0, d1 at row lane / 4, columns 2 (lane % 4) + {0, 1};
  // d2, d3 eight rows further down.
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int64_t row = block_m + warp_m * kWarpM + i * 16 + lane / 4 + (f / 2) * 8;
        const int64_t col = block_n + warp_n * kWarpN + j * 8 + (lane % 4) * 2 + f % 2;
        if (row < g.m && col < g.n) store_output<T>(g, row, col, acc[i][j][f]);
      }
}

}  // namespace

cudaError_t launch_gemm_sm80(const GemmArgs& g, cudaStream_t stream) {
  if (g.m < 1 || g.n < 1 || g.k < 1 || (g.m + kBlockM - 1) / kBlockM > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((g.n + kBlockN - 1) / kBlockN), static_cast<unsigned>((g.m + kBlockM - 1) / kBlockM));
  return g.dtype == Dtype::f16 ? launch_kernel(gemm_sm80_kernel<__half>, grid, kThreads, kSharedBytes, stream, g)
                               : launch_kernel(gemm_sm80_kernel<__nv_bfloat16>, grid, kThreads, kSharedBytes, stream, g);
}

}  // namespace arbiter::cuda
