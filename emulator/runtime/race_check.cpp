#include "race_check.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace arbiter::emu::race {
namespace {

// The cluster-wide number of a thread, + 1 (0 means "nobody" in a RaceCell).
uint16_t number_of(const ThreadState& t) {
  return static_cast<uint16_t>(t.block->rank * t.block->threads.size() + t.linear + 1);
}

const ThreadState& thread_numbered(const Cluster& c, uint16_t number) {
  const size_t index = number - 1u, per_block = c.blocks.front()->threads.size();
  return c.blocks[index / per_block]->threads[index % per_block];
}

// Is an access by thread `number` stamped `time` ordered before the current one of `t`?
bool ordered(const ThreadState& t, uint16_t number, uint32_t time) {
  if (number == 0 || number == number_of(t) || time < t.ordered_before) return true;
  const ThreadState& other = thread_numbered(*t.block->cluster, number);
  return other.block == t.block && other.warp == t.warp && time < t.warp_ordered_before;
}

// The function and source line of the instruction at `pc` (addr2line on the module that holds
// it; the function name alone if that fails). Only ever run for a report.
std::string code_at(const void* pc) {
  Dl_info info{};
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) return "";
  const uintptr_t offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  std::string file = info.dli_fname;
  if (file.find('\'') == std::string::npos) {
    char command[4096];
    std::snprintf(command, sizeof command, "addr2line -f -C -e '%s' 0x%zx 2>/dev/null", file.c_str(),
                  static_cast<size_t>(offset));
    if (FILE* p = ::popen(command, "r")) {
      char function[1024] = {}, line[2048] = {};
      const bool got = std::fgets(function, sizeof function, p) && std::fgets(line, sizeof line, p);
      ::pclose(p);
      std::string f = function, l = line;
      while (!f.empty() && f.back() == '\n') f.pop_back();
      while (!l.empty() && l.back() == '\n') l.pop_back();
      if (got && l.rfind("??", 0) != 0) return l + " (" + f + ")";
    }
  }
  return info.dli_sname ? info.dli_sname : file;
}

// Records the launch's first fault without unwinding: the instrumented code may sit in a
// noexcept function. The thread stops at its next meeting with the emulator.
void report(ThreadState& t, const std::string& what) {
  Launch& launch = *t.block->cluster->launch;
  std::lock_guard<std::mutex> lock(launch.fault_mutex);
  if (launch.status == kSuccess) {
    launch.status = kErrorLaunchFailure;
    launch.fault = what + " [schedule " + schedule_name(launch.schedule) + "]";
  }
}

// The cells of [address, address + size) if they lie in a shared window of the thread's
// cluster, else nullptr. `part` and `offset` say where, for reports.
RaceCell* cells_for(ThreadState& t, const unsigned char* address, size_t size, Block*& owner, const char*& part,
                    uint32_t& offset) {
  Cluster& c = *t.block->cluster;
  auto in = [&](Block& b) -> RaceCell* {
    SharedWindow& w = b.window;
    if (w.dynamic_memory && address >= w.dynamic_memory && address + size <= w.dynamic_memory + w.dynamic_bytes) {
      if (b.race_dynamic.empty()) b.race_dynamic.resize(w.dynamic_bytes);
      owner = &b;
      part = "dynamic (extern __shared__)";
      offset = static_cast<uint32_t>(address - w.dynamic_memory);
      return &b.race_dynamic[offset];
    }
    if (w.static_memory && address >= w.static_memory && address + size <= w.static_memory + w.static_capacity) {
      offset = static_cast<uint32_t>(address - w.static_memory);
      if (b.race_static.size() < offset + size) b.race_static.resize(std::max<size_t>(offset + size, 2 * b.race_static.size()));
      owner = &b;
      part = "static (__shared__ variables)";
      return &b.race_static[offset];
    }
    return nullptr;
  };
  if (RaceCell* cells = in(*t.block)) return cells;
  if (c.blocks.size() > 1)
    for (auto& b : c.blocks)
      if (b.get() != t.block && !b->gone)
        if (RaceCell* cells = in(*b)) return cells;
  return nullptr;
}

void access(const void* pointer, size_t size, bool write, bool atomic, const void* pc) {
  ThreadState* t = current_thread();
  if (t == nullptr || !enabled()) return;
  const Cluster& cluster = *t->block->cluster;
  const auto* bytes = static_cast<const unsigned char*>(pointer);
  if (bytes < cluster.shared_low || bytes >= cluster.shared_high) return;  // not shared memory
  Block* owner = nullptr;
  const char* part = "";
  uint32_t offset = 0;
  RaceCell* cells = cells_for(*t, static_cast<const unsigned char*>(pointer), size, owner, part, offset);
  if (cells == nullptr) return;
  Cluster& c = *t->block->cluster;
  const uint16_t me = number_of(*t);
  const uint32_t time = c.race_clock;
  auto conflict = [&](uint16_t other, bool other_wrote, size_t byte) {
    std::ostringstream s;
    s << "a race on shared memory: " << thread_name(*t) << (write ? " writes " : " reads ") << size
      << " bytes at offset " << offset << " of block rank " << owner->rank << "'s " << part << " memory, which "
      << thread_name(thread_numbered(c, other)) << (other_wrote ? " wrote" : " read") << " (byte " << offset + byte
      << ") with no barrier or warp synchronisation between them";
    const std::string code = code_at(pc);
    if (!code.empty()) s << "; this access at " << code;
    s << "; the two threads last met the emulator at " << where_text(t->where) << " and "
      << where_text(thread_numbered(c, other).where);
    report(*t, s.str());
  };
  for (size_t i = 0; i < size; ++i) {
    RaceCell& cell = cells[i];
    const bool both_atomic_write = atomic && cell.atomic_write;
    if (!both_atomic_write && !ordered(*t, cell.writer, cell.write_time)) return conflict(cell.writer, true, i);
    if (write) {
      if (!(atomic && cell.atomic_read) && !ordered(*t, cell.reader, cell.read_time)) return conflict(cell.reader, false, i);
      if (!(atomic && cell.atomic_read) && !ordered(*t, cell.other_reader, cell.other_read_time))
        return conflict(cell.other_reader, false, i);
      cell.writer = me;
      cell.write_time = time;
      cell.atomic_write = atomic;
      cell.reader = cell.other_reader = 0;
    } else {
      // Keep a concurrent earlier reader: a later write must be ordered after both.
      if (cell.reader != me && !ordered(*t, cell.reader, cell.read_time)) {
        cell.other_reader = cell.reader;
        cell.other_read_time = cell.read_time;
      }
      cell.reader = me;
      cell.read_time = time;
      cell.atomic_read = atomic;
    }
  }
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ARBITER_EMU_RACE_CHECK");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

void barrier_passed(Cluster& cluster, const std::vector<ThreadState*>& passed) {
  const uint32_t now = ++cluster.race_clock;
  for (ThreadState* t : passed) t->ordered_before = t->warp_ordered_before = now;
}

void warp_synchronised(Cluster& cluster, ThreadState* const* members, size_t count) {
  const uint32_t now = ++cluster.race_clock;
  for (size_t i = 0; i < count; ++i) members[i]->warp_ordered_before = now;
}

uint32_t now(Cluster& cluster) { return ++cluster.race_clock; }

void acquired(ThreadState& thread, uint32_t completed_at) {
  thread.ordered_before = std::max(thread.ordered_before, completed_at);
  thread.warp_ordered_before = std::max(thread.warp_ordered_before, completed_at);
}

}  // namespace arbiter::emu::race

// ---- the instrumentation's entry points (GCC's -fsanitize=thread calls) ----------------------------
// Only emulated device code is compiled with it (emucc); these never reach libtsan.

#define ARBITER_TSAN extern "C" __attribute__((visibility("default")))

namespace {
void access_here(const void* p, size_t size, bool write, bool atomic, const void* pc) {
  arbiter::emu::race::access(p, size, write, atomic, pc);
}
}  // namespace

ARBITER_TSAN void __tsan_init() {}
ARBITER_TSAN void __tsan_func_entry(void*) {}
ARBITER_TSAN void __tsan_func_exit() {}
ARBITER_TSAN void __tsan_vptr_update(void**, void*) {}
ARBITER_TSAN void __tsan_vptr_read(void**) {}

#define ARBITER_TSAN_ACCESS(size)                                                                               \
  ARBITER_TSAN void __tsan_read##size(void* p) { access_here(p, size, false, false, __builtin_return_address(0)); } \
  ARBITER_TSAN void __tsan_write##size(void* p) { access_here(p, size, true, false, __builtin_return_address(0)); } \
  ARBITER_TSAN void __tsan_unaligned_read##size(void* p) {                                                      \
    access_here(p, size, false, false, __builtin_return_address(0));                                            \
  }                                                                                                             \
  ARBITER_TSAN void __tsan_unaligned_write##size(void* p) {                                                     \
    access_here(p, size, true, false, __builtin_return_address(0));                                             \
  }                                                                                                             \
  ARBITER_TSAN void __tsan_volatile_read##size(void* p) {                                                       \
    access_here(p, size, false, false, __builtin_return_address(0));                                            \
  }                                                                                                             \
  ARBITER_TSAN void __tsan_volatile_write##size(void* p) {                                                      \
    access_here(p, size, true, false, __builtin_return_address(0));                                             \
  }
ARBITER_TSAN_ACCESS(1)
ARBITER_TSAN_ACCESS(2)
ARBITER_TSAN_ACCESS(4)
ARBITER_TSAN_ACCESS(8)
ARBITER_TSAN_ACCESS(16)

ARBITER_TSAN void __tsan_read_range(void* p, unsigned long size) {
  access_here(p, size, false, false, __builtin_return_address(0));
}
ARBITER_TSAN void __tsan_write_range(void* p, unsigned long size) {
  access_here(p, size, true, false, __builtin_return_address(0));
}

// Atomics: done for real (sequentially consistent, whatever order was asked: stronger is
// still correct), and recorded as atomic accesses (two atomics never race).
#define ARBITER_TSAN_ATOMIC(bits, type)                                                                              \
  ARBITER_TSAN type __tsan_atomic##bits##_load(const volatile type* a, int) {                                        \
    access_here(const_cast<type*>(a), sizeof(type), false, true, __builtin_return_address(0));                       \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                                     \
  }                                                                                                                  \
  ARBITER_TSAN void __tsan_atomic##bits##_store(volatile type* a, type v, int) {                                     \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                        \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_exchange(volatile type* a, type v, int) {                                  \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                              \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_fetch_add(volatile type* a, type v, int) {                                 \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_fetch_sub(volatile type* a, type v, int) {                                 \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_fetch_and(volatile type* a, type v, int) {                                 \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_fetch_or(volatile type* a, type v, int) {                                  \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                                \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_fetch_xor(volatile type* a, type v, int) {                                 \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_fetch_nand(volatile type* a, type v, int) {                                \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                              \
  }                                                                                                                  \
  ARBITER_TSAN int __tsan_atomic##bits##_compare_exchange_strong(volatile type* a, type* c, type v, int, int) {      \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                          \
  }                                                                                                                  \
  ARBITER_TSAN int __tsan_atomic##bits##_compare_exchange_weak(volatile type* a, type* c, type v, int, int) {        \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                          \
  }                                                                                                                  \
  ARBITER_TSAN type __tsan_atomic##bits##_compare_exchange_val(volatile type* a, type c, type v, int, int) {         \
    access_here(const_cast<type*>(a), sizeof(type), true, true, __builtin_return_address(0));                        \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                                \
    return c;                                                                                                        \
  }
ARBITER_TSAN_ATOMIC(8, char)
ARBITER_TSAN_ATOMIC(16, short)
ARBITER_TSAN_ATOMIC(32, int)
ARBITER_TSAN_ATOMIC(64, long)

ARBITER_TSAN void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
ARBITER_TSAN void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
