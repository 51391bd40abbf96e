// gemm_bf16_amx: bf16 GEMM on AMX tiles (Sapphire Rapids and later), for small and medium shapes.
//
// tdpbf16ps multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile of B (stored as 16 rows of
// VNNI pairs) into a 16 x 16 f32 tile: 8192 multiply-adds per instruction, about sixteen times
// what vdpbf16ps does per cycle. The operands are packed into the workspace as for
// gemm_bf16_avx512 (bf16_packing.hpp), rounded up to whole tiles with zeros. Each block of
// 32 x 32 outputs keeps four f32 tiles (tmm0-3) over all of k, loading two A tiles (tmm4-5)
// and two B tiles (tmm6-7) per 32 of k; the sums then go through gemm_small's epilogue.
//
// Linux hands out AMX state only to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM for
// XTILEDATA, once per process); without that the first tile instruction faults, so the
// plugin asks before it reports the kernel usable (amx_usable()). The tile configuration is
// per thread: every launch loads it and releases the tiles before it returns.
#include "bf16_packing.hpp"

#include <arbiter/plugin.hpp>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace arbiter::cpu {
namespace {

constexpr int64_t kTile = 16;   // rows of a tile, and f32 columns of a C tile
constexpr int64_t kDepth = 32;  // bf16 values of k per A tile row (64 bytes)
constexpr int64_t kBlock = 32;  // a block is 2 x 2 tiles of C

struct Packed {
  int64_t mp, kp, np;  // m and n rounded up to kBlock, k to kDepth
  uint16_t* a;         // [mp][kp]
  uint32_t* b;         // [kp / 2][np]
};

size_t packed_bytes(const arb_problem& p, int64_t* a_bytes = nullptr) {
  const int64_t mp = round_up(p.m, kBlock), kp = round_up(p.k, kDepth), np = round_up(p.n, kBlock);
  const int64_t a = round_up(mp * kp * 2, 64);
  if (a_bytes) *a_bytes = a;
  return static_cast<size_t>(a + kp / 2 * np * 4 + 64);  // + 64: aligning the start
}

// The palette-1 configuration: tmm0-3 C (16 rows of 16 f32), tmm4-5 A (16 rows of 32 bf16),
// tmm6-7 B (16 rows of 16 VNNI pairs): every row 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  TileConfig() {
    for (int t = 0; t < 8; ++t) {
      bytes_per_row[t] = 64;
      rows[t] = kTile;
    }
  }
};
static_assert(sizeof(TileConfig) == 64, "the LDTILECFG operand is 64 bytes");

// The 32 x 32 f32 sums of block (i0, j0) into `sums` (row stride kTileStride floats).
void block(const Packed& packed, int64_t i0, int64_t j0, float* sums) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const size_t a_stride = static_cast<size_t>(packed.kp) * 2, b_stride = static_cast<size_t>(packed.np) * 4;
  const uint16_t* a0 = packed.a + i0 * packed.kp;
  const uint16_t* a1 = a0 + kTile * packed.kp;
  for (int64_t q = 0; q < packed.kp; q += kDepth) {
    const uint32_t* b = packed.b + (q / 2) * packed.np + j0;  // 16 rows of pairs: k from q to q + 31
    _tile_loadd(4, a0 + q, a_stride);
    _tile_loadd(5, a1 + q, a_stride);
    _tile_loadd(6, b, b_stride);
    _tile_loadd(7, b + kTile, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  constexpr size_t kStride = kTileStride * sizeof(float);
  _tile_stored(0, sums, kStride);
  _tile_stored(1, sums + kTile, kStride);
  _tile_stored(2, sums + kTile * kTileStride, kStride);
  _tile_stored(3, sums + kTile * kTileStride + kTile, kStride);
}

}  // namespace

bool amx_usable() {
  // Asked once per process; the answer (the kernel's own ability to run) never changes after.
  static const bool granted = [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
}

size_t gemm_bf16_amx_workspace(const arb_problem& problem) { return packed_bytes(problem); }

void gemm_bf16_amx(const arb_problem& p, const arb_operands& o, void* workspace, size_t workspace_bytes) {
  int64_t a_bytes = 0;
  if (workspace_bytes < packed_bytes(p, &a_bytes)) throw plugin::Error(ARB_ERR_KERNEL, "gemm_bf16_amx: workspace too small");
  if (!amx_usable()) throw plugin::Error(ARB_ERR_KERNEL, "gemm_bf16_amx: the kernel refused AMX state to this process");
  auto* base = reinterpret_cast<unsigned char*>(round_up(reinterpret_cast<int64_t>(workspace), 64));
  Packed packed{round_up(p.m, kBlock), round_up(p.k, kDepth), round_up(p.n, kBlock), reinterpret_cast<uint16_t*>(base),
                reinterpret_cast<uint32_t*>(base + a_bytes)};
  pack_a(p, static_cast<const uint16_t*>(o.a), packed.a, packed.mp, packed.kp);
  pack_b(p, static_cast<const uint16_t*>(o.b), packed.b, packed.kp, packed.np);

  using E = uint16_t;
  const Epilogue<ARB_DTYPE_BF16> epilogue{p, static_cast<const E*>(o.c), static_cast<const E*>(o.bias),
                                          static_cast<E*>(o.d), o.alpha, o.beta};
  static_assert(kTileStride == kBlock, "a block's sums are one epilogue tile");
  alignas(64) float sums[kBlock * kTileStride];
  const TileConfig config;
  _tile_loadconfig(&config);
  for (int64_t j0 = 0; j0 < p.n; j0 += kBlock) {
    const int64_t valid_cols = std::min<int64_t>(kBlock, p.n - j0);
    for (int64_t i0 = 0; i0 < p.m; i0 += kBlock) {
      block(packed, i0, j0, sums);
      finish_bf16_tile(epilogue, sums, static_cast<int>(std::min<int64_t>(kBlock, p.m - i0)), i0, j0,
                                  valid_cols);
    }
  }
  _tile_release();
}

}  // namespace arbiter::cpu
