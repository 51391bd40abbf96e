#include "table/tuned_entry.hpp"

#include "common/failure.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"

namespace arbiter {

TableEntry tuned_entry(const TuneResult& result, const arb_problem& problem, const DeviceFingerprint& device) {
  const Candidate& winner = *result.winning();
  const PluginRecord& plugin = *winner.kernel->plugin;
  TableEntry e;
  e.key = problem_key(problem);
  e.device = device.id();
  e.kernel = winner.kernel->name;
  e.plugin_version = plugin.version;
  e.build_id = plugin.build_id;
  e.runtime_version = plugin.runtime_version;
  e.plugin_sha256 = plugin.sha256;
  e.median_us = winner.stats.median * 1e6;
  e.p20_us = winner.stats.p20 * 1e6;
  e.p80_us = winner.stats.p80 * 1e6;
  e.samples = winner.stats.samples;
  e.noise = result.noise;
  if (const Candidate* second = result.second()) {
    e.runner_up = second->kernel->name;
    e.margin = result.margin;
  }
  e.verified = winner.gated && winner.verdict.passed;  // only a verdict of the gate counts
  e.verification = winner.verdict.summary();
  try {
    e.workspace_bytes = static_cast<int64_t>(kernel_workspace_bytes(*winner.kernel, problem));
  } catch (const Failure&) {  // informational only: the dispatcher sizes it again
  }
  e.when = utc_now();
  return e;
}

}  // namespace arbiter
