// Merging tuning tables (from several machines, or runs): per problem key and device the
// faster entry wins, but only by more than the noise: `from` replaces `into`'s entry when
// its median is lower by more than max(noise of either, 1%). Two entries whose validators
// differ (plugin version, build id or wrapped-library version) measured different code:
// their times are not compared, the more recent measurement wins. Entries move whole: the
// validators of one entry never mix with another's measurements.
#pragma once

#include "table/tuning_table.hpp"

#include <string>
#include <vector>

namespace arbiter {

struct MergeReport {
  int added = 0, replaced = 0, kept = 0;
  std::vector<std::string> lines;  // one per replaced or kept conflict
};

MergeReport merge_tables(TuningTable& into, const TuningTable& from);

// Does `challenger` beat `incumbent` by more than the noise?
bool beats(const TableEntry& challenger, const TableEntry& incumbent);
// Were the two measured on the same code (same plugin version, build id, wrapped library)?
bool same_validators(const TableEntry& a, const TableEntry& b);

}  // namespace arbiter
