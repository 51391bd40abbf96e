#include "table/table_merge.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace arbiter {

bool beats(const TableEntry& challenger, const TableEntry& incumbent) {
  const double noise = std::max({challenger.noise, incumbent.noise, 0.01});
  return challenger.median_us < incumbent.median_us * (1.0 - noise);
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
