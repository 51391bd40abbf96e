// The tuning table as one context uses it. On load every entry is checked against this
// machine and these plugins:
//   - entries of other devices are kept in the file but not used;
//   - an entry is stale, reported and ignored, when its kernel is not loaded, its plugin's
//     version, build id or wrapped-library version changed, its key no longer parses, the
//     kernel's supports() refuses it now, or it was never verified (and must be);
//   - a valid entry's verification is handed to the gate, so it is not re-run.
// Tuned results are added as they arrive. Thread-safe.
#pragma once

#include "plugin/kernel_registry.hpp"
#include "table/tuning_table.hpp"
#include "verify/verification_gate.hpp"

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace arbiter {

struct TableHit {
  const TableEntry* entry;
  const KernelRecord* kernel;
};

struct StaleEntry {
  std::string key;
  std::string kernel;
  std::string reason;
};

class TableIndex {
 public:
  TableIndex(const TuningTable& table, const Devices& devices, const KernelRegistry& registry, VerificationGate& gate);

  std::optional<TableHit> lookup(const std::string& key) const;
  // Why no valid entry serves `key`: the stale reason, or that there is none.
  std::string why_not(const std::string& key) const;
  // The valid entry of the same problem class closest to `problem`: the smallest sum over
  // its sizes (m, n, k or rows, cols) of |log2(entry size) - log2(problem size)|; ties go
  // to the smaller key. The caller still checks that the kernel supports the problem.
  std::optional<TableHit> nearest(const arb_problem& problem, double* distance) const;
  void add(const TableEntry& entry, const KernelRecord& kernel);
  // Takes every entry of a quarantined kernel out of use (listed as stale from then on) and
  // returns them marked failed (verified = false, verification = "failed: ..."), for the file.
  std::vector<TableEntry> revoke(const KernelRecord& kernel, const std::string& reason);

  size_t valid() const;
  const std::vector<StaleEntry>& stale() const { return stale_; }
  size_t other_devices() const { return other_devices_; }

 private:
  struct Item {
    TableEntry entry;
    const KernelRecord* kernel;
    arb_problem problem;
    std::string problem_class;
  };
  mutable std::mutex mutex_;
  std::deque<Item> items_;  // stable addresses
  std::map<std::string, const Item*> by_key_;
  std::vector<StaleEntry> stale_;
  size_t other_devices_ = 0;
};

// The reason an entry is stale here, or "" if it is valid; on "" *problem is its problem.
std::string stale_reason(const TableEntry& entry, const KernelRegistry& registry, const VerificationGate& gate,
                         arb_problem* problem);

}  // namespace arbiter
