// Hopper GEMM (sm_90a): D[m,n] = epilogue(A[m,k] . B[n,k]^T), f16 or bf16, f32 accumulation,
// with block tiles of 128 x 128 or 128 x 256 (two kernels of the plugin).
//   - TMA (cp.async.bulk.tensor) brings 64-wide k-slices of A and B into shared memory with
//     128-byte swizzling, zero-filled past the edges of m, n and k;
//   - a 4-stage pipeline of mbarriers: `full` (the copies of a stage landed: one arrival
//     with the byte count, then the TMA transactions) and `empty` (all 256 consumer
//     threads are done reading the stage);
//   - warp specialisation: warpgroup 0 is the producer (one thread issues the copies),
//     warpgroups 1 and 2 are consumers, each computing 64 rows x 128 (or 256) columns with
//     wgmma.m64n128k16 (m64n256k16) straight from shared memory; for 256 columns the
//     producer gives registers to the consumers (setmaxnreg: 40 and 232);
//   - a persistent grid (one block per SM at most) walking the output tiles, so
//     the producer fetches the next tile's operands while the consumers finish the last;
//   - the epilogue (alpha, beta * C, bias, activation) from the accumulators, bounds-checked.
// Needs A [m,k] and B [n,k] (ta=0 tb=1), 16-byte aligned rows and addresses (TMA), k a
// multiple of 8. The tensor maps are encoded on the host for each launch.
#include "gemm_epilogue.cuh"
#include "launch.cuh"
#include "sm90_ptx.cuh"
#include "tensor_map.hpp"

#include <algorithm>

namespace arbiter::cuda {
namespace {

constexpr int kBlockM = 128, kBlockK = 64, kStages = 4;
constexpr int kThreads = 384;  // 3 warpgroups: producer, 2 consumers
constexpr int kTileABytes = kBlockM * kBlockK * 2;

// The block tile is 128 x kBlockN: 128 (wgmma n128, 64 accumulators a consumer thread) or
// 256 (n256, 128 accumulators: the producer hands registers to the consumers).
template <int kBlockN>
struct Tiling {
  static constexpr int kTileBBytes = kBlockN * kBlockK * 2;
  static constexpr int kStageBytes = kTileABytes + kTileBBytes;
  // Stages (each 1024-byte aligned, as 128-byte swizzling requires), then the barriers;
  // plus slack to align the dynamic shared memory base to 1024.
  static constexpr int kBarrierOffset = kStages * kStageBytes;
  static constexpr int kSharedBytes = kBarrierOffset + 2 * kStages * 8 + 1024;
  static constexpr int kAccumulators = kBlockN / 2;  // 64 x kBlockN over 128 threads
};
static_assert(Tiling<128>::kAccumulators == 64 && Tiling<256>::kAccumulators == 128, "a consumer's fragment");
static_assert(Tiling<256>::kSharedBytes <= 227 * 1024, "Hopper's shared memory per block");

template <typename T, int kBlockN>
__device__ __forceinline__ void wgmma_tile(float (&d)[kBlockN / 2], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (kBlockN == 256) {
    sm90::wgmma_m64n256k16<T>(d, desc_a, desc_b);
  } else {
    sm90::wgmma_m64n128k16<T>(d, desc_a, desc_b);
  }
}

template <typename T, int kBlockN>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, GemmArgs g) {
#if defined(ARBITER_SM90)
  using namespace sm90;
  using Tile = Tiling<kBlockN>;
  constexpr int kStageBytes = Tile::kStageBytes, kBarrierOffset = Tile::kBarrierOffset;
  extern __shared__ unsigned char shared_raw[];
  const uint32_t raw = shared_address(shared_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  auto tile_a = [&](int s) { return base + static_cast<uint32_t>(s * kStageBytes); };
  auto tile_b = [&](int s) { return base + static_cast<uint32_t>(s * kStageBytes + kTileABytes); };
  auto full = [&](int s) { return base + static_cast<uint32_t>(kBarrierOffset + s * 8); };
  auto empty = [&](int s) { return base + static_cast<uint32_t>(kBarrierOffset + (kStages + s) * 8); };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(full(s), 1);          // the producer's arrival (+ the TMA bytes)
      barrier_init(empty(s), 2 * 128);   // every consumer thread
    }
    barrier_init_fence();
  }
  __syncthreads();

  const int64_t tiles_m = (g.m + kBlockM - 1) / kBlockM, tiles = tiles_m * ((g.n + kBlockN - 1) / kBlockN);
  const int k_tiles = static_cast<int>((g.k + kBlockK - 1) / kBlockK);
  const int warpgroup = threadIdx.x / 128;

  if (warpgroup == 0) {
    // Producer: one thread walks the same tiles and k-steps as the consumers, filling
    // stage after stage as they are released.
    if constexpr (kBlockN == 256) registers_decrease<40>();  // 128 x 40 + 256 x 232 <= 65536
    if (threadIdx.x != 0) return;
    uint32_t step = 0;  // k-tiles issued by this block so far
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int32_t m0 = static_cast<int32_t>((tile % tiles_m) * kBlockM);
      const int32_t n0 = static_cast<int32_t>((tile / tiles_m) * kBlockN);
      for (int kt = 0; kt < k_tiles; ++kt, ++step) {
        const int s = static_cast<int>(step % kStages);
        const uint32_t round = step / kStages;
        barrier_wait(empty(s), (round & 1) ^ 1);  // round 0: free from the start
        barrier_expect_bytes(full(s), kStageBytes);
        tma_load_2d(tile_a(s), &map_a, full(s), kt * kBlockK, m0);
        tma_load_2d(tile_b(s), &map_b, full(s), kt * kBlockK, n0);
      }
    }
    return;
  }

  // Consumers: warpgroup 1 takes rows 0-63 of each tile, warpgroup 2 rows 64-127.
  if constexpr (kBlockN == 256) registers_increase<232>();
  const int half = warpgroup - 1;
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
  uint32_t step = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t m0 = (tile % tiles_m) * kBlockM;
    const int64_t n0 = (tile / tiles_m) * kBlockN;
    float d[Tile::kAccumulators];
#pragma unroll
    for (int i = 0; i < Tile::kAccumulators; ++i) d[i] = 0.0f;
    // One k-tile's wgmmas stay in flight while the next tile's are issued; a stage is
    // released once the group that read it has completed.
    int previous = -1;
    for (int kt = 0; kt < k_tiles; ++kt, ++step) {
      const int s = static_cast<int>(step % kStages);
      barrier_wait(full(s), (step / kStages) & 1);
      fence_operands(d);
      wgmma_fence();  // orders the accumulators' earlier writes (the zeroing) before the wgmmas
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        // 32 bytes = 16 elements along k per step; this half's rows start 64 rows (8 KiB) in.
        const uint64_t desc_a = descriptor(tile_a(s) + static_cast<uint32_t>(half * 64 * 128 + kk * 32));
        const uint64_t desc_b = descriptor(tile_b(s) + static_cast<uint32_t>(kk * 32));
        wgmma_tile<T, kBlockN>(d, desc_a, desc_b);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous k-tile's group is done: its stage is no longer read
      fence_operands(d);
      if (previous >= 0) barrier_arrive(empty(previous));
      previous = s;
    }
    wgmma_wait<0>();  // the accumulators are final
    fence_operands(d);
    if (previous >= 0) barrier_arrive(empty(previous));
    // d[4 j + f]: row warp * 16 + lane / 4 + 8 (f / 2), column 8 j + 2 (lane % 4) + f % 2.
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int64_t row = m0 + half * 64 + warp * 16 + lane / 4 + 8 * (f / 2);
        const int64_t col = n0 + 8 * j + 2 * (lane % 4) + f % 2;
        if (row < g.m && col < g.n) store_output<T>(g, row, col, d[4 * j + f]);
      }
  }
#else
  __trap();  // built for sm_90a only; supports() never sends another GPU here
#endif
}

template <typename T, int kBlockN>
cudaError_t launch_typed(const GemmArgs& g, cudaStream_t stream) {
  constexpr int kSharedBytes = Tiling<kBlockN>::kSharedBytes;
  // The shared-memory opt-in, checked at every launch (a context reset drops it) but set only
  // when missing: the query is harmless inside a graph capture, the setter need not be.
  cudaFuncAttributes attributes{};
  cudaError_t status = cudaFuncGetAttributes(&attributes, gemm_sm90_kernel<T, kBlockN>);
  if (status == cudaSuccess && attributes.maxDynamicSharedSizeBytes < kSharedBytes)
    status =
        cudaFuncSetAttribute(gemm_sm90_kernel<T, kBlockN>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  if (status != cudaSuccess) return status;
  // setmaxnreg.inc waits until the block's pool can give 232 registers to each consumer
  // thread: with fewer than 168 a thread at launch it would wait forever. ptxas gives 168
  // under __launch_bounds__(384, 1); anything else (a -maxrregcount) is refused here.
  if (kBlockN == 256 && attributes.numRegs != 168) return cudaErrorInvalidConfiguration;
  CUtensorMap map_a, map_b;
  if (!make_tile_map(map_a, g.a, g.m, g.k, g.lda, g.dtype, kBlockM, kBlockK) ||
      !make_tile_map(map_b, g.b, g.n, g.k, g.ldb, g.dtype, kBlockN, kBlockK))
    return cudaErrorInvalidValue;
  const int64_t tiles = ((g.m + kBlockM - 1) / kBlockM) * ((g.n + kBlockN - 1) / kBlockN);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(tiles, std::max(g.sm_count, 1)));
  return launch_kernel(gemm_sm90_kernel<T, kBlockN>, blocks, kThreads, kSharedBytes, stream, map_a, map_b, g);
}

}  // namespace

cudaError_t launch_gemm_sm90(const GemmArgs& g, int block_n, cudaStream_t stream) {
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.m > 0x7fffffff || g.n > 0x7fffffff || g.k > 0x7fffffff)
    return cudaErrorInvalidValue;
  if (block_n == 256)
    return g.dtype == Dtype::f16 ? launch_typed<__half, 256>(g, stream) : launch_typed<__nv_bfloat16, 256>(g, stream);
  if (block_n == 128)
    return g.dtype == Dtype::f16 ? launch_typed<__half, 128>(g, stream) : launch_typed<__nv_bfloat16, 128>(g, stream);
  return cudaErrorInvalidValue;
}

}  // namespace arbiter::cuda
