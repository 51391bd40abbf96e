#include "table/table_index.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace arbiter {

std::string stale_reason(const TableEntry& e, const KernelRegistry& registry, const VerificationGate& gate,
                         arb_problem* problem) {
  const KernelRecord* kernel = registry.find(e.kernel);
  if (kernel == nullptr) return "kernel " + e.kernel + " is not loaded";
  const PluginRecord& plugin = *kernel->plugin;
  if (plugin.version != e.plugin_version || plugin.build_id != e.build_id || plugin.runtime_version != e.runtime_version)
    return fmt::format("measured with {} {} build {}{}; loaded is {} build {}{}", plugin.name, e.plugin_version,
                       e.build_id, e.runtime_version.empty() ? "" : " (" + e.runtime_version + ")", plugin.version,
                       plugin.build_id, plugin.runtime_version.empty() ? "" : " (" + plugin.runtime_version + ")");
  if (e.plugin_sha256 != plugin.sha256)
    return e.plugin_sha256.empty() ? "it names no plugin_sha256 (written before content hashes): tune it again"
                                   : fmt::format("measured with a {} file of SHA-256 {}; the loaded file's is {}",
                                                 plugin.name, e.plugin_sha256, plugin.sha256);
  try {
    *problem = parse_problem(e.key).problem;
  } catch (const Failure& f) {
    return std::string("its key does not parse: ") + f.what();
  }
  std::string why;
  if (kernel->abi.op != problem->op || kernel->abi.device_type != problem->device_type)
    return "the kernel does not run this op on this device";
  if (!kernel_supports(*kernel, *problem, &why)) return "the kernel no longer supports it: " + why;
  // A failed verdict (a quarantine) holds for every kernel; a missing one only for gated ones.
  if (!e.verified && e.verification.rfind("failed", 0) == 0) return "its verification failed: " + e.verification;
  if (!e.verified && gate.gated(*kernel)) return "it was never verified";
  return "";
}

TableIndex::TableIndex(const TuningTable& table, const Devices& devices, const KernelRegistry& registry,
                       VerificationGate& gate) {
  std::vector<std::string> here;  // this machine's devices
  for (const Device* d : {devices.cpu, devices.cuda})
    if (d != nullptr) here.push_back(d->fingerprint().id());
  for (const TableEntry& e : table.entries()) {
    if (std::find(here.begin(), here.end(), e.device) == here.end()) {
      ++other_devices_;
      continue;
    }
    arb_problem problem{};
    if (std::string why = stale_reason(e, registry, gate, &problem); !why.empty()) {
      stale_.push_back({e.key, e.kernel, why});
      continue;
    }
    const KernelRecord* kernel = registry.find(e.kernel);
    Verdict verdict;
    verdict.passed = true;
    verdict.detail = e.verification.empty() ? "passed (tuning table)" : e.verification;
    if (e.verified) gate.remember_from_table(*kernel, problem, verdict);  // a claim, re-checked on first use
    items_.push_back({e, kernel, problem, problem_class_key(problem)});
    by_key_[e.key] = &items_.back();
  }
  if (!stale_.empty())
    logger().warn("tuning table: {} stale entries ignored (first: '{}': {}); `arbiter table show` lists them",
                  stale_.size(), stale_.front().key, stale_.front().reason);
}

std::optional<TableHit> TableIndex::lookup(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return TableHit{&it->second->entry, it->second->kernel};
}

std::string TableIndex::why_not(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (by_key_.count(key)) return "";
  for (const StaleEntry& s : stale_)
    if (s.key == key) return "the table's entry (" + s.kernel + ") is stale: " + s.reason;
  return "the table has no entry for this problem on this device";
}

std::optional<TableHit> TableIndex::nearest(const arb_problem& p, double* distance) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string wanted = problem_class_key(p);
  auto log_gap = [](int64_t a, int64_t b) {
    return std::fabs(std::log2(static_cast<double>(a)) - std::log2(static_cast<double>(b)));
  };
  const Op* op = find_op(p.op);
  if (op == nullptr) return std::nullopt;
  const Item* best = nullptr;
  double best_distance = INFINITY;
  for (const auto& [key, item] : by_key_) {  // key order: ties go to the smaller key
    if (item->problem_class != wanted) continue;
    const arb_problem& q = item->problem;
    double d = 0;
    for (const SizeField& size : op->sizes()) d += log_gap(p.*size.member, q.*size.member);
    if (d < best_distance) {
      best_distance = d;
      best = item;
    }
  }
  if (best == nullptr) return std::nullopt;
  if (distance) *distance = best_distance;
  return TableHit{&best->entry, best->kernel};
}

void TableIndex::add(const TableEntry& entry, const KernelRecord& kernel) {
  std::lock_guard<std::mutex> lock(mutex_);
  const arb_problem problem = parse_problem(entry.key).problem;
  items_.push_back({entry, &kernel, problem, problem_class_key(problem)});
  by_key_[entry.key] = &items_.back();
}

std::vector<TableEntry> TableIndex::revoke(const KernelRecord& kernel, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TableEntry> marked;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    if (it->second->kernel != &kernel) {
      ++it;
      continue;
    }
    TableEntry e = it->second->entry;  // items stay as they are: a reader may hold one
    e.verified = false;
    e.verification = "failed: shadow_check: quarantined: " + reason;
    stale_.push_back({e.key, e.kernel, "quarantined: " + reason});
    marked.push_back(std::move(e));
    it = by_key_.erase(it);
  }
  return marked;
}

size_t TableIndex::valid() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_key_.size();
}

}  // namespace arbiter
