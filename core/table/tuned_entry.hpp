// A tuning result as a table entry: the winner, its statistics and validators.
#pragma once

#include "table/tuning_table.hpp"
#include "tune/tuner.hpp"

namespace arbiter {

// Requires result.winning() != nullptr.
TableEntry tuned_entry(const TuneResult& result, const arb_problem& problem, const DeviceFingerprint& device);

}  // namespace arbiter
