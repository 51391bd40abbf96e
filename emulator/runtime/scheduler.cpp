// Running a launch: clusters one after another, each on the calling host thread with a fiber
// per CUDA thread; the schedule decides who runs next; deadlocks, livelocks and time-outs
// become faults with a report of every thread that waits.
#include "engine.hpp"
#include "ptx/async_state.hpp"  // Block owns the asynchronous state
#include "race_check.hpp"
#include "shared_memory.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

namespace arbiter_emulated_cuda {
// The built-in variables (device_api.hpp), rewritten before every switch to a thread.
thread_local uint3 threadIdx ARBITER_EMU_TLS;
thread_local uint3 blockIdx ARBITER_EMU_TLS;
thread_local dim3 blockDim ARBITER_EMU_TLS;
thread_local dim3 gridDim ARBITER_EMU_TLS;
}  // namespace arbiter_emulated_cuda

namespace arbiter::emu {
namespace {

// Initial-exec, like the built-ins: every access of emulated code asks for it (race check).
thread_local ThreadState* running_thread __attribute__((tls_model("initial-exec"))) = nullptr;

// A probe in progress on this host thread (kernel_entry reports there and stops).
struct ProbeState {
  bool reached = false;
  KernelAttributes declared;
};
thread_local ProbeState* running_probe = nullptr;

void enter(ThreadState& t) {
  running_thread = &t;
  const Launch& launch = *t.block->cluster->launch;
  arbiter_emulated_cuda::threadIdx = t.index;
  arbiter_emulated_cuda::blockIdx = t.block->index;
  arbiter_emulated_cuda::blockDim = launch.config.block;
  arbiter_emulated_cuda::gridDim = launch.config.grid;
}

Launch& launch_of(const ThreadState& t) { return *t.block->cluster->launch; }

bool aborted(const ThreadState& t) { return launch_of(t).status != kSuccess; }

double launch_time_limit() {
  if (const char* s = std::getenv("ARBITER_EMU_LAUNCH_SECONDS")) return std::max(1.0, std::atof(s));
  return 300.0;
}

}  // namespace

std::string schedule_name(const Schedule& schedule) {
  const uint64_t seed = schedule.seed;
  switch (schedule.kind) {
    case ScheduleKind::lockstep: return "lockstep";
    case ScheduleKind::reverse: return "reverse";
    case ScheduleKind::warp_ahead: return "warp-ahead (seed " + std::to_string(seed) + ")";
    default: return "random (seed " + std::to_string(seed) + ")";
  }
}

ThreadState* current_thread() { return running_thread; }

std::string where_text(Site where) {
  if (where.file == nullptr || *where.file == '\0') return "the kernel's start";
  return std::string(where.file) + ":" + std::to_string(where.line);
}

std::string thread_name(const ThreadState& t) {
  std::ostringstream s;
  s << "thread (" << t.index.x << "," << t.index.y << "," << t.index.z << ") of block (" << t.block->index.x << ","
    << t.block->index.y << "," << t.block->index.z << ")";
  return s.str();
}

ThreadState& this_thread(Site where) {
  if (running_thread == nullptr) {
    if (running_probe != nullptr) throw LaunchAborted{};  // a probe stops at its first emulator call
    std::fprintf(stderr, "arbiter emulator: a device function was called outside a kernel (%s)\n",
                 where_text(where).c_str());
    std::abort();
  }
  return *running_thread;
}

void fault(Status status, const std::string& what, Site where) {
  ThreadState* t = running_thread;
  if (t != nullptr) {
    Launch& launch = launch_of(*t);
    std::lock_guard<std::mutex> lock(launch.fault_mutex);
    if (launch.status == kSuccess) {
      launch.status = status;
      launch.fault = where_text(where) + ": " + what + " [" + thread_name(*t) + ", schedule " + schedule_name(launch.schedule) + "]";
    }
  }
  throw LaunchAborted{};
}

void progress(Block& block) { ++block.cluster->progress; }

void block(const char* waiting_for, Site where) {
  ThreadState& t = this_thread(where);
  t.run = ThreadState::Run::blocked;
  t.waiting = waiting_for;
  t.wait_detail = {};
  t.where = where;
  Fiber::yield();
  t.waiting = nullptr;
  if (aborted(t)) throw LaunchAborted{};
}

void wake(ThreadState* thread) { thread->run = ThreadState::Run::ready; }

void spin(const char* waiting_for, Site where, WaitDescription detail) {
  ThreadState& t = this_thread(where);
  t.spun = true;
  t.waiting = waiting_for;
  t.wait_detail = detail;
  t.where = where;
  Fiber::yield();
  if (aborted(t)) throw LaunchAborted{};
}

unsigned scope_index(const ThreadState& t, int scope) { return scope == 0 ? t.lane : t.linear % 128; }

// ---- collectives -------------------------------------------------------------------------------

void meet(int scope, const std::bitset<128>& members, const char* kind, void* slot,
          void (*combine)(void** slots, const std::bitset<128>& members, void* context), void* context, Site where) {
  ThreadState& t = this_thread(where);
  Block& b = *t.block;
  const unsigned size = scope == 0 ? 32 : 128;
  const unsigned group = t.linear / size;
  const unsigned me = scope_index(t, scope);
  const char* scope_name = scope == 0 ? "warp" : "warpgroup";
  if (!members.test(me))
    fault(kErrorLaunchFailure, std::string(kind) + ": the calling thread (" + std::to_string(me) + " of its " +
                                   scope_name + ") is not in the mask",
          where);
  for (unsigned m = 0; m < size; ++m) {
    if (!members.test(m)) continue;
    const size_t linear = static_cast<size_t>(group) * size + m;
    if (linear >= b.threads.size())
      fault(kErrorLaunchFailure, std::string(kind) + ": the mask names thread " + std::to_string(m) + " of " +
                                     scope_name + " " + std::to_string(group) + ", which does not exist (a block of " +
                                     std::to_string(b.threads.size()) + " threads)",
            where);
    if (b.threads[linear].run == ThreadState::Run::exited)
      fault(kErrorLaunchFailure, std::string(kind) + ": the mask names thread " + std::to_string(m) + " of " +
                                     scope_name + " " + std::to_string(group) + ", which has exited",
            where);
  }
  std::vector<Collective>& open = scope == 0 ? b.warp_collectives : b.warpgroup_collectives;
  if (open.size() <= group) open.resize(group + 1);
  Collective& c = open[group];
  if (c.kind == nullptr) {
    c.kind = kind;
    c.members = members;
    c.arrived.reset();
    c.where = where;
    c.combine = combine;
    c.context = context;
  } else if (std::strcmp(c.kind, kind) != 0 || c.members != members) {
    fault(kErrorLaunchFailure, "the threads of " + std::string(scope_name) + " " + std::to_string(group) +
                                   " meet at different collectives: " + c.kind + " (mask " +
                                   c.members.to_string().substr(128 - size) + ") at " + where_text(c.where) + " and " +
                                   kind + " (mask " + members.to_string().substr(128 - size) + ")",
          where);
  }
  c.arrived.set(me);
  t.collective_slot = slot;
  progress(b);
  if (c.arrived != c.members) {
    block(kind, where);
    return;
  }
  // The last to arrive: the meeting closes before it is combined (combine may fault).
  void* slots[128] = {};
  ThreadState* met[128];
  size_t count = 0;
  for (unsigned m = 0; m < size; ++m)
    if (members.test(m)) {
      ThreadState& member = b.threads[static_cast<size_t>(group) * size + m];
      slots[m] = member.collective_slot;
      met[count++] = &member;
    }
  const auto finish = c.combine;
  void* const finish_context = c.context;
  c.kind = nullptr;
  finish(slots, members, finish_context);
  race::warp_synchronised(*b.cluster, met, count);
  for (size_t i = 0; i < count; ++i)
    if (met[i] != &t) wake(met[i]);
}

// ---- __syncthreads and cluster.sync ----------------------------------------------------------------

namespace {

// One line per group of threads waiting at the same place: "threads 0-31 at file:line".
std::string arrivals_by_site(const std::vector<ThreadState*>& arrived) {
  std::map<std::string, std::vector<unsigned>> sites;
  for (const ThreadState* t : arrived) sites[where_text(t->where)].push_back(t->linear);
  std::string out;
  for (auto& [site, threads] : sites) {
    std::sort(threads.begin(), threads.end());
    out += (out.empty() ? "" : "; ") + std::string("threads ") + std::to_string(threads.front()) + "-" +
           std::to_string(threads.back()) + " (" + std::to_string(threads.size()) + ") at " + site;
  }
  return out;
}

bool one_site(const std::vector<ThreadState*>& arrived) {
  for (const ThreadState* t : arrived)
    if (t->where.line != arrived.front()->where.line || std::string_view(t->where.file) != arrived.front()->where.file)
      return false;
  return true;
}

}  // namespace

namespace {

// __syncthreads (and its _count form): every thread of the block arrives, at one place.
int block_barrier(Site where, int predicate, const char* name) {
  ThreadState& t = this_thread(where);
  Block& b = *t.block;
  if (b.exited > 0)
    fault(kErrorLaunchFailure, std::string(name) + " after " + std::to_string(b.exited) + " of the block's " +
                                   std::to_string(b.threads.size()) +
                                   " threads exited (undefined in CUDA: the barrier waits for every thread)",
          where);
  int result = 0;
  t.collective_slot = &result;
  t.where = where;
  b.barrier_arrived.push_back(&t);
  b.barrier_count += predicate != 0;
  progress(b);
  if (b.barrier_arrived.size() < b.threads.size()) {
    block(name, where);
    return result;
  }
  if (!one_site(b.barrier_arrived))
    fault(kErrorLaunchFailure, std::string("divergent ") + name + ": " + arrivals_by_site(b.barrier_arrived), where);
  race::barrier_passed(*b.cluster, b.barrier_arrived);
  for (ThreadState* w : b.barrier_arrived) {
    *static_cast<int*>(w->collective_slot) = b.barrier_count;
    if (w != &t) wake(w);
  }
  b.barrier_arrived.clear();
  b.barrier_count = 0;
  return result;
}

}  // namespace

void syncthreads(Where where) { block_barrier(where, 0, "__syncthreads"); }

int syncthreads_count(int predicate, Where where) { return block_barrier(where, predicate, "__syncthreads_count"); }

void cluster_sync(Where where) {
  ThreadState& t = this_thread(where);
  Cluster& c = *t.block->cluster;
  size_t total = 0;
  for (const auto& b : c.blocks) {
    if (b->exited > 0)
      fault(kErrorLaunchFailure, "cluster.sync() after " + std::to_string(b->exited) + " threads of block rank " +
                                     std::to_string(b->rank) + " exited (the barrier waits for every thread of the cluster)",
            where);
    total += b->threads.size();
  }
  t.where = where;
  c.barrier_arrived.push_back(&t);
  progress(*t.block);
  if (c.barrier_arrived.size() < total) {
    block("cluster.sync()", where);
    return;
  }
  if (!one_site(c.barrier_arrived))
    fault(kErrorLaunchFailure, "divergent cluster.sync(): " + arrivals_by_site(c.barrier_arrived), where);
  race::barrier_passed(c, c.barrier_arrived);
  for (ThreadState* w : c.barrier_arrived)
    if (w != &t) wake(w);
  c.barrier_arrived.clear();
}

// ---- the scheduler ----------------------------------------------------------------------------------

namespace {

// A thread has ended: nobody may still wait for it.
void thread_exited(ThreadState& t) {
  Block& b = *t.block;
  t.run = ThreadState::Run::exited;
  ++b.exited;
  ++b.cluster->progress;
  Launch& launch = launch_of(t);
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(launch.fault_mutex);
    if (launch.status == kSuccess) {
      launch.status = kErrorLaunchFailure;
      launch.fault = what + " [schedule " + schedule_name(launch.schedule) + "]";
    }
  };
  if (!b.barrier_arrived.empty())
    fail(thread_name(t) + " exited while " + std::to_string(b.barrier_arrived.size()) +
         " threads wait for it at __syncthreads: " + arrivals_by_site(b.barrier_arrived));
  if (!b.cluster->barrier_arrived.empty())
    fail(thread_name(t) + " exited while threads wait for it at cluster.sync(): " +
         arrivals_by_site(b.cluster->barrier_arrived));
  for (int scope = 0; scope < 2; ++scope) {
    const std::vector<Collective>& open = scope == 0 ? b.warp_collectives : b.warpgroup_collectives;
    const unsigned group = t.linear / (scope == 0 ? 32 : 128);
    if (group >= open.size() || open[group].kind == nullptr) continue;
    const Collective& c = open[group];
    if (c.members.test(scope_index(t, scope)) && !c.arrived.test(scope_index(t, scope)))
      fail(thread_name(t) + " exited while others wait for it at " + c.kind + " (" + where_text(c.where) + ")");
  }
  if (!t.copies_uncommitted.empty() || !t.copy_groups.empty())
    fail(thread_name(t) + " exited with cp.async copies in flight (no cp.async.wait_group for them)");
  if (b.exited == b.threads.size()) b.gone = true;
}

// What a thread waits for, and where, for deadlock reports.
std::string waiting_text(const ThreadState& t) {
  if (t.run == ThreadState::Run::exited) return "exited";
  if (t.waiting == nullptr) return "running";
  std::string text = t.waiting;
  if (t.wait_detail.describe) text += " " + t.wait_detail.describe(t.wait_detail.object, t.wait_detail.value);
  return text + " at " + where_text(t.where);
}

std::string waiting_report(const Cluster& c) {
  // Consecutive threads waiting for the same thing at the same place, one line each.
  std::string out;
  int lines = 0;
  for (const auto& b : c.blocks) {
    size_t i = 0;
    while (i < b->threads.size() && lines < 24) {
      const std::string what = waiting_text(b->threads[i]);
      size_t j = i + 1;
      while (j < b->threads.size() && waiting_text(b->threads[j]) == what) ++j;
      out += "\n  block rank " + std::to_string(b->rank) + " threads " + std::to_string(i) + "-" + std::to_string(j - 1) +
             ": " + what;
      ++lines;
      i = j;
    }
  }
  return out;
}

// After a fault: every thread that has not finished is resumed once, and ends by unwinding
// from the wait it was in (block() and spin() throw LaunchAborted once the launch has
// failed), so that no fiber is ever destroyed while it is suspended.
void unwind_all(Cluster& c) {
  for (auto& b : c.blocks)
    for (ThreadState& t : b->threads)
      if (t.fiber && !t.fiber->finished()) {
        enter(t);
        t.fiber->resume();
        running_thread = nullptr;
      }
}

void fail_cluster(Launch& launch, Status status, const std::string& what) {
  std::lock_guard<std::mutex> lock(launch.fault_mutex);
  if (launch.status == kSuccess) {
    launch.status = status;
    launch.fault = what + " [schedule " + schedule_name(launch.schedule) + "]";
  }
}

void run_cluster(Launch& launch, uint3 cluster_index) {
  auto cluster = std::make_unique<Cluster>();
  Cluster& c = *cluster;
  c.launch = &launch;
  c.index = cluster_index;
  const dim3 cd = launch.cluster_dims, bd = launch.config.block;
  const unsigned per_block = bd.x * bd.y * bd.z;
  const size_t stack = default_fiber_stack_bytes();
  for (unsigned z = 0; z < cd.z; ++z)
    for (unsigned y = 0; y < cd.y; ++y)
      for (unsigned x = 0; x < cd.x; ++x) {
        auto b = std::make_unique<Block>();
        b->cluster = &c;
        b->rank = static_cast<unsigned>(c.blocks.size());
        b->index = uint3{cluster_index.x * cd.x + x, cluster_index.y * cd.y + y, cluster_index.z * cd.z + z};
        setup_shared_window(*b, launch);
        b->threads.resize(per_block);
        for (const unsigned char* p : {b->window.dynamic_memory, b->window.static_memory}) {
          if (c.shared_low == nullptr || p < c.shared_low) c.shared_low = p;
        }
        for (const unsigned char* p : {b->window.dynamic_memory + b->window.dynamic_bytes,
                                       b->window.static_memory + b->window.static_capacity}) {
          if (p > c.shared_high) c.shared_high = p;
        }
        c.blocks.push_back(std::move(b));
      }
  // Every thread's fiber; they start at their first turn.
  std::vector<ThreadState*> order;
  for (auto& b : c.blocks) {
    for (unsigned i = 0; i < per_block; ++i) {
      ThreadState& t = b->threads[i];
      t.block = b.get();
      t.linear = i;
      t.index = uint3{i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
      t.lane = i % 32;
      t.warp = i / 32;
      ThreadState* tp = &t;
      t.fiber = std::make_unique<Fiber>(
          [tp, &launch] {
            if (launch.status != kSuccess) return;  // the launch failed before this thread began
            try {
              launch.run(launch.kernel, launch.arguments);
            } catch (const LaunchAborted&) {
            } catch (const std::exception& e) {
              fail_cluster(launch, kErrorLaunchFailure, thread_name(*tp) + ": " + e.what());
            }
          },
          stack);
      order.push_back(&t);
    }
  }
  // The order of a round, per the schedule.
  std::vector<size_t> permutation(order.size());
  std::iota(permutation.begin(), permutation.end(), 0);
  const Schedule& schedule = launch.schedule;
  if (schedule.kind == ScheduleKind::reverse) std::reverse(permutation.begin(), permutation.end());
  // warp-ahead: one warp (of the cluster's first block, chosen by the seed) runs as far as it
  // can before the others' every turn, up to the next point where it must wait for them
  // (a barrier, an mbarrier, a transaction): a race between its writes and the other warps'
  // reads of the step before shows there.
  std::vector<size_t> ahead_warp;
  if (schedule.kind == ScheduleKind::warp_ahead) {
    const size_t warps = (order.size() + 31) / 32;
    const size_t ahead = static_cast<size_t>(schedule.seed % std::min<size_t>(warps, (per_block + 31) / 32));
    for (size_t i = 0; i < order.size(); ++i)
      if (i / 32 == ahead) ahead_warp.push_back(i);
  }
  std::mt19937_64 random(schedule.seed * 0x9e3779b97f4a7c15ull + cluster_index.x + 1);

  // One turn of a thread: it runs to its next wait. False when the launch has failed.
  bool any_ready = false, all_spun = true;
  auto turn = [&](ThreadState& t) {
    if (t.run != ThreadState::Run::ready) return true;
    any_ready = true;
    t.spun = false;
    enter(t);
    const bool alive = t.fiber->resume();
    running_thread = nullptr;
    if (!alive) thread_exited(t);
    else all_spun &= t.spun;
    return launch.status == kSuccess;
  };

  const auto started = std::chrono::steady_clock::now();
  const double limit = launch_time_limit();
  int idle_rounds = 0;
  for (uint64_t round = 0;; ++round) {
    if (schedule.kind == ScheduleKind::random) std::shuffle(permutation.begin(), permutation.end(), random);
    for (int burst = 0; burst < 256 && !ahead_warp.empty(); ++burst) {
      const uint64_t before = c.progress;
      any_ready = false;
      all_spun = true;
      for (size_t p : ahead_warp)
        if (!turn(*order[p])) return unwind_all(c);
      if (!any_ready || (all_spun && c.progress == before)) break;  // it waits for the others
    }
    const uint64_t before = c.progress;
    any_ready = false;
    all_spun = true;
    for (size_t p : permutation)
      if (!turn(*order[p])) return unwind_all(c);
    bool all_exited = true;
    for (const auto& b : c.blocks) all_exited &= b->exited == b->threads.size();
    if (all_exited) break;
    if (!any_ready) {
      fail_cluster(launch, kErrorLaunchFailure, "deadlock: no thread can go on;" + waiting_report(c));
      return unwind_all(c);
    }
    idle_rounds = (all_spun && c.progress == before) ? idle_rounds + 1 : 0;
    if (idle_rounds >= 3) {
      fail_cluster(launch, kErrorLaunchFailure, "deadlock: every thread waits and nothing changes;" + waiting_report(c));
      return unwind_all(c);
    }
    if ((round & 63) == 63 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > limit) {
      fail_cluster(launch, kErrorLaunchTimeout,
                   "the launch ran past ARBITER_EMU_LAUNCH_SECONDS (" + std::to_string(static_cast<int>(limit)) +
                       " s);" + waiting_report(c));
      return unwind_all(c);
    }
  }
  for (auto& b : c.blocks) {
    running_thread = &b->threads[0];  // finish_block_async_state reports as the block's first thread
    try {
      finish_block_async_state(*b);
    } catch (const LaunchAborted&) {
    }
    running_thread = nullptr;
    if (launch.status != kSuccess) return;
  }
}

}  // namespace

Status run_launch(Launch& launch) {
  const dim3 g = launch.config.grid, cd = launch.cluster_dims;
  for (unsigned z = 0; z < g.z / cd.z; ++z)
    for (unsigned y = 0; y < g.y / cd.y; ++y)
      for (unsigned x = 0; x < g.x / cd.x; ++x) {
        run_cluster(launch, uint3{x, y, z});
        if (launch.status != kSuccess) return launch.status;
      }
  return launch.status;
}

// ---- kernel_entry and probes ---------------------------------------------------------------------

void kernel_entry(const KernelAttributes& attributes) {
  if (running_probe != nullptr && running_thread == nullptr) {
    running_probe->reached = true;
    running_probe->declared = attributes;
    throw LaunchAborted{};  // the dry start ends here, before the kernel's body
  }
}

bool probe_kernel(const void* kernel, KernelProbe probe, KernelAttributes& declared, std::string& why) {
  ProbeState state;
  ProbeState* outer = running_probe;
  ThreadState* outer_thread = running_thread;
  running_probe = &state;
  running_thread = nullptr;
  {
    Fiber fiber(
        [&] {
          try {
            probe(kernel);
          } catch (const LaunchAborted&) {
          }
        },
        default_fiber_stack_bytes());
    fiber.resume();  // runs to kernel_entry, which ends it
  }
  running_probe = outer;
  running_thread = outer_thread;
  if (!state.reached) {
    why = "not a kernel compiled by emucc (no kernel_entry at the start of its body)";
    return false;
  }
  declared = state.declared;
  return true;
}

}  // namespace arbiter::emu
