#include "dispatch/dispatcher.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "arbiter_base/abi_names.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/op_table.hpp"
#include "table/table_index.hpp"
#include "table/tuned_entry.hpp"
#include "tune/tuner.hpp"
#include "verify/verification_gate.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace arbiter {

bool rule_matches(const OverrideRule& rule, const arb_problem& p) {
  auto within = [](const std::optional<IntRange>& range, int64_t v) { return !range || range->contains(v); };
  if (rule.op != p.op) return false;
  if (rule.dtype && *rule.dtype != p.dtype) return false;
  if (rule.device && *rule.device != p.device_type) return false;
  const Op* op = find_op(p.op);
  if (op == nullptr) return false;
  for (const SizeField& size : op->sizes())
    if (!within(rule.size(size.name), p.*size.member)) return false;
  return true;
}

Dispatcher::Dispatcher(const KernelRegistry& registry, const DispatchConfig& config, DispatchServices services)
    : registry_(registry), config_(config), services_(std::move(services)) {}

bool Dispatcher::admitted(const KernelRecord& kernel, const arb_problem& problem, Mode mode, std::string* note) {
  if (services_.gate == nullptr) return true;
  const Admission answer = services_.gate->admission(kernel, problem, mode == Mode::dispatch);
  switch (answer.state) {
    case Admission::State::admitted:  // on whose word, when not a verdict reached here
      if (note && !answer.reason.empty()) *note = " (" + answer.reason + ")";
      return true;
    case Admission::State::pending:  // explain only: shown as the choice, with the note
      if (note) *note = " (" + answer.reason + ")";
      return true;
    case Admission::State::refused: break;
  }
  if (note) *note = answer.reason;
  return false;
}

bool Dispatcher::heuristic(const arb_problem& p, Mode mode, Decision& decision) {
  auto note = [&](std::string line) { decision.trace.push_back(std::move(line)); };
  const bool full_trace = mode == Mode::explain;
  for (const KernelRecord* kernel : registry_.candidates(p.op)) {
    const std::string label = fmt::format("{} (plugin priority {}, kernel priority {})", kernel->name,
                                          kernel->plugin->priority, kernel->abi.priority);
    if (kernel->abi.device_type != p.device_type) {
      if (full_trace) note(label + fmt::format(": runs on {}", device_name(kernel->abi.device_type)));
      continue;
    }
    std::string why;
    if (!kernel_supports(*kernel, p, &why)) {
      note(label + ": refused: " + why);
      continue;
    }
    if (decision.kernel != nullptr) {  // only with full_trace
      note(label + ": supports it, lower in order");
      continue;
    }
    std::string gate_note;
    if (!admitted(*kernel, p, mode, &gate_note)) {
      note(label + ": " + gate_note);
      continue;
    }
    note(label + ": chosen" + gate_note);
    decision.kernel = kernel;
    decision.rule = "heuristic: the highest-priority verified kernel that supports the problem";
    if (!full_trace) return true;
  }
  return decision.kernel != nullptr;
}

// 1. Config overrides, first match wins.
bool Dispatcher::by_override(const arb_problem& p, Mode mode, Decision& decision) {
  auto note = [&](std::string line) { decision.trace.push_back(std::move(line)); };
  for (size_t i = 0; i < config_.overrides.size(); ++i) {
    const OverrideRule& rule = config_.overrides[i];
    if (!rule_matches(rule, p)) continue;
    const std::string label = fmt::format("override #{} ({}) -> {}", i + 1, rule.origin, rule.kernel);
    const KernelRecord* kernel = registry_.find(rule.kernel);
    std::string why;
    if (kernel == nullptr) {
      note(label + ": no such kernel is loaded; rule skipped");
    } else if (kernel->abi.op != p.op) {
      note(label + fmt::format(": kernel computes {}, not {}; rule skipped", op_name(kernel->abi.op), op_name(p.op)));
    } else if (kernel->abi.device_type != p.device_type) {
      note(label + fmt::format(": kernel runs on {}, problem is on {}; rule skipped",
                               device_name(kernel->abi.device_type), device_name(p.device_type)));
    } else if (!kernel_supports(*kernel, p, &why)) {
      note(label + ": kernel refused the problem (" + why + "); rule skipped");
    } else if (std::string gate_note; !admitted(*kernel, p, mode, &gate_note)) {
      note(label + ": " + gate_note + "; rule skipped");
    } else {
      note(label + ": matched" + gate_note);
      decision.kernel = kernel;
      decision.rule = "config override #" + std::to_string(i + 1) + " at " + rule.origin;
      return true;
    }
  }
  return false;
}

// 2. The tuning table's entry, unless table.policy = retune; `entry` keeps what was found.
bool Dispatcher::by_table(const arb_problem& p, Mode mode, Decision& decision, std::optional<TableHit>& entry) {
  auto note = [&](std::string line) { decision.trace.push_back(std::move(line)); };
  const std::string policy = std::string(table_policy_name(services_.policy));
  if (services_.table != nullptr) {
    const std::string key = problem_key(p);
    entry = services_.table->lookup(key);
    if (entry && services_.policy != TablePolicy::retune) {
      const TableEntry& e = *entry->entry;
      note(fmt::format("tuning table: {} median {:.3g} us (p20 {:.3g}, p80 {:.3g}, {} samples){}; {}; {}", e.kernel,
                       e.median_us, e.p20_us, e.p80_us, e.samples,
                       e.runner_up.empty() ? "" : fmt::format(", {:.1f}% ahead of {}", e.margin * 100, e.runner_up),
                       e.verification, e.when));
      // The entry's verdict is the table's claim: the gate decides (docs/verification.md).
      std::string gate_note;
      if (!admitted(*entry->kernel, p, mode, &gate_note)) {
        note("tuning table: " + e.kernel + " refused by the gate: " + gate_note);
        return false;
      }
      if (!gate_note.empty()) note("tuning table: " + e.kernel + gate_note);
      decision.kernel = entry->kernel;
      decision.rule = "tuning table entry (table.policy = " + policy + ")";
      return true;
    }
    note(entry ? "tuning table: entry ignored, table.policy = retune" : "tuning table: " + services_.table->why_not(key));
  } else {
    note("tuning table: none (table.path is empty, or the file could not be used)");
  }
  return false;
}

// 3. Tuning now (table.policy = tune-missing or retune), the result written to the table.
bool Dispatcher::by_tuning(const arb_problem& p, Mode mode, const std::optional<TableHit>& entry, Decision& decision) {
  auto note = [&](std::string line) { decision.trace.push_back(std::move(line)); };
  const std::string policy = std::string(table_policy_name(services_.policy));
  const bool tuning_policy = services_.policy == TablePolicy::tune_missing || services_.policy == TablePolicy::retune;
  if (tuning_policy && services_.tuner != nullptr) {
    if (mode == Mode::explain) {
      note("table.policy = " + policy + ": this problem is tuned on first use; until then the heuristic below");
    } else {
      const TuneResult result = services_.tuner->tune(p, entry ? entry->kernel : nullptr);
      if (services_.on_tuned) services_.on_tuned(p, result);
      if (const Candidate* winner = result.winning()) {
        if (services_.devices != nullptr) {
          const TableEntry tuned = tuned_entry(result, p, services_.devices->of(p.device_type).fingerprint());
          try {
            if (services_.persist) services_.persist(tuned);
          } catch (const std::exception& e) {
            logger().error("could not write the tuning table: {}", e.what());
          }
          if (services_.table != nullptr) services_.table->add(tuned, *winner->kernel);
        }
        note(fmt::format("tuned now in {:.0f} ms: {} median {:.3g} us{}", result.seconds * 1e3, winner->kernel->name,
                         winner->stats.median * 1e6,
                         result.second() ? fmt::format(", {:.1f}% ahead of {}", result.margin * 100,
                                                       result.second()->kernel->name)
                                         : ""));
        decision.kernel = winner->kernel;
        decision.rule = "tuned now (table.policy = " + policy + ")";
        return true;
      }
      note("tuning found no kernel that passes verification and runs");
    }
  }
  return false;
}

// 5a. dispatch.on_miss = nearest: the kernel of the nearest tuned shape of the class.
bool Dispatcher::by_nearest(const arb_problem& p, Mode mode, Decision& decision) {
  auto note = [&](std::string line) { decision.trace.push_back(std::move(line)); };
  double distance = 0;
  std::optional<TableHit> near = services_.table ? services_.table->nearest(p, &distance) : std::nullopt;
  std::string why, gate_note;
  if (!near) {
    note("nearest tuned shape: none of this class in the table");
  } else if (!kernel_supports(*near->kernel, p, &why)) {
    note(fmt::format("nearest tuned shape '{}' (distance {:.2f}) -> {}: refused: {}", near->entry->key, distance,
                     near->kernel->name, why));
  } else if (!admitted(*near->kernel, p, mode, &gate_note)) {
    note(fmt::format("nearest tuned shape '{}' -> {}: {}", near->entry->key, near->kernel->name, gate_note));
  } else {
    note(fmt::format("nearest tuned shape '{}' (distance {:.2f}) -> {}{}", near->entry->key, distance,
                     near->kernel->name, gate_note));
    decision.kernel = near->kernel;
    decision.rule = fmt::format("nearest tuned shape (sum of |log2| size differences {:.2f})", distance);
    return true;
  }
  return false;
}

Decision Dispatcher::decide(const arb_problem& p, Mode mode) {
  Decision decision;
  if (by_override(p, mode, decision)) return decision;
  std::optional<TableHit> entry;
  if (by_table(p, mode, decision, entry)) return decision;
  if (by_tuning(p, mode, entry, decision)) return decision;

  // 4. Strict: the table must have it.
  if (services_.policy == TablePolicy::strict) {
    decision.failure = "no valid tuning-table entry for this problem and table.policy = \"strict\"";
    return decision;
  }

  // 5. On miss.
  if (config_.on_miss == OnMiss::error) {
    decision.failure = "no override or table entry chose a kernel and dispatch.on_miss = \"error\"";
    return decision;
  }
  if (config_.on_miss == OnMiss::nearest && by_nearest(p, mode, decision) && mode == Mode::dispatch) return decision;
  auto note = [&](std::string line) { decision.trace.push_back(std::move(line)); };
  if (decision.kernel != nullptr) {  // explain mode after a nearest hit: show the rest too
    Decision rest;
    heuristic(p, mode, rest);
    for (auto& line : rest.trace) note("(heuristic) " + line);
    return decision;
  }
  if (!heuristic(p, mode, decision))
    decision.failure = fmt::format("no loaded kernel both supports this {} problem and passes verification", op_name(p.op));
  return decision;
}

ProblemWords Dispatcher::words_of(const arb_problem& problem) {
  const Op* op = find_op(problem.op);
  if (op == nullptr) return kAllProblemWords;
  const ProblemWords words = op->problem_words();
  if (!problem_within(problem, words))
    fail(ARB_ERR_INVALID_ARGUMENT,
         fmt::format("the {} problem sets fields of arb_problem that are not {}'s (build problems zero-filled)",
                     op->name(), op->name()));
  return words;
}

const Selection& Dispatcher::select_on_miss(const arb_problem& problem, uint64_t hash) {
  // The cache compares only the words of a problem's op: it must hold no problem with any
  // other word set (the calls' fast path builds them zero-filled; this holds it to that).
  const ProblemWords words = words_of(problem);
  std::lock_guard<std::recursive_mutex> lock(miss_mutex_);
  if (const Selection* hit = cache_.find(problem, hash, words)) return *hit;  // another thread won
  const Decision decision = decide(problem, Mode::dispatch);
  if (decision.kernel == nullptr)
    fail(ARB_ERR_UNSUPPORTED, decision.failure + " (" + problem_key(problem) + "); see arb_explain");
  const bool watched = services_.gate != nullptr && services_.gate->gated(*decision.kernel);
  selections_.emplace_back(decision.kernel, kernel_workspace_bytes(*decision.kernel, problem),
                           watched ? services_.first_calls_checked : 0, services_.shadow_sampled);
  cache_.insert(problem, hash, &selections_.back());
  return selections_.back();
}

void Dispatcher::forget_choices() {
  std::lock_guard<std::recursive_mutex> lock(miss_mutex_);
  // Every selection made so far is marked before the generation moves (selections are made
  // under this lock too): one without the mark is newer than the last forget.
  for (const Selection& selection : selections_)
    selection.attention.fetch_or(Selection::kForgotten, std::memory_order_release);
  cache_.clear();
  generation_.fetch_add(1, std::memory_order_acq_rel);  // after the clear: a new generation never finds an old choice
}

std::string Dispatcher::explain(const arb_problem& problem) {
  const Decision decision = decide(problem, Mode::explain);
  std::string out = "problem: " + problem_key(problem) + "\n";
  if (decision.kernel != nullptr) {
    out += "kernel:  " + decision.kernel->name + " (" + std::string(provenance_name(decision.kernel->provenance)) +
           ", plugin " + decision.kernel->plugin->name + " " + decision.kernel->plugin->version + ")\n";
    out += "rule:    " + decision.rule + "\n";
  } else {
    out += "kernel:  none\n";
    out += "reason:  " + decision.failure + "\n";
  }
  out += "considered:\n";
  for (const std::string& line : decision.trace) out += "  " + line + "\n";
  // An override or table entry decided before the heuristic looked: show what it would
  // pick, which is what runs if that rule stops applying (its kernel fails or goes away).
  const bool heuristic_shown =
      decision.rule.rfind("heuristic", 0) == 0 ||
      std::any_of(decision.trace.begin(), decision.trace.end(),
                  [](const std::string& line) { return line.rfind("(heuristic)", 0) == 0; });
  if (decision.kernel != nullptr && !heuristic_shown) {
    Decision fallback;
    heuristic(problem, Mode::explain, fallback);
    out += fmt::format("fallback (the heuristic, if the rule above did not apply): {}\n",
                       fallback.kernel != nullptr ? fallback.kernel->name : "none");
    for (const std::string& line : fallback.trace) out += "  " + line + "\n";
  }
  for (const auto& plugin : registry_.plugins())
    if (plugin->state != PluginState::loaded)
      out += fmt::format("  plugin {} ({}): {}: {}\n", plugin->name.empty() ? "?" : plugin->name, plugin->path,
                         state_name(plugin->state), plugin->reason);
  return out;
}

}  // namespace arbiter
