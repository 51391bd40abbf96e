// cp.async (PTX ISA, "Data Movement: cp.async"): 4, 8 or 16 bytes from global to shared memory
// per instruction, the rest of cp-size zero-filled past src-size; grouped by commit_group; a
// group lands only when the thread waits for it (wait_group N leaves N groups in flight), so a
// kernel that reads shared memory without the wait sees what was there before.
#include "../shared_memory.hpp"
#include "async_state.hpp"
#include "machine.hpp"

#include <cstring>

namespace arbiter::emu::ptx {

void bulk_copy(Machine& m, const Instruction& in);  // tma.cpp: cp.async.bulk[.tensor]

namespace {

void land(std::vector<AsyncCopy>& group) {
  for (const AsyncCopy& c : group) {
    std::memcpy(c.destination, c.source, c.bytes);
    std::memset(c.destination + c.bytes, 0, c.size - c.bytes);
  }
}

void wait_groups(ThreadState& t, size_t pending) {
  while (t.copy_groups.size() > pending) {
    land(t.copy_groups.front());
    t.copy_groups.pop_front();
  }
  progress(*t.block);
}

void cp(Machine& m, const Instruction& in) {
  if (in.parts.size() < 3 || in.parts[1] != "async") m.unsupported(in);
  ThreadState& t = m.thread();
  const std::string& what = in.parts[2];
  if (what == "bulk") return bulk_copy(m, in);
  if (what == "commit_group") {
    t.copy_groups.push_back(std::move(t.copies_uncommitted));
    t.copies_uncommitted.clear();
    return;
  }
  if (what == "wait_group") {
    if (in.operands.size() != 1) m.unsupported(in);
    return wait_groups(t, static_cast<size_t>(m.read(in.operands[0], 32)));
  }
  if (what == "wait_all") {
    t.copy_groups.push_back(std::move(t.copies_uncommitted));
    t.copies_uncommitted.clear();
    return wait_groups(t, 0);
  }
  if (what != "ca" && what != "cg") m.unsupported(in);
  // cp.async.{ca,cg}.shared[::cta].global[.L2::...] [dst], [src], cp-size[, src-size][, policy]
  if (in.operands.size() < 3) m.unsupported(in);
  const uint32_t size = static_cast<uint32_t>(m.read(in.operands[2], 32));
  const uint32_t bytes = in.operands.size() >= 4 ? static_cast<uint32_t>(m.read(in.operands[3], 32)) : size;
  if (size != 4 && size != 8 && size != 16) m.fail(kErrorIllegalInstruction, "cp-size must be 4, 8 or 16", in);
  if (what == "cg" && size != 16) m.fail(kErrorIllegalInstruction, "cp.async.cg copies 16 bytes", in);
  if (bytes > size) m.fail(kErrorIllegalInstruction, "src-size above cp-size", in);
  const uint32_t dst = static_cast<uint32_t>(m.address(in.operands[0]));
  const uint64_t src = m.address(in.operands[1]);
  if (dst % size != 0 || src % size != 0) m.fail(kErrorMisalignedAddress, "cp.async addresses must be aligned to cp-size", in);
  AsyncCopy c;
  c.destination = shared_bytes(dst, size, "cp.async destination", m.where());
  c.source = reinterpret_cast<const unsigned char*>(src);
  c.size = size;
  c.bytes = bytes;
  t.copies_uncommitted.push_back(c);
}

const bool registered = (register_family("cp", cp), true);

}  // namespace
}  // namespace arbiter::emu::ptx
