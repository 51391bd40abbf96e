// PTX wrappers for sm_80 and later (Ampere): shared-memory addresses, cp.async copies into
// shared memory, ldmatrix and mma.sync m16n8k16. Kept in a header, apart from the kernels
// that use them, so that tests/ptx_probes runs each on its own (golden data for emulation).
// Each has a "memory" clobber: the compiler must not move ordinary shared-memory accesses
// across them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace arbiter::cuda {

// The 32-bit shared-window address of a generic pointer into shared memory (what the PTX
// shared-memory instructions take).
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

namespace sm80 {

// ---- cp.async ------------------------------------------------------------------------------

// 16 bytes global -> shared, asynchronously: the first src_bytes (0..16) are read, the rest
// of the 16 are zero-filled (src_bytes 0: all zeros, outside the matrix). .cg: cached in L2
// only. Complete only after copy_wait of the group it was committed with.
__device__ __forceinline__ void copy_async(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// Closes the group of this thread's cp.asyncs issued since the last commit.
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ---- ldmatrix and mma.sync ----------------------------------------------------------------

// Four 8x8 matrices of 16-bit elements from shared memory: lanes 8 q .. 8 q + 7 give the
// addresses of rows 0..7 of matrix q; r[q] of lane l then holds row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1 of matrix q (the lower column in the low half).
__device__ __forceinline__ void ldmatrix_x4(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// The same four 8x8 matrices transposed on the way (.trans): r[q] of lane l holds rows
// 2 (l % 4) and 2 (l % 4) + 1 of column l / 4 of matrix q (the lower row in the low half).
// From a row-major [k][n] tile this is mma's B fragment (b0, b1 below) with no transposing copy.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// D[16 x 8] += A[16 x 16] . B[16 x 8] on one warp, f32 accumulators, 16-bit T operands.
// With g = lane / 4 and t = lane % 4 (PTX ISA, mma.m16n8k16 fragments):
//   a[0]: A[g][2t, 2t+1]  a[1]: A[g+8][2t, 2t+1]  a[2]: A[g][2t+8, 2t+9]  a[3]: A[g+8][2t+8, 2t+9]
//   b0: B[2t, 2t+1][g]    b1: B[2t+8, 2t+9][g]
//   d[0], d[1]: D[g][2t, 2t+1]                    d[2], d[3]: D[g+8][2t, 2t+1]
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace sm80
}  // namespace arbiter::cuda
