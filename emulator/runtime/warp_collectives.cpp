// shfl.sync, vote.sync (ballot), bar.warp.sync (__syncwarp) and match.sync: every lane named
// in the mask arrives (PTX ISA: the instruction waits for all non-exited threads of the mask;
// a mask naming an exited or missing lane is a fault here), then each gets its result.
#include "engine.hpp"

#include <string>

namespace arbiter::emu {
namespace {

struct Slot {
  uint32_t value = 0;
  int operand = 0;
  uint64_t key = 0;
  uint32_t result = 0;
  int predicate = 0;
};

std::bitset<128> warp_members(unsigned mask) { return std::bitset<128>(mask); }

struct ShuffleContext {
  Shuffle kind;
  int width;
  Site where;
};

void combine_shuffle(void** slots, const std::bitset<128>& members, void* context) {
  const ShuffleContext& c = *static_cast<ShuffleContext*>(context);
  for (int lane = 0; lane < 32; ++lane) {
    if (!members.test(static_cast<size_t>(lane))) continue;
    Slot& s = *static_cast<Slot*>(slots[lane]);
    const int w = c.width, segment = lane / w * w, position = lane % w;
    int source = lane;
    switch (c.kind) {
      case Shuffle::index: source = segment + ((s.operand % w) + w) % w; break;
      case Shuffle::up: source = position >= s.operand ? lane - s.operand : lane; break;
      case Shuffle::down: source = position + s.operand < w ? lane + s.operand : lane; break;
      case Shuffle::xor_: {
        const int x = lane ^ s.operand;
        source = x / w == lane / w || x < lane ? x : lane;  // a later segment: the own value
        break;
      }
    }
    if (source < 0 || source > 31 || !members.test(static_cast<size_t>(source)))
      fault(kErrorLaunchFailure,
            "shfl.sync: lane " + std::to_string(lane) + " reads lane " + std::to_string(source) +
                ", which is not in the mask (its value is undefined)",
            c.where);
    s.result = static_cast<Slot*>(slots[source])->value;
  }
}

const char* shuffle_name(Shuffle kind) {
  switch (kind) {
    case Shuffle::index: return "__shfl_sync";
    case Shuffle::up: return "__shfl_up_sync";
    case Shuffle::down: return "__shfl_down_sync";
    default: return "__shfl_xor_sync";
  }
}

void combine_ballot(void** slots, const std::bitset<128>& members, void*) {
  uint32_t bits = 0;
  for (int lane = 0; lane < 32; ++lane)
    if (members.test(static_cast<size_t>(lane)) && static_cast<Slot*>(slots[lane])->predicate) bits |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane)
    if (members.test(static_cast<size_t>(lane))) static_cast<Slot*>(slots[lane])->result = bits;
}

void combine_nothing(void**, const std::bitset<128>&, void*) {}

void combine_match(void** slots, const std::bitset<128>& members, void*) {
  for (int lane = 0; lane < 32; ++lane) {
    if (!members.test(static_cast<size_t>(lane))) continue;
    Slot& s = *static_cast<Slot*>(slots[lane]);
    uint32_t same = 0;
    for (int other = 0; other < 32; ++other)
      if (members.test(static_cast<size_t>(other)) && static_cast<Slot*>(slots[other])->key == s.key) same |= 1u << other;
    s.result = same;
  }
}

}  // namespace

uint32_t shuffle(Shuffle kind, unsigned mask, uint32_t value, int operand, int width, Where where) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    fault(kErrorLaunchFailure, std::string(shuffle_name(kind)) + ": width " + std::to_string(width) +
                                   " is not a power of two from 1 to 32",
          where);
  Slot slot;
  slot.value = value;
  slot.operand = operand;
  ShuffleContext context{kind, width, where};
  meet(0, warp_members(mask), shuffle_name(kind), &slot, combine_shuffle, &context, where);
  return slot.result;
}

unsigned ballot(unsigned mask, int predicate, Where where) {
  Slot slot;
  slot.predicate = predicate != 0;
  meet(0, warp_members(mask), "__ballot_sync", &slot, combine_ballot, nullptr, where);
  return slot.result;
}

void syncwarp(unsigned mask, Where where) {
  Slot slot;
  meet(0, warp_members(mask), "__syncwarp", &slot, combine_nothing, nullptr, where);
}

unsigned match_any(unsigned mask, uint64_t value, Where where) {
  Slot slot;
  slot.key = value;
  meet(0, warp_members(mask), "__match_any_sync", &slot, combine_match, nullptr, where);
  return slot.result;
}

unsigned match_all(unsigned mask, uint64_t value, int* predicate, Where where) {
  const unsigned same = match_any(mask, value, where);
  const bool all = same == mask;
  if (predicate) *predicate = all;
  return all ? mask : 0;
}

unsigned activemask() {
  // The lanes of the warp that have not exited: CUDA leaves the set to the hardware; this is
  // its largest value.
  const ThreadState& t = this_thread(Where::current());
  const Block& b = *t.block;
  unsigned mask = 0;
  for (unsigned lane = 0; lane < 32; ++lane) {
    const size_t linear = static_cast<size_t>(t.warp) * 32 + lane;
    if (linear < b.threads.size() && b.threads[linear].run != ThreadState::Run::exited) mask |= 1u << lane;
  }
  return mask;
}

}  // namespace arbiter::emu
