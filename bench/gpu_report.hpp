// What the GPU benchmark measured, kept between the processes of one GPU check (a kernel
// that faults ends its process; the next one resumes): the state file (TOML, rewritten after
// every problem) and the report made from it (gpu-bench.md with every number's definition,
// gpu-bench.csv, the short table printed last).
#pragma once

#include <arbiter/plugin.h>

#include <map>
#include <string>
#include <vector>

namespace arbiter::bench {

inline constexpr const char* kBaseline = "cublaslt.heuristic";

// One tuned problem.
struct Row {
  std::string suite, problem, origin;  // problem: the problem text, "device=cuda" included
  arb_problem p{};                     // parsed from `problem`
  std::map<std::string, double> best_of_plugin;  // plugin (or kBaseline) -> best median (s)
  std::map<std::string, std::string> best_kernel_of_plugin;
  double baseline = 0;  // cuBLASLt heuristic's median (s), 0 if not measured
  std::string winner, error;
  double winner_median = 0, margin = 0;
  int verified = 0, rejected = 0, refused = 0;
  bool kept_incumbent = false;
};

// A kernel that faulted, hung or took its process down; it is excluded from the rest of
// the run (tune.exclude).
struct Fault {
  std::string kernel, problem, phase, what;
};

struct DispatchCost {
  std::string problem, kernel;
  double direct = 0, dispatched = 0;            // device seconds per launch, back to back
  double direct_host = 0, dispatched_host = 0;  // host seconds to issue one launch
};

struct RunState {
  std::string device;
  double copy_bw = 0;   // bytes read + written per second
  double seconds = 0;   // benchmark time so far, over all processes
  int budget_ms = 0;
  int processes = 0;    // how many processes this run took (1 + restarts)
  std::vector<Row> rows;
  std::vector<Fault> faults;
  DispatchCost cost;
  std::string cost_error;

  const Row* find(const std::string& problem) const;
  std::vector<std::string> excluded_kernels() const;
  int errors() const;
  int below_baseline() const;
  std::vector<double> gains() const;  // speedups over the baseline, gemm rows that have one
  double geomean() const;
  double overhead() const { return cost.direct > 0 ? cost.dispatched / cost.direct - 1 : 0; }
};

double speedup(const Row& r);

// The state file: written to a temporary file and renamed (a kill never leaves half of it).
void save_state(const RunState& state, const std::string& path);
RunState load_state(const std::string& path);  // throws std::runtime_error when unreadable

// DIR/gpu-bench.md and DIR/gpu-bench.csv.
void write_report(const RunState& state, const std::string& dir);
void print_short_table(const RunState& state);

}  // namespace arbiter::bench
