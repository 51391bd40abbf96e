// The Tensor Memory Accelerator (PTX ISA, "cp.async.bulk.tensor" and "cp.async.bulk"):
//   cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//       [dst], [tensor map, {c0, ..., cN-1}], [mbarrier]
// copies the box at those (signed) coordinates into shared memory, inner dimension first,
// elements outside the tensor zero (or NaN with the NaN fill), the map's swizzle applied to the
// shared addresses; the full box's bytes complete on the barrier. The non-tensor form copies
// `size` bytes. When the copy lands is the launch's policy (async_state.hpp).
#include "../shared_memory.hpp"
#include "async_state.hpp"
#include "machine.hpp"
#include "tensor_map.hpp"

#include <array>
#include <cstring>

namespace arbiter::emu::ptx {
namespace {

// Issues `copy` on the barrier at `bar`: landed now or when someone waits for the barrier.
void issue(Machine& m, uint32_t bar, TmaCopy copy) {
  Block* owner = nullptr;
  MbarrierState& barrier = mbarrier_at(bar, m.where(), &owner);
  if (land_at_issue(*m.thread().block->cluster->launch)) {
    copy.land();
    complete_transactions(barrier, *owner, copy.bytes);
  } else {
    barrier.in_flight.push_back(std::move(copy));
    progress(*owner);
  }
}

void tensor_copy(Machine& m, const Instruction& in) {
  int rank = 0;
  for (const std::string& p : in.parts)
    if (p.size() == 2 && p[1] == 'd' && p[0] >= '1' && p[0] <= '5') rank = p[0] - '0';
  if (rank == 0 || !in.has("tile") || !in.has("global") || in.has("multicast::cluster") || in.has("im2col"))
    m.unsupported(in);
  if (in.operands.size() < 3 || in.operands[1].kind != Operand::Kind::address || in.operands[1].elements.size() != 2)
    m.unsupported(in);
  const uint32_t dst = static_cast<uint32_t>(m.address(in.operands[0]));
  const uint64_t map_address = m.read(in.operands[1].elements[0], 64) + in.operands[1].value;
  const std::vector<Operand> coordinate_operands = m.elements(in.operands[1].elements[1]);
  const uint32_t bar = static_cast<uint32_t>(m.address(in.operands[2]));
  std::string why;
  const EncodedTensorMap map = decode_tensor_map(reinterpret_cast<const void*>(map_address), why);
  if (!why.empty()) m.fail(kErrorIllegalAddress, why, in);
  if (map.rank != rank) m.fail(kErrorIllegalInstruction, "a " + std::to_string(rank) + "-D copy with a " +
                                                             std::to_string(map.rank) + "-D tensor map", in);
  if (static_cast<int>(coordinate_operands.size()) != rank) m.fail(kErrorIllegalInstruction, "wrong number of coordinates", in);
  if (dst % 128 != 0) m.fail(kErrorMisalignedAddress, "the shared-memory destination must be 128-byte aligned", in);
  int64_t coordinates[5] = {};
  for (int d = 0; d < rank; ++d)
    coordinates[d] = static_cast<int32_t>(m.read(coordinate_operands[static_cast<size_t>(d)], 32));
  uint64_t elements = 1;
  for (int d = 0; d < rank; ++d) elements *= map.box[d];
  const uint32_t bytes = static_cast<uint32_t>(elements * map.element_bytes);
  // The whole box must fit in the destination's shared memory (checked now, at issue).
  shared_bytes(dst, bytes, "cp.async.bulk.tensor destination", m.where());
  const Site where = m.where();
  // As a shared::cluster address: whoever lands the copy, it goes to the issuing block.
  const uint32_t target_address = (dst >> kClusterWindowShift) != 0 ? dst : ((m.thread().block->rank + 1) << kClusterWindowShift) | dst;
  std::array<int64_t, 5> start{};
  for (int d = 0; d < rank; ++d) start[d] = coordinates[d];
  TmaCopy copy;
  copy.bytes = bytes;
  copy.where = where;
  copy.land = [map, target_address, bytes, where, start] {
    const uint32_t dst = target_address;
    const unsigned e = map.element_bytes;
    const bool nan_fill = map.oob_fill != 0;
    uint64_t index[5] = {};
    for (uint64_t n = 0; n * e < bytes; ++n) {
      // The box element n, inner dimension fastest, and its place in the tensor.
      uint64_t rest = n;
      bool inside = true;
      uint64_t offset = 0;
      for (int d = 0; d < map.rank; ++d) {
        index[d] = rest % map.box[d];
        rest /= map.box[d];
        const int64_t g = start[d] + static_cast<int64_t>(index[d]);
        if (g < 0 || static_cast<uint64_t>(g) >= map.dims[d]) inside = false;
        else offset += static_cast<uint64_t>(g) * (d == 0 ? e : map.strides[d - 1]);
      }
      unsigned char* target = shared_bytes(swizzled(dst + static_cast<uint32_t>(n * e), map.swizzle), e, "TMA", where);
      if (inside) {
        std::memcpy(target, reinterpret_cast<const unsigned char*>(map.address) + offset, e);
      } else if (nan_fill) {
        std::memset(target, 0xff, e);  // a NaN in every float type
      } else {
        std::memset(target, 0, e);
      }
    }
  };
  issue(m, bar, std::move(copy));
}

void plain_copy(Machine& m, const Instruction& in) {
  // cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar]
  if (!in.has("global") || in.operands.size() < 4) m.unsupported(in);
  const uint32_t dst = static_cast<uint32_t>(m.address(in.operands[0]));
  const uint64_t src = m.address(in.operands[1]);
  const uint32_t size = static_cast<uint32_t>(m.read(in.operands[2], 32));
  const uint32_t bar = static_cast<uint32_t>(m.address(in.operands[3]));
  if (size % 16 != 0 || dst % 16 != 0 || src % 16 != 0)
    m.fail(kErrorMisalignedAddress, "bulk copies move multiples of 16 bytes between 16-byte aligned addresses", in);
  unsigned char* target = shared_bytes(dst, size, "cp.async.bulk destination", m.where());
  TmaCopy copy;
  copy.bytes = size;
  copy.where = m.where();
  copy.land = [target, src, size] { std::memcpy(target, reinterpret_cast<const unsigned char*>(src), size); };
  issue(m, bar, std::move(copy));
}

}  // namespace

void bulk_copy(Machine& m, const Instruction& in) {
  if (in.parts.size() > 3 && in.parts[3] == "tensor") return tensor_copy(m, in);
  if (in.has("commit_group") || in.has("wait_group") || in.has("wait_group.read")) return;  // bulk groups: stores only
  return plain_copy(m, in);
}

}  // namespace arbiter::emu::ptx
