#include "dispatch/dispatcher.hpp"

#include "common/failure.hpp"
#include "common/names.hpp"

#include <fmt/format.h>

namespace arbiter {

bool kernel_supports(const KernelRecord& kernel, const arb_problem& problem, std::string* why) {
  char reason[512];
  reason[0] = '\0';
  int32_t accepted = 0;
  try {
    accepted = kernel.abi.supports(kernel.abi.ctx, &problem, reason, sizeof reason);
  } catch (...) {
    if (why) *why = "supports() threw a C++ exception across the C ABI";
    return false;
  }
  if (accepted != 0) return true;
  reason[sizeof reason - 1] = '\0';
  if (why) *why = reason[0] != '\0' ? reason : "supports() said no";
  return false;
}

bool rule_matches(const OverrideRule& rule, const arb_problem& p) {
  auto within = [](const std::optional<IntRange>& range, int64_t v) { return !range || range->contains(v); };
  if (rule.op != p.op) return false;
  if (rule.dtype && *rule.dtype != p.dtype) return false;
  if (rule.device && *rule.device != p.device_type) return false;
  if (p.op == ARB_OP_GEMM) return within(rule.m, p.m) && within(rule.n, p.n) && within(rule.k, p.k);
  return within(rule.rows, p.rows) && within(rule.cols, p.cols);
}

Dispatcher::Dispatcher(const KernelRegistry& registry, const DispatchConfig& config)
    : registry_(registry), config_(config) {}

Decision Dispatcher::decide(const arb_problem& p, bool full_trace) const {
  Decision decision;
  auto note = [&](std::string line) { decision.trace.push_back(std::move(line)); };

  // 1. Config overrides, first match wins.
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
    } else {
      note(label + ": matched");
      decision.kernel = kernel;
      decision.rule = "config override #" + std::to_string(i + 1) + " at " + rule.origin;
      return decision;
    }
  }

  // 2. The tuning table comes here (next milestone).

  // 3. On miss.
  if (config_.on_miss == OnMiss::error) {
    decision.failure = "no config override chose a kernel and dispatch.on_miss = \"error\"";
    return decision;
  }
  for (const KernelRecord* kernel : registry_.candidates(p.op)) {
    const std::string label =
        fmt::format("{} (plugin priority {}, kernel priority {})", kernel->name, kernel->plugin->priority,
                    kernel->abi.priority);
    if (kernel->abi.device_type != p.device_type) {
      if (full_trace) note(label + fmt::format(": runs on {}", device_name(kernel->abi.device_type)));
      continue;
    }
    if (decision.kernel != nullptr) {  // only reached with full_trace
      std::string why;
      note(label + (kernel_supports(*kernel, p, &why) ? ": supports it, lower in order" : ": refused: " + why));
      continue;
    }
    std::string why;
    if (kernel_supports(*kernel, p, &why)) {
      note(label + ": chosen");
      decision.kernel = kernel;
      decision.rule = "heuristic: the highest-priority kernel that supports the problem";
      if (!full_trace) return decision;
    } else {
      note(label + ": refused: " + why);
    }
  }
  if (decision.kernel == nullptr)
    decision.failure = fmt::format("no loaded kernel supports this {} problem", op_name(p.op));
  return decision;
}

const Selection& Dispatcher::select_on_miss(const arb_problem& problem, uint64_t hash) {
  std::lock_guard<std::mutex> lock(miss_mutex_);
  if (const Selection* hit = cache_.find(problem, hash)) return *hit;  // another thread won
  const Decision decision = decide(problem, false);
  if (decision.kernel == nullptr)
    fail(ARB_ERR_UNSUPPORTED, decision.failure + " (" + problem_key(problem) + "); see arb_explain");
  Selection selection{decision.kernel, 0};
  if (const arb_workspace_size_fn size_of = decision.kernel->abi.workspace_size) {
    arb_status status = ARB_ERR_KERNEL;
    try {
      status = size_of(decision.kernel->abi.ctx, &problem, &selection.workspace_bytes);
    } catch (...) {
    }
    if (status != ARB_OK)
      fail(ARB_ERR_KERNEL, "kernel " + decision.kernel->name + " could not size its workspace for " +
                               problem_key(problem));
  }
  selections_.push_back(selection);
  cache_.insert(problem, hash, &selections_.back());
  return selections_.back();
}

std::string Dispatcher::explain(const arb_problem& problem) const {
  const Decision decision = decide(problem, true);
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
  if (decision.trace.empty()) out += "  (no kernel for this op is loaded)\n";
  for (const std::string& line : decision.trace) out += "  " + line + "\n";
  for (const auto& plugin : registry_.plugins())
    if (plugin->state != PluginState::loaded)
      out += fmt::format("  plugin {} ({}): {}: {}\n", plugin->name.empty() ? "?" : plugin->name, plugin->path,
                         state_name(plugin->state), plugin->reason);
  return out;
}

}  // namespace arbiter
