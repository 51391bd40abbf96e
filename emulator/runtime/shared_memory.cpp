#include "shared_memory.hpp"
#include "fork_safe_mutex.hpp"

#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace arbiter::emu {
namespace {

constexpr uint32_t kStaticLimit = 48 * 1024;    // static __shared__ per block
constexpr uint32_t kBlockLimit = 227 * 1024;    // all shared memory per block on sm_90

// A 1024-aligned allocation of offset + bytes; the first `offset` bytes are not the window's
// (poisoned under ASan, so that an underflow is caught).
void* allocate(size_t bytes, size_t offset) {
  void* p = nullptr;
  if (posix_memalign(&p, 1024, bytes + offset) != 0) throw std::bad_alloc();
#if defined(__SANITIZE_ADDRESS__)
  if (offset > 0) ASAN_POISON_MEMORY_REGION(p, offset);
#endif
  return p;
}

void fill_garbage(unsigned char* p, size_t bytes, uint64_t seed) {
  std::mt19937_64 random(seed);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t word = random();
    std::memcpy(p + i, &word, 8);
  }
  for (; i < bytes; ++i) p[i] = static_cast<unsigned char>(random());
}

std::string window_text(const Block& b) {
  std::ostringstream s;
  s << "the block's shared memory (dynamic [" << b.window.dynamic_offset << ", "
    << b.window.dynamic_offset + b.window.dynamic_bytes << ") and static [" << b.window.static_offset << ", "
    << b.window.static_offset + b.cluster->launch->static_used.load() << "))";
  return s.str();
}

}  // namespace

void setup_shared_window(Block& b, Launch& launch) {
  SharedWindow& w = b.window;
  const uint32_t dynamic = static_cast<uint32_t>(launch.config.dynamic_shared);
  w.dynamic_offset = kDynamicSharedOffset;
  w.dynamic_bytes = dynamic;
  w.static_offset = (kDynamicSharedOffset + dynamic + 1023u) / 1024u * 1024u + 1024u;
  w.static_capacity = std::min(kStaticLimit, kBlockLimit > dynamic ? kBlockLimit - dynamic : 0u);
  // The dynamic part sits 128 bytes into a 1024-aligned allocation, so that its host address
  // has the same alignment as its shared address; the static part is 1024-aligned.
  w.dynamic_allocation.reset(allocate(std::max<uint32_t>(dynamic, 1), kDynamicSharedOffset));
  w.static_allocation.reset(allocate(std::max<uint32_t>(w.static_capacity, 1), 0));
  unsigned char* d = static_cast<unsigned char*>(w.dynamic_allocation.get()) + kDynamicSharedOffset;
  unsigned char* s = static_cast<unsigned char*>(w.static_allocation.get());
  w.dynamic_memory = d;
  w.static_memory = s;
  const uint64_t seed = (reinterpret_cast<uintptr_t>(launch.kernel) >> 4) ^ (launch.schedule.seed << 20) ^
                        (static_cast<uint64_t>(b.index.x) << 1) ^ (static_cast<uint64_t>(b.index.y) << 33);
  fill_garbage(d, dynamic, seed);
  fill_garbage(s, w.static_capacity, ~seed);
}

unsigned char* shared_bytes(uint32_t address, uint32_t bytes, const char* what, Site where) {
  uint32_t offset = 0;
  Block& b = cluster_target(address, offset, where);
  const SharedWindow& w = b.window;
  if (offset >= w.dynamic_offset && offset + uint64_t(bytes) <= uint64_t(w.dynamic_offset) + w.dynamic_bytes)
    return w.dynamic_memory + (offset - w.dynamic_offset);
  const uint32_t static_used = b.cluster->launch->static_used.load(std::memory_order_relaxed);
  if (offset >= w.static_offset && offset + uint64_t(bytes) <= uint64_t(w.static_offset) + static_used)
    return w.static_memory + (offset - w.static_offset);
  std::ostringstream s;
  s << what << ": shared address 0x" << std::hex << address << std::dec << " (" << bytes << " bytes) is outside "
    << window_text(b);
  fault(kErrorIllegalAddress, s.str(), where);
}

Block& cluster_target(uint32_t address, uint32_t& offset, Site where) {
  ThreadState& t = this_thread(where);
  const uint32_t rank_field = address >> kClusterWindowShift;
  offset = address & ((1u << kClusterWindowShift) - 1);
  if (rank_field == 0) return *t.block;
  Cluster& c = *t.block->cluster;
  const uint32_t rank = rank_field - 1;
  if (rank >= c.blocks.size())
    fault(kErrorIllegalAddress, "a shared::cluster address names block rank " + std::to_string(rank) +
                                    " of a cluster of " + std::to_string(c.blocks.size()),
          where);
  Block& target = *c.blocks[rank];
  if (target.gone)
    fault(kErrorIllegalAddress, "distributed shared memory of block rank " + std::to_string(rank) +
                                    ", which has exited (its shared memory no longer exists)",
          where);
  return target;
}

// ---- the device API ------------------------------------------------------------------------------

namespace {

// Namespace-scope __shared__ variables are initialised at load time, outside any block: they
// get a placeholder and make every launch of the module fail (shared_variable_misuse).
ForkSafeMutex misuse_mutex{fork_rank::misuse};
std::string misuse;

}  // namespace

const std::string& shared_variable_misuse() { return misuse; }

void* shared_variable(const void* tag, size_t bytes, size_t align, Where where) {
  ThreadState* current = current_thread();
  if (current == nullptr) {
    std::lock_guard<ForkSafeMutex> lock(misuse_mutex);
    if (misuse.empty())
      misuse = where_text(where) + ": a __shared__ variable at namespace scope (the emulator supports them in functions)";
    return new unsigned char[bytes + align]();  // never used for real: every launch fails
  }
  Block& b = *current->block;
  Launch& launch = *b.cluster->launch;
  uint32_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(launch.layout_mutex);
    auto it = launch.static_layout.find(tag);
    if (it != launch.static_layout.end()) {
      offset = it->second;
    } else {
      const uint64_t a = std::max<uint64_t>(align, 1);
      const uint64_t at = (launch.static_used.load() + a - 1) / a * a;
      if (at + bytes > b.window.static_capacity)
        fault(kErrorLaunchOutOfResources,
              "static __shared__ variables need more than " + std::to_string(b.window.static_capacity) + " bytes",
              where);
      offset = static_cast<uint32_t>(at);
      launch.static_used = static_cast<uint32_t>(at + bytes);
      launch.static_layout.emplace(tag, offset);
    }
  }
  return b.window.static_memory + offset;
}

void* dynamic_shared(size_t align, Where where) {
  ThreadState& t = this_thread(where);
  if (kDynamicSharedOffset % align != 0)
    fault(kErrorMisalignedAddress,
          "extern __shared__ asks for " + std::to_string(align) + "-byte alignment; the emulator places dynamic shared "
          "memory at offset " + std::to_string(kDynamicSharedOffset) + " (CUDA guarantees 16 bytes)",
          where);
  return t.block->window.dynamic_memory;
}

uint32_t generic_to_shared(const void* pointer, Where where) {
  ThreadState& t = this_thread(where);
  const SharedWindow& w = t.block->window;
  const unsigned char* p = static_cast<const unsigned char*>(pointer);
  if (p >= w.dynamic_memory && p <= w.dynamic_memory + w.dynamic_bytes)
    return w.dynamic_offset + static_cast<uint32_t>(p - w.dynamic_memory);
  if (p >= w.static_memory && p <= w.static_memory + w.static_capacity)
    return w.static_offset + static_cast<uint32_t>(p - w.static_memory);
  for (const auto& other : t.block->cluster->blocks)
    if (other.get() != t.block && p >= other->window.dynamic_memory &&
        p < other->window.dynamic_memory + other->window.dynamic_bytes)
      fault(kErrorIllegalAddress, "__cvta_generic_to_shared of another block's shared memory (use mapa)", where);
  fault(kErrorIllegalAddress, "__cvta_generic_to_shared of an address that is not in shared memory", where);
}

void* shared_to_generic(uint32_t address, Where where) { return shared_bytes(address, 0, "cvta.shared", where); }

bool is_shared(const void* pointer) {
  ThreadState* t = current_thread();
  if (t == nullptr) return false;
  const unsigned char* p = static_cast<const unsigned char*>(pointer);
  for (const auto& b : t->block->cluster->blocks) {
    const SharedWindow& w = b->window;
    if ((p >= w.dynamic_memory && p < w.dynamic_memory + w.dynamic_bytes) ||
        (p >= w.static_memory && p < w.static_memory + w.static_capacity))
      return true;
  }
  return false;
}

void* map_shared_rank(const void* pointer, unsigned rank, Where where) {
  ThreadState& t = this_thread(where);
  Cluster& c = *t.block->cluster;
  if (rank >= c.blocks.size())
    fault(kErrorIllegalAddress,
          "map_shared_rank to rank " + std::to_string(rank) + " of a cluster of " + std::to_string(c.blocks.size()), where);
  const uint32_t address = generic_to_shared(pointer, where);
  return shared_bytes(((rank + 1) << kClusterWindowShift) | address, 0, "map_shared_rank", where);
}

unsigned cluster_block_rank() { return this_thread(Where::current()).block->rank; }

dim3 cluster_dims() { return this_thread(Where::current()).block->cluster->launch->cluster_dims; }

dim3 cluster_block_index() {
  const ThreadState& t = this_thread(Where::current());
  const dim3 d = t.block->cluster->launch->cluster_dims;
  return dim3(t.block->index.x % d.x, t.block->index.y % d.y, t.block->index.z % d.z);
}

}  // namespace arbiter::emu
