// Races on shared memory (emulator/README.md, "Race checking"). emucc compiles device code
// with GCC's ThreadSanitizer instrumentation, but the instrumentation calls land here, not in
// libtsan: every load and store of emulated code reports its address, and those inside a
// block's shared-memory window are checked against the last accesses to the same bytes.
//
// The happens-before model is the emulator's own synchronisation, counted by a per-cluster
// clock that advances at every synchronisation event:
//   - a barrier (__syncthreads, bar.sync 0, cluster.sync) orders everything before it, for
//     every thread that passed it;
//   - a warp collective (a shuffle, a vote, __syncwarp) orders the accesses of the threads
//     of that warp;
//   - a completed mbarrier wait orders what happened before the phase completed.
// Two accesses to one byte by different threads, at least one a plain write, with no such
// event between them, are a race: the launch fails with both threads named. The model may
// miss a race (an mbarrier orders all earlier accesses, not only its arrivals'), never
// invents one. Accesses made by the emulator itself (cp.async, TMA, ldmatrix, wgmma) are
// not tracked. ARBITER_EMU_RACE_CHECK=0 turns the checks off.
#pragma once

#include "engine.hpp"

#include <cstdint>
#include <vector>

namespace arbiter::emu::race {

// Is the race check on (ARBITER_EMU_RACE_CHECK unset, or not "0")?
bool enabled();

// A barrier completed: every thread in `passed` is ordered after all accesses so far.
void barrier_passed(Cluster& cluster, const std::vector<ThreadState*>& passed);
// A warp collective completed: its members are ordered after their warp's accesses so far.
void warp_synchronised(Cluster& cluster, ThreadState* const* members, size_t count);
// The clock value at which an mbarrier phase completes, and a thread's successful wait on it.
uint32_t now(Cluster& cluster);
void acquired(ThreadState& thread, uint32_t completed_at);

}  // namespace arbiter::emu::race
