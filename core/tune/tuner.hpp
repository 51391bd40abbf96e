// The tuner (docs/architecture.md, "Measurement"): for one problem, every kernel that supports it and passes
// the verification gate is timed, and the fastest by more than the noise wins.
//  1. warm-up launches (first-use costs stay out);
//  2. screening: a few samples each, candidates slower than screen_factor x the best drop;
//  3. measurement: survivors sampled round-robin until the time budget is spent and each
//     has at least min_samples; every sample is a batch of launches, each launch on the
//     next of several buffer sets whose total exceeds the last-level cache (cache = "cold");
//  4. the top candidates are re-timed interleaved; their medians decide;
//  5. the incumbent (the table's entry, when retuning) is kept unless beaten by more than
//     the measured noise: max over the two of (p80 - p20) / (2 median), at least 1%;
//  6. a winner more than 10x faster than the vendor kernel, or above 95% of the measured
//     copy bandwidth (row ops, cold cache), is re-verified before it may win.
// On the SIMT emulator only the gate runs: the first verified kernel wins, untimed.
#pragma once

#include "config/config.hpp"
#include "device/device.hpp"
#include "plugin/kernel_registry.hpp"
#include "tune/timing_stats.hpp"
#include "verify/verification_gate.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace arbiter {

struct Candidate {
  const KernelRecord* kernel = nullptr;
  std::string status;  // "measured", or why it was not
  Verdict verdict;
  bool gated = true;  // false: ran without a verdict (the oracle, or a plugin trusted by plugins.trust)
  bool measured = false;
  TimingStats stats;
};

struct TuneResult {
  std::vector<Candidate> candidates;
  int winner = -1;     // index into candidates; -1: nothing could run the problem
  int runner_up = -1;  // the second-fastest candidate (measured, else screened out), or -1
  const Candidate* winning() const { return winner >= 0 ? &candidates[static_cast<size_t>(winner)] : nullptr; }
  const Candidate* second() const { return runner_up >= 0 ? &candidates[static_cast<size_t>(runner_up)] : nullptr; }
  double margin = 0;                     // runner_up median / winner median - 1
  double noise = 0;
  bool kept_incumbent = false;
  std::string method;                    // timer, cache policy, samples: for reports
  double seconds = 0;                    // how long tuning took
  std::vector<std::string> notes;        // suspicious results and what happened to them
};

// Told, before the tuner runs a kernel, which one and for what ("verify", "warm-up",
// "time"): a benchmark that must outlive a kernel that faults or hangs records it there.
using TuneObserver = std::function<void(const KernelRecord& kernel, const char* phase)>;

class Tuner {
 public:
  Tuner(const Devices& devices, const KernelRegistry& registry, VerificationGate& gate, const TuneConfig& config);
  // Throws Failure(ARB_ERR_UNSUPPORTED) if the problem's device is not available.
  TuneResult tune(const arb_problem& problem, const KernelRecord* incumbent);
  void set_observer(TuneObserver observer) { observer_ = std::move(observer); }
  // measure_copy_bandwidth (copy_bandwidth.hpp), measured once per device: the floor of
  // step 6, and the number reports hold the row ops against.
  double copy_bandwidth(Device& device);

 private:

  const Devices& devices_;
  const KernelRegistry& registry_;
  VerificationGate& gate_;
  TuneConfig config_;
  TuneObserver observer_;
  std::map<const Device*, double> copy_bandwidth_;
};

}  // namespace arbiter
