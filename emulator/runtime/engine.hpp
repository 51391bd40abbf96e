// The SIMT emulator's execution model (emulator/README.md): a launch runs cluster by cluster;
// a cluster (one block when there are no clusters) runs on one host thread, every CUDA thread
// of it a fiber. Threads run until they reach an emulated synchronisation (a barrier, a warp
// collective, a failed mbarrier wait) and meet there; the scheduler picks who runs next
// according to the launch's schedule. Whatever breaks CUDA's rules (a divergent barrier, a
// shuffle naming an exited lane, a deadlock, an access outside shared memory) is a fault: the
// launch stops and reports it with the kernel's source line and the threads involved.
#pragma once

#include "arbiter_emulator/device_api.hpp"
#include "arbiter_emulator/runtime_api.hpp"
#include "fiber.hpp"

#include <array>
#include <atomic>
#include <bitset>
#include <cstdlib>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace arbiter::emu {

struct Block;
struct Cluster;
struct Launch;

std::string schedule_name(const Schedule& schedule);

// Thrown on a fiber to unwind it when its launch has faulted (caught at the fiber's base).
struct LaunchAborted {};

// ---- per thread ------------------------------------------------------------------------------

// One cp.async: `bytes` copied from global memory, the rest of `size` zero-filled.
struct AsyncCopy {
  unsigned char* destination;  // in the block's shared memory
  const unsigned char* source;
  unsigned size, bytes;
};

// More about a wait than its name (an mbarrier's phase and pending arrivals...): described
// only when a report needs it, from the waited-for object as it is then.
struct WaitDescription {
  std::string (*describe)(const void* object, uint64_t value) = nullptr;
  const void* object = nullptr;
  uint64_t value = 0;
};

struct ThreadState {
  uint3 index{};         // threadIdx
  unsigned linear = 0;   // (z * blockDim.y + y) * blockDim.x + x
  unsigned lane = 0, warp = 0;
  Block* block = nullptr;
  std::unique_ptr<Fiber> fiber;
  enum class Run { ready, blocked, exited } run = Run::ready;
  bool spun = false;      // its last turn ended in a failed wait (no progress of its own)
  // What it waits for, for deadlock reports: a fixed text, or a function that describes the
  // wait from its object when a report is made (text built at every wait would cost more
  // than the wait itself).
  const char* waiting = nullptr;
  WaitDescription wait_detail;
  Site where;             // where it last met the emulator
  // cp.async groups: committed ones in order, then the ones not yet committed.
  std::deque<std::vector<AsyncCopy>> copy_groups;
  std::vector<AsyncCopy> copies_uncommitted;
  void* collective_slot = nullptr;  // its inputs and outputs while it waits at a collective
  // The race check (race_check.hpp): accesses stamped before these cluster clock values are
  // ordered before this thread's next ones (any thread's; its own warp's).
  uint32_t ordered_before = 0, warp_ordered_before = 0;
};

// ---- per block -------------------------------------------------------------------------------

// A collective of a group of threads (a warp, a warpgroup): everyone named arrives, then the
// last one to arrive combines their slots and all go on.
struct Collective {
  const char* kind = nullptr;  // "__shfl_xor_sync", "wgmma.mma_async", ... (nullptr: no meeting open)
  std::bitset<128> members, arrived;
  Site where;
  void (*combine)(void** slots, const std::bitset<128>& members, void* context) = nullptr;
  void* context = nullptr;
};

struct MbarrierState;
struct WarpgroupState;

struct SharedWindow {
  // Shared address space of the block: [dynamic_offset, dynamic_offset + dynamic bytes) is the
  // dynamic part (extern __shared__), [static_offset, static_offset + static capacity) the
  // static variables. Each part is its own host allocation, exactly sized.
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> dynamic_allocation, static_allocation;
  unsigned char* dynamic_memory = nullptr;
  unsigned char* static_memory = nullptr;
  uint32_t dynamic_offset = 0, dynamic_bytes = 0, static_offset = 0, static_capacity = 0;
};

// The race check's record of one byte of shared memory: its last writer and its last two
// readers (cluster-wide thread numbers + 1; 0 for none), each with the clock value then.
struct RaceCell {
  uint32_t write_time = 0, read_time = 0, other_read_time = 0;
  uint16_t writer = 0, reader = 0, other_reader = 0;
  uint8_t atomic_write = 0, atomic_read = 0;
};

struct Block {
  Cluster* cluster = nullptr;
  unsigned rank = 0;  // in the cluster
  uint3 index{};      // blockIdx
  std::vector<ThreadState> threads;
  unsigned exited = 0;
  bool gone = false;  // every thread has exited: its shared memory no longer exists
  SharedWindow window;
  // __syncthreads: who has arrived, and where.
  std::vector<ThreadState*> barrier_arrived;
  int barrier_count = 0;  // __syncthreads_count's sum
  std::vector<Collective> warp_collectives, warpgroup_collectives;  // by warp, by warpgroup
  std::map<uint32_t, std::unique_ptr<MbarrierState>> mbarriers;  // by shared address
  std::vector<std::unique_ptr<WarpgroupState>> warpgroups;
  int register_pool_free = 0;  // registers given back by setmaxnreg.dec, not yet taken
  std::vector<RaceCell> race_dynamic, race_static;  // per byte of each part, made on first access
  size_t live() const { return threads.size() - exited; }
};

struct Cluster {
  Launch* launch = nullptr;
  uint3 index{};  // the cluster's position in the grid, in clusters
  std::vector<std::unique_ptr<Block>> blocks;
  std::vector<ThreadState*> barrier_arrived;  // cluster.sync()
  uint64_t progress = 0;  // bumped by anything that could unblock a thread
  uint32_t race_clock = 0;  // advanced by every synchronisation (race_check.hpp)
  // The span of host addresses its blocks' shared memory lies in: most accesses (to global
  // memory) fall outside, and the race check rejects them with two comparisons.
  const unsigned char* shared_low = nullptr;
  const unsigned char* shared_high = nullptr;
};

struct Launch {
  const void* kernel = nullptr;
  KernelThunk run = nullptr;
  void* arguments = nullptr;
  LaunchConfig config;
  KernelInfo info;
  dim3 cluster_dims{1, 1, 1};
  Schedule schedule;
  // The static __shared__ layout, shared by every block: tag -> offset in the static part.
  std::mutex layout_mutex;
  std::map<const void*, uint32_t> static_layout;
  std::atomic<uint32_t> static_used{0};  // bytes of the static part in use: accesses past them fault
  // The first fault, and the launch's status.
  std::mutex fault_mutex;
  std::string fault;
  Status status = kSuccess;
};

// ---- the scheduler's services to the rest of the emulator --------------------------------------

// The emulated thread running on this host thread (nullptr outside kernels).
ThreadState* current_thread();
ThreadState& this_thread(Site where);  // faults with a clear message outside a kernel

// Records the launch's first fault and unwinds the calling fiber. `status` says what kind.
[[noreturn]] void fault(Status status, const std::string& what, Site where);
// Blocks the calling thread until someone marks it ready again; unwinds if the launch faulted.
void block(const char* waiting_for, Site where);
void wake(ThreadState* thread);
// A failed wait: the thread stays ready but gives the others a turn.
void spin(const char* waiting_for, Site where, WaitDescription detail = {});
void progress(Block& block);

// Meets the calling thread with the other members of a collective (scope 0: its warp, 1: its
// warpgroup); `slot` holds its inputs and, afterwards, its outputs.
void meet(int scope, const std::bitset<128>& members, const char* kind, void* slot,
          void (*combine)(void** slots, const std::bitset<128>& members, void* context), void* context, Site where);
// The calling thread's index within its collective scope (lane, or thread of the warpgroup).
unsigned scope_index(const ThreadState& t, int scope);
std::string thread_name(const ThreadState& t);
std::string where_text(Site where);

// Runs one launch (already validated) to the end; returns its status (fault in launch.fault).
Status run_launch(Launch& launch);
// Runs the probe of a kernel on a fiber until kernel_entry; returns what it declared.
bool probe_kernel(const void* kernel, KernelProbe probe, KernelAttributes& declared, std::string& why);

// Defined by the PTX layer: the asynchronous state a block carries (mbarriers, TMA copies in
// flight, wgmma groups), checked when the block ends.
void finish_block_async_state(Block& block);

}  // namespace arbiter::emu
