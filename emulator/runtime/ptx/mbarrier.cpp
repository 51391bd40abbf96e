// mbarrier (PTX ISA, "Parallel Synchronization: mbarrier"): a phase completes when all its
// expected arrivals have arrived and its transaction count (bytes announced by expect_tx,
// less bytes landed by complete_tx) is zero; the next phase then starts with the expected
// count again. try_wait.parity p asks whether the phase of parity p has completed: true when
// the current phase's parity differs from p (a fresh barrier is in phase 0, so a wait for
// parity 1 returns at once). A failed try_wait yields to the other threads.
// Checked here: use before init, init of a barrier with copies in flight, arrivals beyond the
// expected count, ordinary stores over a barrier's 8 bytes, misaligned barriers.
#include "../race_check.hpp"
#include "../shared_memory.hpp"
#include "async_state.hpp"
#include "machine.hpp"

#include <cstring>
#include <memory>
#include <random>

namespace arbiter::emu {

namespace {

// A waiter's view of a barrier, for deadlock reports (value: 0, or 2 + the parity waited for).
std::string describe_wait(const void* object, uint64_t value) {
  const MbarrierState& s = *static_cast<const MbarrierState*>(object);
  std::string text = value >= 2 ? "for parity " + std::to_string(value - 2) + " " : "";
  return text + "(phase " + std::to_string(s.phase) + ", " + std::to_string(s.pending) + " arrivals and " +
         std::to_string(s.transactions) + " transaction bytes pending)";
}

uint64_t cookie_of(uint32_t address, const Block& block) {
  return 0xa5b1e7c3d2f40000ull ^ (static_cast<uint64_t>(address) << 8) ^ block.rank ^
         (reinterpret_cast<uintptr_t>(&block) << 20);
}

}  // namespace

MbarrierState& mbarrier_at(uint32_t address, Site where, Block** owner) {
  uint32_t offset = 0;
  Block& b = cluster_target(address, offset, where);
  if (offset % 8 != 0) fault(kErrorMisalignedAddress, "an mbarrier address that is not 8-byte aligned", where);
  auto it = b.mbarriers.find(offset);
  if (it == b.mbarriers.end())
    fault(kErrorLaunchFailure, "an mbarrier used before mbarrier.init (shared address " + std::to_string(offset) + ")", where);
  uint64_t in_memory = 0;
  std::memcpy(&in_memory, shared_bytes(address, 8, "mbarrier", where), 8);
  if (in_memory != it->second->cookie)
    fault(kErrorLaunchFailure,
          "the 8 bytes of the mbarrier at shared address " + std::to_string(offset) +
              " (initialised at " + where_text(it->second->initialised) + ") were overwritten by ordinary stores",
          where);
  if (owner) *owner = &b;
  return *it->second;
}

bool land_at_issue(Launch& launch) {
  // lockstep and warp-ahead land at once, reverse only when waited for, random either way.
  // On the heap: its 2.5 KB of state would not fit the static TLS a dlopen'ed library gets.
  static thread_local std::unique_ptr<std::mt19937_64> coin;
  if (!coin) coin = std::make_unique<std::mt19937_64>(12345);
  switch (launch.schedule.kind) {
    case ScheduleKind::lockstep:
    case ScheduleKind::warp_ahead: return true;
    case ScheduleKind::reverse: return false;
    default: return ((*coin)() & 1) != 0;
  }
}

void maybe_complete(MbarrierState& s, Block& b) {
  if (s.pending == 0 && s.transactions == 0) {
    ++s.phase;
    s.pending = s.expected;
    s.completed_at = race::now(*b.cluster);
    progress(b);
  }
}

void complete_transactions(MbarrierState& s, Block& b, uint32_t bytes) {
  s.transactions -= bytes;
  progress(b);
  maybe_complete(s, b);
}

void land_copies(MbarrierState& s, Block& b) {
  std::vector<TmaCopy> copies = std::move(s.in_flight);
  s.in_flight.clear();
  for (TmaCopy& c : copies) {
    c.land();
    complete_transactions(s, b, c.bytes);
  }
}

namespace ptx {
namespace {

void arrive(MbarrierState& s, Block& b, uint32_t count, const Instruction& in, Machine& m) {
  if (count > s.pending)
    m.fail(kErrorLaunchFailure,
           "too many arrivals: the phase expects " + std::to_string(s.expected) + " and has " +
               std::to_string(s.expected - s.pending) + " already (its transactions are still pending)",
           in);
  s.pending -= count;
  progress(b);
  maybe_complete(s, b);
}

void mbarrier(Machine& m, const Instruction& in) {
  if (in.parts.size() < 2) m.unsupported(in);
  const std::string& op = in.parts[1];
  if (op == "init") {
    // mbarrier.init.shared[::cta].b64 [addr], count
    if (in.operands.size() != 2) m.unsupported(in);
    const uint32_t address = static_cast<uint32_t>(m.address(in.operands[0]));
    const uint32_t count = static_cast<uint32_t>(m.read(in.operands[1], 32));
    if (count < 1 || count > (1u << 20) - 1) m.fail(kErrorLaunchFailure, "an arrival count outside 1 .. 2^20 - 1", in);
    uint32_t offset = 0;
    Block& b = cluster_target(address, offset, m.where());
    if (offset % 8 != 0) m.fail(kErrorMisalignedAddress, "an mbarrier address that is not 8-byte aligned", in);
    auto& slot = b.mbarriers[offset];
    if (slot && !slot->in_flight.empty())
      m.fail(kErrorLaunchFailure, "mbarrier.init of a barrier that TMA copies still complete on", in);
    slot = std::make_unique<MbarrierState>();
    slot->expected = slot->pending = count;
    slot->cookie = cookie_of(offset, b);
    slot->initialised = m.where();
    std::memcpy(shared_bytes(address, 8, "mbarrier.init", m.where()), &slot->cookie, 8);
    progress(b);
    return;
  }
  if (op == "inval") {
    uint32_t offset = 0;
    Block& b = cluster_target(static_cast<uint32_t>(m.address(in.operands.at(0))), offset, m.where());
    b.mbarriers.erase(offset);
    return;
  }
  // The address operand: the first one in brackets.
  const Operand* address_operand = nullptr;
  for (const Operand& o : in.operands)
    if (o.kind == Operand::Kind::address) {
      address_operand = &o;
      break;
    }
  if (address_operand == nullptr) m.unsupported(in);
  Block* owner = nullptr;
  MbarrierState& s = mbarrier_at(static_cast<uint32_t>(m.address(*address_operand)), m.where(), &owner);
  Block& b = *owner;
  if (op == "arrive" || op == "arrive_drop") {
    // mbarrier.arrive[.expect_tx][.release.cta|cluster].shared[::cta|::cluster].b64 state|_, [addr][, count|tx]
    const bool expect = in.has("expect_tx");
    uint32_t count = 1;
    size_t after = 0;
    while (after < in.operands.size() && &in.operands[after] != address_operand) ++after;
    if (after + 1 < in.operands.size()) {
      const uint32_t value = static_cast<uint32_t>(m.read(in.operands[after + 1], 32));
      if (expect) s.transactions += value;
      else count = value;
    }
    const uint64_t token = s.phase;
    if (op == "arrive_drop") {
      if (s.expected < count) m.fail(kErrorLaunchFailure, "arrive_drop below zero expected arrivals", in);
      s.expected -= count;
    }
    arrive(s, b, count, in, m);
    if (&in.operands[0] != address_operand) m.write(in.operands[0], token, 64);
    return;
  }
  if (op == "expect_tx") {
    s.transactions += static_cast<uint32_t>(m.read(in.operands.at(1), 32));
    return;
  }
  if (op == "complete_tx") {
    complete_transactions(s, b, static_cast<uint32_t>(m.read(in.operands.at(1), 32)));
    return;
  }
  if (op == "try_wait" || op == "test_wait") {
    // mbarrier.{try,test}_wait[.parity][.acquire...].shared[::cta].b64 p, [addr], state|parity[, suspend]
    if (in.operands.size() < 3) m.unsupported(in);
    const bool parity = in.has("parity");
    const uint64_t operand = m.read(in.operands[2], 64);
    auto done = [&] { return parity ? (s.phase & 1) != (operand & 1) : s.phase > operand; };
    if (!done() && !s.in_flight.empty()) land_copies(s, b);
    const bool complete = done();
    if (complete) race::acquired(this_thread(m.where()), s.completed_at);
    m.write_pred(in.operands[0], complete);
    if (!complete)
      spin(op == "test_wait" ? (parity ? "mbarrier.test_wait.parity" : "mbarrier.test_wait")
                             : (parity ? "mbarrier.try_wait.parity" : "mbarrier.try_wait"),
           m.where(),
           {describe_wait, &s, parity ? 2 + (operand & 1) : 0});
    return;
  }
  m.unsupported(in);
}

const bool registered = (register_family("mbarrier", mbarrier), true);

}  // namespace
}  // namespace ptx
}  // namespace arbiter::emu
