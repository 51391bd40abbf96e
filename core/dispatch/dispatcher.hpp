// Chooses the kernel for a problem (docs/architecture.md, "The path of one call"), in this order:
//   1. a config override matching the problem;
//   2. the tuning table's entry, if valid here (table.policy != retune);
//   3. tuning now (table.policy = tune-missing or retune), the result written to the table;
//   4. table.policy = strict: a miss is an error;
//   5. dispatch.on_miss: nearest tuned shape | heuristic (plugin priority) | error.
// Every kernel must pass the verification gate before it is chosen. The choice is kept in
// the selection cache, so all of this runs once per distinct problem.
#pragma once

#include "config/config.hpp"
#include "dispatch/selection_cache.hpp"
#include "plugin/kernel_registry.hpp"

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace arbiter {

class VerificationGate;
class TableIndex;
struct TableHit;
class Tuner;
struct TableEntry;
struct TuneResult;
struct Devices;

struct Selection {
  Selection(const KernelRecord* k, size_t bytes, int32_t checked_calls, bool sampled)
      : kernel(k),
        workspace_bytes(bytes),
        first_calls_left(checked_calls),
        attention((checked_calls > 0 ? kFirstCalls : 0u) | (sampled ? kSampled : 0u) | (bytes != 0 ? kWorkspace : 0u)) {}
  const KernelRecord* kernel = nullptr;
  size_t workspace_bytes = 0;
  // How many of the next calls are still checked against the oracle (verify.first_calls_checked;
  // 0 for kernels the gate does not watch).
  mutable std::atomic<int32_t> first_calls_left{0};
  // Why a call or a plan's run with this selection cannot simply launch, one test on the hot
  // path: first calls still checked (cleared once they are done), shadow checks sampled (the
  // context's verify.shadow_one_in), the dispatcher forgot its choices after this one was made
  // (a plan then chooses again), or the kernel takes a workspace (found for each launch, off
  // the plain path). 0: launch, with no workspace.
  static constexpr uint32_t kFirstCalls = 1, kSampled = 2, kForgotten = 4, kWorkspace = 8;
  mutable std::atomic<uint32_t> attention{0};
};

// The policy's answer with its reasoning, for explain.
struct Decision {
  const KernelRecord* kernel = nullptr;
  std::string rule;                // which rule fired
  std::vector<std::string> trace;  // what was considered, and why refused
  std::string failure;             // why nothing was chosen
};

// What the policy may use beyond the registry; any pointer may be null.
struct DispatchServices {
  VerificationGate* gate = nullptr;
  TableIndex* table = nullptr;
  Tuner* tuner = nullptr;
  TablePolicy policy = TablePolicy::replay;
  int32_t first_calls_checked = 0;  // of each new selection of a gated kernel
  bool shadow_sampled = false;      // verify.shadow_one_in is on: every selection's calls are sampled
  // Stores a freshly tuned entry (the table file). May throw; failures are logged.
  std::function<void(const TableEntry&)> persist;
  // Reports a finished tuning (the CLI's progress output); may be empty.
  std::function<void(const arb_problem&, const TuneResult&)> on_tuned;
  const Devices* devices = nullptr;  // for tuned entries (the problem's device fingerprint)
};

class Dispatcher {
 public:
  Dispatcher(const KernelRegistry& registry, const DispatchConfig& config, DispatchServices services = {});

  // The hot path: lock-free and allocation-free when the problem was seen before.
  // Throws Failure(ARB_ERR_UNSUPPORTED) when no kernel can run the problem.
  // `words`: the problem's op's (Op::problem_words()), every other word of the problem zero;
  // a constant where the caller built the problem (the calls' fast path), so that the hash and
  // the compare cover the op's words alone.
  const Selection& select(const arb_problem& problem, ProblemWords words) {
    const uint64_t hash = Dispatcher::hash(problem, words);
    if (const Selection* hit = cache_.find(problem, hash, words)) return *hit;
    return select_on_miss(problem, hash);
  }
  // The cache alone, for a problem held as its call key (the calls' fast path), `words` its
  // op's call_key_words: the selection and the cache's copy of the problem, or nulls on a miss
  // (the caller then calls select()).
  SelectionCache<Selection>::Hit find(const CallKey& key, size_t words) const noexcept {
    return cache_.find(key, call_key_hash(key), words);
  }
  // The cache's hash of a problem: its call key's where it has one, so that the calls' fast
  // path, which holds the key alone, finds the problems select() placed.
  static uint64_t hash(const arb_problem& problem, ProblemWords words) noexcept {
    CallKey key;
    return pack_call_key(problem, key) ? call_key_hash(key) : problem_hash(problem, words);
  }
  // Any problem: its op's words looked up, and the problem checked to be zero outside them
  // (Failure(ARB_ERR_INVALID_ARGUMENT) otherwise).
  const Selection& select(const arb_problem& problem) { return select(problem, words_of(problem)); }

  enum class Mode {
    dispatch,  // may verify and tune; stops at the first kernel that qualifies
    explain    // side-effect free: no verification or tuning runs; every candidate is shown
  };
  Decision decide(const arb_problem& problem, Mode mode);
  std::string explain(const arb_problem& problem);

  size_t cached_selections() const { return cache_.size(); }
  // Forgets every cached choice, so that each problem is decided again on its next call (after
  // a quarantine, which the gate's answers then reflect). A call already past select() still
  // runs the kernel it got.
  void forget_choices();
  // Counts forget_choices(): a holder of a Selection (a plan) selects again when it moved.
  // Selections themselves live as long as the dispatcher.
  uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

 private:
  const Selection& select_on_miss(const arb_problem& problem, uint64_t hash);
  // The words of the problem's op (every word for an unknown op, which decide() refuses); throws
  // Failure(ARB_ERR_INVALID_ARGUMENT) when a word outside them is set.
  static ProblemWords words_of(const arb_problem& problem);
  // Is the kernel allowed to run (the gate)? In explain mode an unknown verdict is
  // reported as pending and counts as yes.
  bool admitted(const KernelRecord& kernel, const arb_problem& problem, Mode mode, std::string* note);
  // The steps of decide(), numbered as at the top of this file; each returns true when it
  // chose (decision.kernel set), and adds what it considered to decision.trace.
  bool by_override(const arb_problem& problem, Mode mode, Decision& decision);
  bool by_table(const arb_problem& problem, Mode mode, Decision& decision, std::optional<TableHit>& entry);
  bool by_tuning(const arb_problem& problem, Mode mode, const std::optional<TableHit>& entry, Decision& decision);
  bool by_nearest(const arb_problem& problem, Mode mode, Decision& decision);
  bool heuristic(const arb_problem& problem, Mode mode, Decision& decision);

  const KernelRegistry& registry_;
  const DispatchConfig& config_;
  DispatchServices services_;
  SelectionCache<Selection> cache_;
  // Serialises misses (cache writers, tuning). Recursive: a composite's chain, timed by the
  // tuner inside its own miss, dispatches its steps, which may miss in turn on this thread.
  std::recursive_mutex miss_mutex_;
  std::deque<Selection> selections_;  // stable addresses for the cache
  std::atomic<uint64_t> generation_{0};
};

// Does an override rule apply to the problem?
bool rule_matches(const OverrideRule& rule, const arb_problem& problem);

}  // namespace arbiter
