// Chooses the kernel for a problem (DESIGN.md section 2): config override, then the tuning
// table (not yet), then the on-miss policy; remembers the choice in the selection cache.
#pragma once

#include "config/config.hpp"
#include "dispatch/selection_cache.hpp"
#include "plugin/kernel_registry.hpp"

#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace arbiter {

struct Selection {
  const KernelRecord* kernel = nullptr;
  size_t workspace_bytes = 0;
};

// The policy's answer with its reasoning, for explain.
struct Decision {
  const KernelRecord* kernel = nullptr;
  std::string rule;                 // which rule fired
  std::vector<std::string> trace;   // what was considered, and why refused
  std::string failure;              // why nothing was chosen
};

class Dispatcher {
 public:
  Dispatcher(const KernelRegistry& registry, const DispatchConfig& config);

  // The hot path: lock-free and allocation-free when the problem was seen before.
  // Throws Failure(ARB_ERR_UNSUPPORTED) when no kernel can run the problem.
  const Selection& select(const arb_problem& problem) {
    const uint64_t hash = problem_hash(problem);
    if (const Selection* hit = cache_.find(problem, hash)) return *hit;
    return select_on_miss(problem, hash);
  }

  // The policy itself. With full_trace, every candidate is examined (for explain);
  // otherwise the search stops at the first kernel that accepts.
  Decision decide(const arb_problem& problem, bool full_trace) const;
  std::string explain(const arb_problem& problem) const;

  size_t cached_selections() const { return cache_.size(); }

 private:
  const Selection& select_on_miss(const arb_problem& problem, uint64_t hash);

  const KernelRegistry& registry_;
  const DispatchConfig& config_;
  SelectionCache<Selection> cache_;
  std::mutex miss_mutex_;             // serialises misses (cache writers)
  std::deque<Selection> selections_;  // stable addresses for the cache
};

// supports() through the C ABI, shielded from exceptions; `why` receives the reason.
bool kernel_supports(const KernelRecord& kernel, const arb_problem& problem, std::string* why);

// Does an override rule apply to the problem?
bool rule_matches(const OverrideRule& rule, const arb_problem& problem);

}  // namespace arbiter
