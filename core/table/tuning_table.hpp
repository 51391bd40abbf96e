// The tuning table (docs/architecture.md, "The tuning table") as data: a TOML file, human-readable and diffable.
//
//   schema = 1
//   [devices.cpu-3f2a...]             # file-level validators: one section per device
//   kind = "cpu"  name = "AMD EPYC ..."  details = "avx2 avx512f ..."
//   [[entry]]                         # one per problem key and device
//   key = "gemm f32 m=8 n=8 k=8 ..."  device = "cpu-3f2a..."  kernel = "cpu.gemm_small_avx512"
//   plugin_version = "1.0.0"  build_id = "..."  runtime_version = ""   # entry validators
//   plugin_sha256 = "..."                                            # (the file's content)
//   median_us = 0.044  p20_us = ...  p80_us = ...  samples = 41  noise = 0.02
//   runner_up = "openblas.sgemm"  margin = 0.41  verified = true  verification = "passed: ..."
//   workspace_bytes = 0  when = "2026-11-30T23:59:00Z"
//
// Parsing is strict: unknown keys, missing keys and wrong types are errors with the file,
// line and column (Failure with ARB_ERR_TABLE), so a corrupt table is never half-used.
//
// Two readers, one result: WrittenTableReader reads exactly the text to_toml() writes, line by
// line (some 15x faster than toml++ building the same table, whose parse was nearly all of a
// 10,000-entry table's 600 ms load); any other text (keys reordered or re-spaced by hand, a
// literal string, an escape it does not know) makes it give up, and the whole text goes to
// toml++ (parse_general), which decides. docs/tuning.md, "Loading a large table".
#pragma once

#include "device/device.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

struct TableEntry {
  std::string key;     // the problem key (problem syntax, every field explicit)
  std::string device;  // DeviceFingerprint::id()
  std::string kernel;  // "<plugin>.<kernel>"
  std::string plugin_version, build_id, runtime_version;
  std::string plugin_sha256;  // of the plugin's file, as the host read it; "" in entries from before 1.1
  double median_us = 0, p20_us = 0, p80_us = 0;
  int64_t samples = 0;
  double noise = 0;  // relative: the measured spread the margin must beat
  std::string runner_up;
  double margin = 0;  // runner_up median / median - 1 (0 without a runner-up)
  bool verified = false;
  std::string verification;
  int64_t workspace_bytes = 0;
  std::string when;  // UTC, ISO 8601

  std::string plugin() const { return kernel.substr(0, kernel.find('.')); }
};

class TuningTable {
 public:
  static constexpr int64_t kSchema = 1;

  // Throws Failure(ARB_ERR_TABLE, "source:line:column: what").
  static TuningTable parse(std::string_view toml, const std::string& source);
  // The same through toml++ alone (what parse falls back to; tests compare the two).
  static TuningTable parse_general(std::string_view toml, const std::string& source);
  std::string to_toml() const;

  const std::map<std::string, DeviceFingerprint>& devices() const { return devices_; }
  const std::vector<TableEntry>& entries() const { return entries_; }
  // Entries of devices a reader was told not to keep (counted, not stored). A table with
  // any left out must never be written back.
  size_t left_out() const { return left_out_; }
  // Moves the entries out, leaving the table without any.
  std::vector<TableEntry> take_entries() {
    index_.clear();
    return std::move(entries_);
  }
  // Drops the entries of devices not in `keep` (counting them in left_out).
  void keep_only(const std::vector<std::string>& keep);

  // Adds or replaces the entry of (key, device); registers the device.
  void put(const TableEntry& entry, const DeviceFingerprint& device);
  const TableEntry* find(const std::string& key, const std::string& device) const;
  // Removes the entries for which `drop` is true; returns how many.
  template <typename Predicate>
  size_t remove_if(Predicate drop) {
    const size_t before = entries_.size();
    std::erase_if(entries_, drop);
    reindex();
    return before - entries_.size();
  }

 private:
  void reindex();
  // The position of the entry of (key, device) whose hash is `hash`, or entries_.size().
  size_t position(const std::string& key, const std::string& device, uint64_t hash) const;
  friend class WrittenTableReader;

  std::map<std::string, DeviceFingerprint> devices_;  // by id
  std::vector<TableEntry> entries_;                    // in insertion order, unique (key, device)
  std::unordered_multimap<uint64_t, size_t> index_;    // entry_hash(key, device) -> position
  size_t left_out_ = 0;
};

// The fast reader of to_toml()'s own text, fed one line at a time, so that a file can be read
// in pieces. line() and finish() return false at the first thing outside
// that text; the caller then reads the whole text with parse_general. It never accepts text
// that parse_general rejects or reads differently (tools/fuzz/fuzz_table.cpp checks this).
class WrittenTableReader {
 public:
  // Each kept entry as read, with its lines (key = value, each ending in '\n'), which
  // parse_entry reads again, and std::hash of its key. Called before finish() knows that the
  // whole text is the writer's.
  using Sink = std::function<void(const TableEntry& entry, std::string_view lines, size_t key_hash)>;
  // keep: the device ids whose entries are stored (nullptr: all); the rest are only checked.
  // With a sink, kept entries go to it instead of the table.
  explicit WrittenTableReader(const std::vector<std::string>* keep = nullptr, Sink sink = {})
      : keep_(keep), sink_(std::move(sink)) {}
  // One line, with or without its '\n'.
  bool line(std::string_view line);
  // Before the caller reuses the buffer that the lines passed so far are in.
  void flush();
  // The table, if everything read was the writer's text.
  bool finish(TuningTable& out);
  // Feeds a whole text; false if it is not the writer's.
  static bool read(std::string_view text, TuningTable& out, const std::vector<std::string>* keep = nullptr);
  // An entry's lines as a sink received them.
  static bool parse_entry(std::string_view lines, TableEntry& out);

 private:
  enum class Phase { start, root, device, entry };
  bool end_section();
  bool complete_entry();
  // Reads the line of the field into e; a string field only checked unless `store`.
  static bool entry_field(size_t field, std::string_view line, TableEntry& e, bool store);

  const std::vector<std::string>* keep_;
  Sink sink_;
  std::string raw_;       // the lines of the entry being read, for the sink, once copied
  std::string_view span_;  // and those not copied yet
  TuningTable table_;
  Phase phase_ = Phase::start;
  size_t field_ = 0;  // the next key expected in the current section
  std::string device_id_;
  std::string known_device_;  // the id of a device of devices_ that the last entry named
  uint64_t known_device_hash_ = 0;
  DeviceFingerprint device_;
  TableEntry entry_;
  bool store_ = true;  // whether the entry being read is kept in the table (not checked only)
  std::vector<uint64_t> seen_;  // hashes of (key, device) of every entry: duplicates
};

// The current time as the table writes it.
std::string utc_now();

}  // namespace arbiter
