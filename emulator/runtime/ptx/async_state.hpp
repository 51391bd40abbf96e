// What a block carries between instructions of its threads: mbarriers (phase, arrivals,
// transaction count), the TMA copies that complete on them, and each warpgroup's wgmma groups
// and register budget (setmaxnreg). When a TMA copy lands is the launch's choice (at issue,
// or only when someone waits on its barrier, or either at random), so that a kernel that
// reads a stage too early, or releases it too early, sees it go wrong under some schedule.
#pragma once

#include "../engine.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace arbiter::emu {

struct TmaCopy {
  std::function<void()> land;  // performs the copy into shared memory
  uint32_t bytes = 0;          // transactions it completes
  Site where;
};

struct MbarrierState {
  uint64_t cookie = 0;  // written into the barrier's 8 bytes by init; ordinary stores there break it
  uint32_t expected = 0, pending = 0;
  int64_t transactions = 0;  // bytes announced (expect_tx) minus bytes landed
  uint64_t phase = 0;        // phases completed so far
  uint32_t completed_at = 0; // the race check's clock when the last phase completed
  std::vector<TmaCopy> in_flight;
  Site initialised;
};

// One wgmma.mma_async of a warpgroup: the shape, the operand descriptors and, per thread, where
// its accumulators live (executed at wait_group).
struct WgmmaOp {
  int n = 0;
  bool a_bf16 = true, b_bf16 = true;
  uint64_t desc_a = 0, desc_b = 0;
  bool scale_d = true;
  float scale_a = 1, scale_b = 1;
  std::vector<std::vector<float*>> accumulators;  // [thread of the warpgroup][n / 2]
  Site where;
};

struct WarpgroupState {
  std::vector<WgmmaOp> uncommitted;
  std::deque<std::vector<WgmmaOp>> groups;
  int registers = 0;          // per thread, after setmaxnreg
  int waiting_for = 0;        // a setmaxnreg.inc not granted yet: the count it asked for
  bool granted = true;
};

// The block's mbarrier at a shared address (shared::cta or shared::cluster); faults if there is
// none, or its memory was overwritten.
MbarrierState& mbarrier_at(uint32_t address, Site where, Block** owner = nullptr);
// Lands the copies in flight on a barrier and completes the phase if it can.
void land_copies(MbarrierState& barrier, Block& block);
void complete_transactions(MbarrierState& barrier, Block& block, uint32_t bytes);
// Whether a TMA copy issued now lands at once (the launch's policy).
bool land_at_issue(Launch& launch);
WarpgroupState& warpgroup_of(ThreadState& thread);

}  // namespace arbiter::emu
