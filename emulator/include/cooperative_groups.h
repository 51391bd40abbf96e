// Stand-in for CUDA's cooperative_groups.h in emulated builds: the thread block, thread-block
// clusters with distributed shared memory (this_cluster, map_shared_rank) and tiles of a
// warp, their syncs met at the emulator's scheduler.
#pragma once

#include "arbiter_emulator/device_api.hpp"
#include "cuda_runtime.h"

namespace cooperative_groups {

using arbiter::emu::Where;

class thread_block {
 public:
  void sync(Where w = Where::current()) const { arbiter::emu::syncthreads(w); }
  unsigned thread_rank() const { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
  unsigned size() const { return num_threads(); }
  unsigned num_threads() const { return blockDim.x * blockDim.y * blockDim.z; }
  dim3 group_index() const { return blockIdx; }
  dim3 thread_index() const { return threadIdx; }
  dim3 dim_threads() const { return blockDim; }
};
inline thread_block this_thread_block() { return {}; }
inline void sync(const thread_block& g, Where w = Where::current()) { g.sync(w); }

class cluster_group {
 public:
  void sync(Where w = Where::current()) const { arbiter::emu::cluster_sync(w); }
  unsigned block_rank() const { return arbiter::emu::cluster_block_rank(); }
  unsigned num_blocks() const {
    const dim3 d = arbiter::emu::cluster_dims();
    return d.x * d.y * d.z;
  }
  dim3 dim_blocks() const { return arbiter::emu::cluster_dims(); }
  dim3 block_index() const { return arbiter::emu::cluster_block_index(); }
  unsigned thread_rank() const { return block_rank() * this_thread_block().num_threads() + this_thread_block().thread_rank(); }
  unsigned num_threads() const { return num_blocks() * this_thread_block().num_threads(); }
  unsigned size() const { return num_threads(); }
  template <typename T>
  T* map_shared_rank(T* address, unsigned rank, Where w = Where::current()) const {
    return static_cast<T*>(arbiter::emu::map_shared_rank(address, rank, w));
  }
  template <typename T>
  T& map_shared_rank(T& reference, unsigned rank, Where w = Where::current()) const {
    return *map_shared_rank(&reference, rank, w);
  }
};
inline cluster_group this_cluster() { return {}; }
inline void sync(const cluster_group& g, Where w = Where::current()) { g.sync(w); }

// A tile of Size consecutive threads of a warp (Size a power of two, at most 32).
template <unsigned Size>
class thread_block_tile {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0, "tiles of 1, 2, 4, 8, 16 or 32 threads");

 public:
  unsigned thread_rank() const { return this_thread_block().thread_rank() % Size; }
  unsigned size() const { return Size; }
  unsigned num_threads() const { return Size; }
  unsigned meta_group_rank() const { return this_thread_block().thread_rank() / Size; }
  unsigned mask() const {
    const unsigned lane = this_thread_block().thread_rank() % 32;
    return (Size == 32 ? 0xffffffffu : ((1u << Size) - 1)) << (lane / Size * Size);
  }
  void sync(Where w = Where::current()) const { arbiter::emu::syncwarp(mask(), w); }
  template <typename T>
  T shfl(T v, int source, Where w = Where::current()) const { return __shfl_sync(mask(), v, source, Size, w); }
  template <typename T>
  T shfl_xor(T v, int lane_mask, Where w = Where::current()) const { return __shfl_xor_sync(mask(), v, lane_mask, Size, w); }
  template <typename T>
  T shfl_down(T v, unsigned delta, Where w = Where::current()) const { return __shfl_down_sync(mask(), v, delta, Size, w); }
  template <typename T>
  T shfl_up(T v, unsigned delta, Where w = Where::current()) const { return __shfl_up_sync(mask(), v, delta, Size, w); }
  unsigned ballot(int predicate, Where w = Where::current()) const {
    const unsigned lane = this_thread_block().thread_rank() % 32;
    return __ballot_sync(mask(), predicate, w) >> (lane / Size * Size);
  }
  bool any(int predicate, Where w = Where::current()) const { return ballot(predicate, w) != 0; }
  bool all(int predicate, Where w = Where::current()) const { return ballot(!predicate, w) == 0; }
};
template <unsigned Size>
thread_block_tile<Size> tiled_partition(const thread_block&) {
  return {};
}

}  // namespace cooperative_groups
