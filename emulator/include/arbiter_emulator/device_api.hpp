// What emulated device code calls: the SIMT emulator's side of threadIdx, barriers, warp
// collectives, shared memory, clusters and inline PTX (libarbiter_emu, emulator/runtime/).
// The CUDA stand-in headers beside this folder (cuda_runtime.h, cooperative_groups.h, ...)
// and the code emucc writes for __shared__ declarations and asm statements call these; a
// kernel's own source never does. Every call that can fail takes the caller's source
// location, so that a report names the kernel's line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>

#define ARBITER_EMU_API __attribute__((visibility("default")))

namespace arbiter_emulated_cuda {
struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// The built-in variables: the running emulated thread's, rewritten by the emulator's
// scheduler at every switch between threads (a block's threads share one host thread).
// Initial-exec TLS: kernels read them constantly, and the general model costs a call of
// __tls_get_addr per read; 48 bytes of the static TLS block that dlopen keeps spare.
#define ARBITER_EMU_TLS __attribute__((visibility("default"), tls_model("initial-exec")))
extern thread_local uint3 threadIdx ARBITER_EMU_TLS;
extern thread_local uint3 blockIdx ARBITER_EMU_TLS;
extern thread_local dim3 blockDim ARBITER_EMU_TLS;
extern thread_local dim3 gridDim ARBITER_EMU_TLS;
}  // namespace arbiter_emulated_cuda

namespace arbiter::emu {

// A place in the kernel's source: the caller of a device function (each takes
// `Where where = Where::current()`, evaluated where it is called) or an asm statement.
struct Site {
  const char* file = "";
  int line = 0;
  Site() = default;
  Site(const char* f, int l) : file(f), line(l) {}
  Site(const std::source_location& l) : file(l.file_name()), line(static_cast<int>(l.line())) {}  // NOLINT
  static Site current(std::source_location l = std::source_location::current()) { return Site(l); }
};
using Where = Site;
using arbiter_emulated_cuda::dim3;
using arbiter_emulated_cuda::uint3;

// ---- barriers and warp collectives ------------------------------------------------------------
ARBITER_EMU_API void syncthreads(Where where = Where::current());
// __syncthreads_count / _and / _or: how many of the block's threads passed a true predicate.
ARBITER_EMU_API int syncthreads_count(int predicate, Where where = Where::current());
ARBITER_EMU_API void syncwarp(unsigned mask, Where where = Where::current());

enum class Shuffle { index, up, down, xor_ };
// One 32-bit word through shfl.sync (wider values go as several words, as on the GPU).
ARBITER_EMU_API uint32_t shuffle(Shuffle kind, unsigned mask, uint32_t value, int operand, int width,
                                 Where where = Where::current());
ARBITER_EMU_API unsigned ballot(unsigned mask, int predicate, Where where = Where::current());
ARBITER_EMU_API unsigned activemask();
// __match_any_sync / __match_all_sync on a 64-bit key.
ARBITER_EMU_API unsigned match_any(unsigned mask, uint64_t value, Where where = Where::current());
ARBITER_EMU_API unsigned match_all(unsigned mask, uint64_t value, int* predicate, Where where = Where::current());

// ---- faults, time -------------------------------------------------------------------------------
[[noreturn]] ARBITER_EMU_API void trap(const char* why, Where where = Where::current());
ARBITER_EMU_API long long clock64();
ARBITER_EMU_API void nanosleep(unsigned nanoseconds);  // yields to the other threads
ARBITER_EMU_API void yield(Where where = Where::current());

// ---- shared memory -------------------------------------------------------------------------------
// The block's copy of the static __shared__ variable declared where `tag` lives (one tag
// per declaration and template instantiation): `bytes` at `align`, filled with garbage.
ARBITER_EMU_API void* shared_variable(const void* tag, size_t bytes, size_t align, Where where = Where::current());
// The dynamic shared memory (extern __shared__) of the launch, aligned as declared.
ARBITER_EMU_API void* dynamic_shared(size_t align, Where where = Where::current());
// __cvta_generic_to_shared and back: 32-bit addresses in the block's shared window.
ARBITER_EMU_API uint32_t generic_to_shared(const void* pointer, Where where = Where::current());
ARBITER_EMU_API void* shared_to_generic(uint32_t address, Where where = Where::current());
ARBITER_EMU_API bool is_shared(const void* pointer);

// ---- kernels -------------------------------------------------------------------------------------
// What __launch_bounds__ and __cluster_dims__ said (0: not given). emucc puts a call first
// in every __global__ function body.
struct KernelAttributes {
  int max_threads = 0, min_blocks = 0, max_blocks_per_cluster = 0;
  unsigned cluster_x = 0, cluster_y = 0, cluster_z = 0;
};
ARBITER_EMU_API void kernel_entry(const KernelAttributes& attributes);

// ---- clusters (cooperative_groups::this_cluster) -----------------------------------------------
ARBITER_EMU_API unsigned cluster_block_rank();
ARBITER_EMU_API dim3 cluster_dims();
ARBITER_EMU_API dim3 cluster_block_index();  // the block's position in its cluster
ARBITER_EMU_API void cluster_sync(Where where = Where::current());
ARBITER_EMU_API void* map_shared_rank(const void* pointer, unsigned rank, Where where = Where::current());

// ---- inline PTX ------------------------------------------------------------------------------------
// One operand of an asm statement: its constraint ('r', 'l', 'h', 'f', 'd', 'n', 'c'), whether
// it is written ('=' or '+') and read ('+' or an input), where its value lives and its size.
struct AsmOperand {
  char constraint = 'r';
  bool read = true, written = false;
  void* storage = nullptr;  // the C++ lvalue (outputs) or `value` (inputs)
  unsigned size = 0;        // bytes of the C++ object
  uint64_t value = 0;       // an input's value, widened
  bool floating = false;    // a float or double object
};
// One asm statement in the source (emucc makes one static Site per statement).
struct AsmSite {
  const char* text;  // the PTX template, %N for operands
  const char* file;
  int line;
  void* program = nullptr;  // parsed once, on first use
};
ARBITER_EMU_API void run_asm(AsmSite& site, AsmOperand* operands, size_t count);

}  // namespace arbiter::emu
