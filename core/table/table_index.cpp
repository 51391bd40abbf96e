#include "table/table_index.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "common/text_file.hpp"
#include "table/table_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

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

std::vector<std::string> device_ids(const Devices& devices) {
  std::vector<std::string> ids;
  for (const Device* d : {devices.cpu, devices.cuda})
    if (d != nullptr) ids.push_back(d->fingerprint().id());
  return ids;
}

TableIndex::TableIndex(TuningTable table, const Devices& devices, const KernelRegistry& registry,
                       VerificationGate& gate)
    : registry_(registry), gate_(gate), other_devices_(table.left_out()) {
  const std::vector<std::string> here = device_ids(devices);
  for (TableEntry& e : table.take_entries()) {
    if (std::find(here.begin(), here.end(), e.device) == here.end()) {
      ++other_devices_;
      continue;
    }
    Pending pending;
    pending.text = keep_text(e.key, {});
    pending.key_size = e.key.size();
    pending.entry = std::make_unique<TableEntry>(std::move(e));
    const size_t key_hash = std::hash<std::string_view>{}(pending.key());
    add_pending(std::move(pending), key_hash);
  }
}

std::unique_ptr<TableIndex> TableIndex::load(const std::string& path, size_t limit, const Devices& devices,
                                             const KernelRegistry& registry, VerificationGate& gate) {
  std::unique_ptr<TableIndex> index(new TableIndex(registry, gate));
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return index;
  const std::vector<std::string> here = device_ids(devices);
  WrittenTableReader reader(&here, [&](const TableEntry& e, std::string_view lines, size_t key_hash) {
    Pending pending;
    pending.text = index->keep_text(e.key, lines);
    pending.key_size = e.key.size();
    index->add_pending(std::move(pending), key_hash);
  });
  TuningTable rest;  // devices only: the entries went to the sink
  if (feed_table_file(path, limit, reader) && reader.finish(rest)) {
    index->other_devices_ = rest.left_out();
    return index;
  }
  // Not the writer's text: toml++ reads it (or says what is wrong with it).
  TuningTable table = TuningTable::parse_general(read_text_file(path, "tuning table", ARB_ERR_TABLE, limit), path);
  table.keep_only(here);
  return std::make_unique<TableIndex>(std::move(table), devices, registry, gate);
}

std::string_view TableIndex::keep_text(std::string_view a, std::string_view b) {
  const size_t size = a.size() + b.size();
  if (size > arena_left_) {
    const size_t block = std::max(size, size_t(1) << 20);
    arena_.push_back(std::unique_ptr<char[]>(new char[block]));
    arena_next_ = arena_.back().get();
    arena_left_ = block;
  }
  char* const text = arena_next_;
  if (!a.empty()) std::memcpy(text, a.data(), a.size());
  if (!b.empty()) std::memcpy(text + a.size(), b.data(), b.size());
  arena_next_ += size;
  arena_left_ -= size;
  return {text, size};
}

void TableIndex::add_pending(Pending&& pending, size_t key_hash) {
  Pending& p = pending_.emplace_back(std::move(pending));
  auto [it, inserted] = unchecked_.emplace(Key{p.key(), key_hash}, &p);
  if (!inserted) {
    p.earlier = it->second;
    it->second = &p;
  }
}

void TableIndex::check_key(std::string_view key, bool quiet) const {
  auto it = unchecked_.find(key_of(key));
  if (it == unchecked_.end()) return;
  std::vector<Pending*> chain;  // the latest first
  for (Pending* p = it->second; p != nullptr; p = p->earlier) chain.push_back(p);
  unchecked_.erase(it);
  for (auto at = chain.rbegin(); at != chain.rend(); ++at) {
    Pending& p = **at;
    p.checked = true;
    TableEntry e;
    if (p.entry) {
      e = std::move(*p.entry);
      p.entry.reset();
    } else if (!WrittenTableReader::parse_entry(p.text.substr(p.key_size), e)) {
      fail(ARB_ERR_INTERNAL, "tuning table: an entry read at load does not read again");  // cannot happen
    }
    arb_problem problem{};
    if (std::string why = stale_reason(e, registry_, gate_, &problem); !why.empty()) {
      if (!quiet) logger().warn("tuning table: the entry of '{}' ({}) is stale, ignored: {}", e.key, e.kernel, why);
      stale_.push_back({e.key, e.kernel, why});
      continue;
    }
    const KernelRecord* kernel = registry_.find(e.kernel);
    Verdict verdict;
    verdict.passed = true;
    verdict.detail = e.verification.empty() ? "passed (tuning table)" : e.verification;
    if (e.verified) gate_.remember_from_table(*kernel, problem, verdict);  // a claim, re-checked on first use
    Item& item = items_.emplace_back(Item{std::move(e), kernel, problem, problem_class_key(problem)});
    by_key_[item.entry.key] = &item;
  }
}

void TableIndex::check_all() const {
  if (all_checked_) return;
  const size_t stale_before = stale_.size();
  for (const Pending& p : pending_)
    if (!p.checked) check_key(p.key(), true);  // one warning below
  all_checked_ = true;
  if (stale_.size() > stale_before)
    logger().warn("tuning table: {} stale entries ignored (first: '{}': {}); `arbiter table show` lists them",
                  stale_.size() - stale_before, stale_[stale_before].key, stale_[stale_before].reason);
}

std::optional<TableHit> TableIndex::lookup(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  check_key(key);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return TableHit{&it->second->entry, it->second->kernel};
}

std::string TableIndex::why_not(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  check_key(key);
  if (by_key_.count(key)) return "";
  for (const StaleEntry& s : stale_)
    if (s.key == key) return "the table's entry (" + s.kernel + ") is stale: " + s.reason;
  return "the table has no entry for this problem on this device";
}

std::optional<TableHit> TableIndex::nearest(const arb_problem& p, double* distance) const {
  std::lock_guard<std::mutex> lock(mutex_);
  check_all();
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
  check_key(entry.key);  // the file's entry first, so that this one replaces it
  const arb_problem problem = parse_problem(entry.key).problem;
  items_.push_back({entry, &kernel, problem, problem_class_key(problem)});
  by_key_[entry.key] = &items_.back();
}

std::vector<TableEntry> TableIndex::revoke(const KernelRecord& kernel, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_all();  // an entry of this kernel checked later must not come back valid
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

const std::vector<StaleEntry>& TableIndex::stale() const {
  std::lock_guard<std::mutex> lock(mutex_);
  check_all();
  return stale_;
}

size_t TableIndex::valid() const {
  std::lock_guard<std::mutex> lock(mutex_);
  check_all();
  return by_key_.size();
}

}  // namespace arbiter
