// `arbiter tune` and arb_tune: every problem's candidates verified and timed by the tuner,
// the winner of each written to a tuning table as it is known. One implementation: the CLI
// prints text from the results, the C ABI hands out their JSON (tuning_json).
#pragma once

#include "context.hpp"
#include "tune/shape_suite.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace arbiter {

struct TuneRequest {
  // Where the winners go: nullopt, the context's own table (table.path; the context's
  // dispatch uses them at once), or none without one; "", nowhere (reported only); a path,
  // that file (locked, merged, atomic; the incumbents are its valid entries), this context's
  // index unchanged unless it is the context's own table file.
  std::optional<std::string> table_path;
  // Before each problem (done = problems finished) and once at the end (done == total), with
  // the seconds since the start; false stops before the next problem (the run is cancelled,
  // and no further call is made).
  std::function<bool(size_t done, size_t total, double elapsed)> progress;
};

struct TunedProblem {
  const SuiteProblem* problem = nullptr;  // in the caller's list
  std::string key;                        // problem_key
  TuneResult result;
};

struct TuneRun {
  std::string table;   // the file written, "" if none
  std::string method;  // the last problem's (the tuner's method), "" if none was tuned
  double elapsed = 0;  // seconds
  bool cancelled = false;
  std::vector<TunedProblem> results;
};

// Tunes `problems` in order; `on_tuned`, if set, hears each result as it is known (after its
// entry is written). Throws Failure: ARB_ERR_TABLE if the context's table is unusable
// (context.table_error()) and it is the destination, or a table cannot be read or written.
TuneRun tune_problems(Context& context, const std::vector<SuiteProblem>& problems, const TuneRequest& request,
                      const std::function<void(const TunedProblem&)>& on_tuned = {});

// {"method", "table", "elapsed_s", "cancelled", "results": [{"problem", "key", "origin",
//  "winner", "median_s", "runner_up", "margin", "noise", "kept_incumbent", "candidates": [{"kernel",
//  "status", "verdict", "gated", "median_s", "p20_s", "p80_s", "samples"}], "notes"}]} (docs/c-api.md).
std::string tuning_json(const TuneRun& run);

}  // namespace arbiter
