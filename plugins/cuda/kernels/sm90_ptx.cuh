// PTX wrappers for sm_90a (Hopper) kernels: mbarriers, TMA bulk tensor copies, and wgmma
// with shared-memory descriptors. Only meaningful when compiled for sm_90a; the callers
// guard their bodies with ARBITER_SM90.
#pragma once

#include "sm80_ptx.cuh"  // shared_address

#include <cuda.h>  // CUtensorMap (a type only: nothing here links the driver library)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ARBITER_SM90 1
#endif

namespace arbiter::cuda::sm90 {

// ---- mbarriers -------------------------------------------------------------------------

__device__ __forceinline__ void barrier_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes initialised barriers visible to the async proxy (TMA) and the other threads' view.
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Arrives and announces `bytes` of TMA transactions that complete the phase.
__device__ __forceinline__ void barrier_expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Has the phase of the given parity completed? A fresh barrier is in phase 0, and the
// phase "before" it (parity 1) counts as completed. May suspend the thread for a while
// (a time limit of the hardware's choosing) before it answers false.
__device__ __forceinline__ bool barrier_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits until the phase of the given parity has completed.
__device__ __forceinline__ void barrier_wait(uint32_t bar, uint32_t parity) {
  while (!barrier_try_wait(bar, parity)) {
  }
}

// ---- TMA ---------------------------------------------------------------------------------

// Copies the box at (inner, outer) of a 2-D tensor map into shared memory; the barrier's
// transaction count drops by the box's bytes when it lands (zeros outside the tensor).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t inner,
                                            int32_t outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(inner), "r"(outer)
      : "memory");
}

// ---- wgmma -------------------------------------------------------------------------------

// A shared-memory matrix descriptor for a K-major tile written by TMA with 128-byte
// swizzling: rows of 64 16-bit elements (128 bytes), 8-row groups 1024 bytes apart.
// Advancing the start address by 32 bytes moves 16 elements along k.
__device__ __forceinline__ uint64_t descriptor(uint32_t address) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((address & 0x3FFFF) >> 4);  // start address
  d |= static_cast<uint64_t>(16 >> 4) << 16;             // leading byte offset (unused when swizzled)
  d |= static_cast<uint64_t>(1024 >> 4) << 32;           // stride byte offset: one 8-row group
  d |= static_cast<uint64_t>(1) << 62;                   // 128-byte swizzle
  return d;
}

// Pins the accumulators in place around wgmma: the compiler may not move their reads or
// writes across this point (CUTLASS's warpgroup_fence_operand).
template <int kCount>
__device__ __forceinline__ void fence_operands(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Moves registers between warpgroups (all 128 threads of the warpgroup execute it): the
// producer gives some up, the consumers take them, within the block's register budget.
template <int kRegisters>
__device__ __forceinline__ void registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// D[64 x 128] += A[64 x 16] . B[128 x 16]^T, both K-major in shared memory, f32 accumulators
// in the m64nNk16 fragment layout (d[4 j + f]: row warp * 16 + lane / 4 + 8 (f / 2),
// column 8 j + 2 (lane % 4) + f % 2).
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b);

// Eight accumulators d[i] .. d[i + 7] as read-write asm operands.
#define ARBITER_F8(d, i)                                                                                   \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])

// One wgmma.m64n128k16 with f32 accumulators for a 16-bit TYPE ("bf16" or "f16").
#define ARBITER_WGMMA_M64N128K16(TYPE, d, desc_a, desc_b) \
  asm volatile( \
      "{\n" \
      ".reg .pred accumulate;\n" \
      "setp.ne.b32 accumulate, %66, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {" \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
      "%64, %65, accumulate, 1, 1, 0, 0;\n" \
      "}\n" \
      : ARBITER_F8(d, 0), ARBITER_F8(d, 8), ARBITER_F8(d, 16), ARBITER_F8(d, 24), \
        ARBITER_F8(d, 32), ARBITER_F8(d, 40), ARBITER_F8(d, 48), ARBITER_F8(d, 56) \
      : "l"(desc_a), "l"(desc_b), "r"(1) \
      : "memory");

template <>
__device__ __forceinline__ void wgmma_m64n128k16<__nv_bfloat16>(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  ARBITER_WGMMA_M64N128K16("bf16", d, desc_a, desc_b);
}

template <>
__device__ __forceinline__ void wgmma_m64n128k16<__half>(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  ARBITER_WGMMA_M64N128K16("f16", d, desc_a, desc_b);
}

#undef ARBITER_WGMMA_M64N128K16

// One wgmma.m64n256k16 with f32 accumulators for a 16-bit TYPE ("bf16" or "f16").
#define ARBITER_WGMMA_M64N256K16(TYPE, d, desc_a, desc_b) \
  asm volatile( \
      "{\n" \
      ".reg .pred accumulate;\n" \
      "setp.ne.b32 accumulate, %130, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {" \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
      "%128, %129, accumulate, 1, 1, 0, 0;\n" \
      "}\n" \
      : ARBITER_F8(d, 0), ARBITER_F8(d, 8), ARBITER_F8(d, 16), ARBITER_F8(d, 24), \
        ARBITER_F8(d, 32), ARBITER_F8(d, 40), ARBITER_F8(d, 48), ARBITER_F8(d, 56), \
        ARBITER_F8(d, 64), ARBITER_F8(d, 72), ARBITER_F8(d, 80), ARBITER_F8(d, 88), \
        ARBITER_F8(d, 96), ARBITER_F8(d, 104), ARBITER_F8(d, 112), ARBITER_F8(d, 120) \
      : "l"(desc_a), "l"(desc_b), "r"(1) \
      : "memory");

// D[64 x 256] += A[64 x 16] . B[256 x 16]^T: as m64n128k16, with j up to 31.
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b);

template <>
__device__ __forceinline__ void wgmma_m64n256k16<__nv_bfloat16>(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  ARBITER_WGMMA_M64N256K16("bf16", d, desc_a, desc_b);
}

template <>
__device__ __forceinline__ void wgmma_m64n256k16<__half>(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  ARBITER_WGMMA_M64N256K16("f16", d, desc_a, desc_b);
}

#undef ARBITER_WGMMA_M64N256K16

#undef ARBITER_F8

}  // namespace arbiter::cuda::sm90
