// The tuning table as one context uses it. Every entry of this machine is checked against
// this machine and these plugins, once, when its key is first looked up (or all at once when
// the whole table is asked about: valid(), stale(), nearest(), revoke()); checking all 10,000
// entries of a large table at load was two thirds of the load (docs/tuning.md):
//   - entries of other devices are kept in the file but not used (nor held in memory);
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
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
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
  // Entries of other devices count in other_devices(), with those the table left out.
  TableIndex(TuningTable table, const Devices& devices, const KernelRegistry& registry, VerificationGate& gate);
  // The table file at `path` (none: an empty index), read as load_table_file reads it, each entry
  // of this machine kept as its text until it is checked. Failure(ARB_ERR_TABLE) as there.
  static std::unique_ptr<TableIndex> load(const std::string& path, size_t limit, const Devices& devices,
                                          const KernelRegistry& registry, VerificationGate& gate);

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
  const std::vector<StaleEntry>& stale() const;
  size_t other_devices() const { return other_devices_; }

 private:
  TableIndex(const KernelRegistry& registry, VerificationGate& gate) : registry_(registry), gate_(gate) {}

  struct Item {
    TableEntry entry;
    const KernelRecord* kernel;
    arb_problem problem;
    std::string problem_class;
  };
  // An entry not checked yet: its key and lines as the file has them (WrittenTableReader::parse_entry
  // reads them), or, from a table read by toml++, the entry itself.
  struct Pending {
    std::string_view text;  // the key, then the entry's lines (none from toml++); in arena_
    size_t key_size = 0;
    std::unique_ptr<TableEntry> entry;  // from toml++
    bool checked = false;
    Pending* earlier = nullptr;  // an unchecked entry of the same key earlier in the file (another device)
    std::string_view key() const { return text.substr(0, key_size); }
  };
  // Copies a and b, one after the other, into arena_.
  std::string_view keep_text(std::string_view a, std::string_view b);
  void add_pending(Pending&& pending, size_t key_hash);
  // A key with its std::hash, computed once: the reader has it already.
  struct Key {
    std::string_view text;
    size_t hash;
    bool operator==(const Key& other) const { return text == other.text; }
  };
  struct KeyHash {
    size_t operator()(const Key& key) const { return key.hash; }
  };
  static Key key_of(std::string_view text) { return {text, std::hash<std::string_view>{}(text)}; }
  // Checks the unchecked entries of `key` (under mutex_), as the file orders them.
  void check_key(std::string_view key, bool quiet = false) const;
  void check_all() const;

  const KernelRegistry& registry_;
  VerificationGate& gate_;
  mutable std::mutex mutex_;
  mutable std::deque<Item> items_;                                    // checked and valid; stable addresses
  mutable std::deque<Pending> pending_;                               // in file order
  std::vector<std::unique_ptr<char[]>> arena_;  // blocks of pending_'s texts: one allocation per MiB, not per entry
  char* arena_next_ = nullptr;
  size_t arena_left_ = 0;
  mutable std::unordered_map<Key, Pending*, KeyHash> unchecked_;  // the last of each key; views into arena_
  mutable std::map<std::string, const Item*> by_key_;                 // checked and valid
  mutable std::vector<StaleEntry> stale_;
  mutable bool all_checked_ = false;
  size_t other_devices_ = 0;
};

// The fingerprint ids of this machine's devices: the entries a context keeps
// (load_table_file(path, limit, keep)).
std::vector<std::string> device_ids(const Devices& devices);

// The reason an entry is stale here, or "" if it is valid; on "" *problem is its problem.
std::string stale_reason(const TableEntry& entry, const KernelRegistry& registry, const VerificationGate& gate,
                         arb_problem* problem);

}  // namespace arbiter
