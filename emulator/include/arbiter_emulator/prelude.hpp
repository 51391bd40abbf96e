// Force-included first into every translation unit emucc compiles for the SIMT emulator
// (emulator/README.md). It makes CUDA C++ compile as host C++: the qualifiers, the built-in
// variables (threadIdx, ...), the architecture macros of an sm_90a build, and the markers that
// emucc's rewriting pass turns into calls of the emulator (__shared__ declarations, kernel
// attributes, asm statements). Kernel sources are compiled unchanged.
#pragma once

#define ARBITER_EMULATOR 1
#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define __CUDA_ARCH_FEAT_SM90_ALL 1
#define __CUDA_ARCH_SPECIFIC__ 900

#include "cuda_runtime.h"

#include <cstddef>
#include <cstdint>

// ---- qualifiers --------------------------------------------------------------------------------
#define __device__
#define __host__
#define __forceinline__ inline
// __noinline__ is left alone: libstdc++ spells the attribute __attribute__((__noinline__)).
#define __inline_hint__ inline
#define __constant__
#define __managed__
#define __grid_constant__
#define __restrict__ __restrict
#define __align__(n) alignas(n)
#define __builtin_align__(n) alignas(n)
#define __device_builtin__
// Markers for emucc's rewriting pass (emulator/emucc/rewrite.cpp); they never reach the compiler.
#define __global__ __arbiter_global__
#define __shared__ __arbiter_shared__
#define __launch_bounds__(...) __arbiter_launch_bounds__(__VA_ARGS__)
#define __cluster_dims__(...) __arbiter_cluster_dims__(__VA_ARGS__)
#define __maxnreg__(n)

// ---- built-in variables (threadIdx, blockIdx, blockDim, gridDim: device_api.hpp) ----------------
#define warpSize 32
#define __syncthreads() ::arbiter::emu::syncthreads()

namespace arbiter::emu::rewritten {

// What emucc writes for `__shared__ T name[...];`: the block's copy, found by a tag that is
// static in the declaring function (one per declaration and instantiation).
template <typename T>
T& shared_variable(const void* tag, size_t align, Where w = Where::current()) {
  return *static_cast<T*>(::arbiter::emu::shared_variable(tag, sizeof(T), align > alignof(T) ? align : alignof(T), w));
}
// ... and for `extern __shared__ T name[];`.
template <typename T>
T* dynamic_shared(size_t align, Where w = Where::current()) {
  return static_cast<T*>(::arbiter::emu::dynamic_shared(align > alignof(T) ? align : alignof(T), w));
}

// The operands of an asm statement: outputs refer to their lvalue, inputs carry their value.
template <typename T>
AsmOperand asm_output(char constraint, bool also_read, T& lvalue) {
  AsmOperand o;
  o.constraint = constraint;
  o.written = true;
  o.read = also_read;
  o.storage = const_cast<void*>(static_cast<const volatile void*>(&lvalue));
  o.size = sizeof(T);
  o.floating = std::is_floating_point_v<std::remove_cv_t<T>>;
  if (also_read) std::memcpy(&o.value, o.storage, sizeof(T) < 8 ? sizeof(T) : 8);
  return o;
}
template <typename T>
AsmOperand asm_input(char constraint, const T& value) {
  AsmOperand o;
  o.constraint = constraint;
  o.size = sizeof(T);
  using U = std::remove_cv_t<T>;
  o.floating = std::is_floating_point_v<U>;
  if constexpr (std::is_pointer_v<U>) {
    o.value = reinterpret_cast<uintptr_t>(value);
  } else if constexpr (std::is_integral_v<U> || std::is_enum_v<U>) {
    o.value = static_cast<uint64_t>(static_cast<int64_t>(value));  // sign-extended, as a wider register
  } else {
    static_assert(sizeof(U) <= 8, "an asm operand wider than 64 bits");
    std::memcpy(&o.value, &value, sizeof(U));
  }
  o.storage = &o.value;
  return o;
}

// The assert of device code: a failed one ends the kernel (cudaErrorAssert), not the host.
[[noreturn]] inline void device_assert_fail(const char* expression, const char* file, unsigned line, const char*) {
  ::arbiter::emu::trap(expression, Where::current());
  (void)file;
  (void)line;
}

}  // namespace arbiter::emu::rewritten
