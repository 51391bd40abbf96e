#include "support/table_merge.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace arbiter {

bool beats(const TableEntry& challenger, const TableEntry& incumbent) {
  const double noise = std::max({challenger.noise, incumbent.noise, 0.01});
  return challenger.median_us < incumbent.median_us * (1.0 - noise);
}

bool same_validators(const TableEntry& a, const TableEntry& b) {
  return a.plugin() == b.plugin() ? a.plugin_version == b.plugin_version && a.build_id == b.build_id &&
                                        a.runtime_version == b.runtime_version &&
                                        a.plugin_sha256 == b.plugin_sha256
                                  : true;  // different plugins: different code by design, times compare
}

MergeReport merge_tables(TuningTable& into, const TuningTable& from) {
  MergeReport report;
  for (const TableEntry& entry : from.entries()) {
    const DeviceFingerprint& device = from.devices().at(entry.device);
    const TableEntry* mine = into.find(entry.key, entry.device);
    if (mine == nullptr) {
      into.put(entry, device);
      ++report.added;
      continue;
    }
    if (!same_validators(entry, *mine)) {
      const bool newer = entry.when > mine->when;  // ISO 8601 UTC strings order by time
      report.lines.push_back(fmt::format("{} {} {} build {} ({}) over {} {} build {} ({}): different code, the newer wins: {}",
                                         newer ? "replaced by" : "kept", newer ? entry.kernel : mine->kernel,
                                         newer ? entry.plugin_version : mine->plugin_version,
                                         newer ? entry.build_id : mine->build_id, newer ? entry.when : mine->when,
                                         newer ? mine->kernel : entry.kernel,
                                         newer ? mine->plugin_version : entry.plugin_version,
                                         newer ? mine->build_id : entry.build_id, newer ? mine->when : entry.when, entry.key));
      if (newer) {
        into.put(entry, device);
        ++report.replaced;
      } else {
        ++report.kept;
      }
      continue;
    }
    if (beats(entry, *mine)) {
      report.lines.push_back(fmt::format("replaced {} ({:.3g} us) by {} ({:.3g} us): {}", mine->kernel, mine->median_us,
                                         entry.kernel, entry.median_us, entry.key));
      into.put(entry, device);
      ++report.replaced;
    } else {
      if (entry.kernel != mine->kernel || entry.median_us != mine->median_us)
        report.lines.push_back(fmt::format("kept {} ({:.3g} us) over {} ({:.3g} us, not faster by more than the noise): {}",
                                           mine->kernel, mine->median_us, entry.kernel, entry.median_us, entry.key));
      ++report.kept;
    }
  }
  return report;
}

}  // namespace arbiter
