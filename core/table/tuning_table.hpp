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
#pragma once

#include "device/device.hpp"

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
  std::string to_toml() const;

  const std::map<std::string, DeviceFingerprint>& devices() const { return devices_; }
  const std::vector<TableEntry>& entries() const { return entries_; }

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

  std::map<std::string, DeviceFingerprint> devices_;  // by id
  std::vector<TableEntry> entries_;                    // in insertion order, unique (key, device)
  std::unordered_map<std::string, size_t> index_;      // key + '\n' + device -> position
};

// The current time as the table writes it.
std::string utc_now();

}  // namespace arbiter
