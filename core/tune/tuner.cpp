#include "tune/tuner.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "tune/bench_harness.hpp"
#include "verify/accuracy.hpp"
#include "tune/copy_bandwidth.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>

namespace arbiter {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kSampleSeconds = 50e-6;  // a sample lasts at least this long (batching)

// One candidate being timed.
struct Contender {
  Candidate* candidate;
  DeviceMemory workspace;
  size_t workspace_bytes = 0;
  int64_t batch = 1;
  std::vector<double> samples;
  bool out = false;  // screened out
};

// One tuning of one problem: the steps of Tuner::tune (tuner.hpp) over shared state.
class TuningRun {
 public:
  TuningRun(const arb_problem& problem, const KernelRecord* incumbent, Device& device, const TuneConfig& config,
            VerificationGate& gate, const TuneObserver& observer, Tuner& tuner, TuneResult& result)
      : problem(problem), incumbent(incumbent), device(device), config(config), gate(gate), observer(observer),
        tuner(tuner), result(result), cold(config.cache == "cold") {}

  // 0. Candidates: every kernel of the op on this device; the gate runs before any timing.
  void gather(const KernelRegistry& registry) {
    for (const KernelRecord* kernel : registry.candidates(problem.op)) {
      if (kernel->abi.device_type != problem.device_type) continue;
      Candidate c;
      c.kernel = kernel;
      std::string why;
      if (std::find(config.exclude.begin(), config.exclude.end(), kernel->name) != config.exclude.end()) {
        c.status = "refused: excluded by tune.exclude";
      } else if (!kernel_supports(*kernel, problem, &why)) {
        c.status = "refused: " + why;
      } else if (const std::optional<std::string> quarantine = gate.quarantined(*kernel)) {
        c.status = "refused: quarantined: " + *quarantine;
      } else if (gate.tf32_refused(*kernel, problem)) {
        c.status = "refused: a TF32 kernel (verify.allow_tf32 is false)";
      } else if (gate.gated(*kernel)) {
        observe(*kernel, "verify");
        c.verdict = gate.verdict(*kernel, problem);
        c.status = c.verdict.passed ? "verified" : "verification " + c.verdict.summary();
      } else {  // may run without a verdict; never recorded as verified
        c.verdict.passed = true;
        c.verdict.detail = kernel->plugin->trust == ARB_PLUGIN_TRUST_ORACLE ? "the reference (the oracle)"
                           : kernel->plugin->trust == ARB_PLUGIN_TRUST_HOST
                               ? "the chain of single-op calls, each step's kernel gated"
                               : "not verified (trusted by plugins.trust)";
        c.status = "not gated";
        c.gated = false;
      }
      result.candidates.push_back(std::move(c));
    }
  }

  // The SIMT emulator verifies for real but has no time worth measuring: the first verified
  // kernel in heuristic order wins, untimed, and the method says so.
  void pick_first_verified() {
    for (size_t i = 0; i < result.candidates.size() && result.winner < 0; ++i)
      if (result.candidates[i].verdict.passed) result.winner = static_cast<int>(i);
    result.method = "emulated (arbiter SIMT emulator): correctness only, nothing timed; the winner is the first "
                    "verified kernel in heuristic order";
  }

  // The verified candidates with their workspace, and the harness. False if there are none.
  bool prepare() {
    for (Candidate& c : result.candidates) {
      if (!c.verdict.passed) continue;
      Contender t;
      t.candidate = &c;
      try {
        t.workspace_bytes = kernel_workspace_bytes(*c.kernel, problem);
      } catch (const Failure& e) {
        c.status = e.what();
        continue;
      }
      if (t.workspace_bytes > 0) t.workspace = device.allocate(t.workspace_bytes);
      contenders.push_back(std::move(t));
    }
    if (contenders.empty()) return false;
    bench.emplace(device, problem, cold, gate.draw_seed());
    return true;
  }

  // A composite's chain dispatches its steps: the first launches on each buffer set select them
  // and have their first calls checked against the oracle (verify.first_calls_checked), so it
  // is warmed past those before its first launch is compared with the others'.
  bool warm_chain(Contender& t) {
    observe(*t.candidate->kernel, "warm-up");
    try {
      const size_t launches = bench->set_count() * static_cast<size_t>(gate.first_calls_checked() + 1);
      for (size_t i = 0; i < launches; ++i) bench->warm(*t.candidate->kernel, t.workspace, t.workspace_bytes);
      return true;
    } catch (const std::exception& e) {
      t.candidate->status = std::string("failed while timed: ") + e.what();
      t.candidate->verdict.passed = false;
      return false;
    }
  }

  // 1. Warm-up, and the batch size that makes a sample last kSampleSeconds. Candidates come
  //    in priority order, so the likely fast ones go first; one whose first launch is both
  //    over a millisecond and 10x the best first launch so far is dropped right there (an
  //    fp64 reference on a large problem would otherwise take minutes to warm up).
  void warm_up() {
    double best_first = INFINITY;
    for (Contender& t : contenders) {
      if (problem.device_type != kDLCPU) {  // CUDA loads a module at its first launch
        observe(*t.candidate->kernel, "warm-up");
        try {
          bench->warm(*t.candidate->kernel, t.workspace, t.workspace_bytes);
        } catch (const std::exception& e) {
          t.candidate->status = std::string("failed while timed: ") + e.what();
          t.candidate->verdict.passed = false;
          continue;
        }
      }
      if (t.candidate->kernel->plugin->trust == ARB_PLUGIN_TRUST_HOST && !warm_chain(t)) continue;
      if (!run_sample(t)) continue;
      const double first = t.samples.front();
      if (first > 1e-3 && first > 10 * best_first) {
        t.candidate->status = fmt::format("screened out after one launch ({:.1f}x the best)", first / best_first);
        t.candidate->stats = statistics(t.samples);
        t.out = true;
        continue;
      }
      best_first = std::min(best_first, first);
      for (int i = 1; i < config.warmup; ++i) run_sample(t);
      const double per_launch = t.samples.empty() ? 1e-3 : *std::min_element(t.samples.begin(), t.samples.end());
      t.batch = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(kSampleSeconds / std::max(per_launch, 1e-9))), 1, 100000);
      t.samples.clear();
    }
  }

  // 2. Screening.
  void screen() {
    double best = INFINITY;
    for (Contender& t : contenders) {
      for (int i = 0; i < 3 && alive(t); ++i) run_sample(t);
      if (alive(t)) best = std::min(best, statistics(t.samples).median);
    }
    for (Contender& t : contenders) {
      if (!alive(t)) continue;
      const double median = statistics(t.samples).median;
      if (median > config.screen_factor * best) {
        t.candidate->status = fmt::format("screened out ({:.2f}x the best)", median / best);
        t.candidate->stats = statistics(t.samples);
        t.out = true;
        continue;
      }
      survivors.push_back(&t);
    }
  }

  // 3. Measurement: round-robin until the budget is spent and every survivor has enough.
  void measure() {
    const double budget = config.budget_ms * 1e-3;
    const auto measure_start = Clock::now();
    auto enough = [&] {
      for (Contender* t : survivors)
        if (alive(*t) && static_cast<int>(t->samples.size()) < config.min_samples) return false;
      return std::chrono::duration<double>(Clock::now() - measure_start).count() >= budget;
    };
    while (!enough()) {
      bool any = false;
      for (Contender* t : survivors)
        if (alive(*t) && t->samples.size() < 10000) any |= run_sample(*t);
      if (!any) break;
    }
  }

  // 4. Re-time the top candidates interleaved; their fresh samples decide.
  void retime_top() {
    std::vector<Contender*> ranked;
    for (Contender* t : survivors)
      if (alive(*t)) ranked.push_back(t);
    std::sort(ranked.begin(), ranked.end(), [](const Contender* a, const Contender* b) {
      return statistics(a->samples).median < statistics(b->samples).median;
    });
    for (Contender* t : ranked) t->candidate->stats = statistics(t->samples);
    const size_t top = std::min<size_t>(ranked.size(), 3);
    if (top > 1) {
      for (size_t i = 0; i < top; ++i) ranked[i]->samples.clear();
      for (int round = 0; round < config.min_samples; ++round)
        for (size_t i = 0; i < top; ++i)
          if (alive(*ranked[i])) run_sample(*ranked[i]);
      for (size_t i = 0; i < top; ++i) ranked[i]->candidate->stats = statistics(ranked[i]->samples);
    }
    for (Contender* t : ranked) {
      if (!alive(*t)) continue;
      t->candidate->measured = true;
      t->candidate->status = "measured";
    }
  }

  // 5 and 6: decide, re-verifying results that look too good to be true.
  // The vendor baseline: any timed vendor kernel, screened out or not (a winner 10x faster
  // than the vendor has usually screened the vendor out).
  void decide() {
    check_on_timed_data();
    const Candidate* vendor = nullptr;
    for (const Candidate& c : result.candidates)
      if (c.stats.samples > 0 && c.kernel->provenance == ARB_PROVENANCE_VENDOR &&
          (!vendor || c.stats.median < vendor->stats.median))
        vendor = &c;
    for (;;) {
      std::vector<Candidate*> measured;
      for (Candidate& c : result.candidates)
        if (c.measured) measured.push_back(&c);
      std::sort(measured.begin(), measured.end(),
                [](const Candidate* a, const Candidate* b) { return a->stats.median < b->stats.median; });
      if (measured.empty()) break;
      Candidate* fastest = measured[0];
      std::string suspicion;
      if (vendor && fastest != vendor && fastest->stats.median * 10 < vendor->stats.median)
        suspicion = fmt::format("more than 10x faster than the vendor kernel {}", vendor->kernel->name);
      if (flop_count(problem) == 0 && cold && fastest->stats.median > 0) {  // bound by memory
        const double rate = bytes_moved(problem) / fastest->stats.median;
        if (rate > 0.95 * tuner.copy_bandwidth(device))
          suspicion = fmt::format("{:.1f} GB/s is above 95% of the measured copy bandwidth ({:.1f} GB/s)", rate * 1e-9,
                                  tuner.copy_bandwidth(device) * 1e-9);
      }
      if (!suspicion.empty() && gate.gated(*fastest->kernel)) {
        observe(*fastest->kernel, "verify");
        fastest->verdict = gate.reverify(*fastest->kernel, problem);
        result.notes.push_back(fmt::format("{}: {}; re-verified: {}", fastest->kernel->name, suspicion,
                                           fastest->verdict.summary()));
        if (!fastest->verdict.passed) {
          fastest->measured = false;
          fastest->status = "verification " + fastest->verdict.summary() + " (re-verified: suspiciously fast)";
          continue;
        }
      } else if (!suspicion.empty()) {
        result.notes.push_back(fmt::format("{}: {} (not gated)", fastest->kernel->name, suspicion));
      }
      auto index = [&](const Candidate* c) { return c ? static_cast<int>(c - result.candidates.data()) : -1; };
      const Candidate* winner = fastest;
      // The runner-up: the next measured candidate, else the fastest screened-out one.
      const Candidate* runner_up = measured.size() > 1 ? measured[1] : nullptr;
      if (runner_up == nullptr)
        for (const Candidate& c : result.candidates)
          if (&c != fastest && c.stats.samples > 0 && c.verdict.passed &&
              (runner_up == nullptr || c.stats.median < runner_up->stats.median))
            runner_up = &c;
      result.noise = std::max(fastest->stats.spread(), 0.01);
      for (Candidate* c : measured) {
        if (incumbent == nullptr || c->kernel != incumbent || c == fastest) continue;
        result.noise = measured_noise(fastest->stats, c->stats);
        if (incumbent_stays(c->stats, fastest->stats)) {
          winner = c;  // not beaten by more than the noise: the incumbent stays
          runner_up = fastest;
          result.kept_incumbent = true;
        }
      }
      result.winner = index(winner);
      result.runner_up = index(runner_up);
      if (runner_up) result.margin = runner_up->stats.median / winner->stats.median - 1.0;
      return;
    }
  }

  void describe_method() {
    result.method = fmt::format(
        "{} timer, {} warm-up launches, screening at {:.1f}x, median of >= {} samples within {} ms, the top 3 "
        "re-timed interleaved; each sample a batch of launches of >= {:.0f} us{}; cache {}: {} buffer sets, {:.1f} MiB "
        "(LLC {:.1f} MiB); inputs and scalars drawn as the gate draws them, every timed kernel checked on them",
        problem.device_type == kDLCPU ? "steady_clock" : "event", config.warmup, config.screen_factor,
        config.min_samples, config.budget_ms, kSampleSeconds * 1e6,
        problem.device_type == kDLCPU ? ""
        : bench->uncaptured().empty()
            ? ", replayed as a CUDA graph"
            : fmt::format(", replayed as a CUDA graph (direct launches for {})", fmt::join(bench->uncaptured(), "; ")),
        cold ? "cold" : "warm", bench->set_count(), static_cast<double>(bench->total_bytes()) / (1 << 20),
        static_cast<double>(device.last_level_cache_bytes()) / (1 << 20));
  }

  // Every timed kernel that is gated is checked on the data and scalars it was timed on: a
  // kernel that is right on the gate's runs and wrong on the tuner's loses its place.
  void check_on_timed_data() {
    const KernelRecord* reference = gate.oracle(problem.op);
    if (reference == nullptr) return;
    std::optional<ProblemBuffers> expected;
    for (Contender& t : contenders) {
      Candidate& c = *t.candidate;
      if (!c.measured || !c.gated) continue;
      try {
        if (!expected) expected = reference_answer(*reference, bench->inputs());
        const ProblemBuffers result = bench->result_of(*c.kernel, t.workspace, t.workspace_bytes);
        const double tolerance = tolerance_for(*c.kernel, problem);
        const Comparison cmp = compare_with_reference(*reference, bench->inputs(), result, *expected, tolerance);
        if (cmp.accepted(tolerance)) continue;
        c.status = fmt::format("wrong on the data it was timed on (relative norm error {:.3g})", cmp.error);
      } catch (const std::exception& e) {
        c.status = std::string("failed on the data it was timed on: ") + e.what();
      }
      c.measured = false;
      c.verdict.passed = false;
      c.verdict.failed_checks.push_back("accuracy");
      c.verdict.detail = "accuracy: " + c.status;
      gate.remember(*c.kernel, problem, c.verdict);
    }
  }

 private:
  void observe(const KernelRecord& kernel, const char* phase) {
    if (observer) observer(kernel, phase);
  }
  bool run_sample(Contender& t) {
    observe(*t.candidate->kernel, "time");
    try {
      t.samples.push_back(bench->sample(*t.candidate->kernel, t.batch, t.workspace, t.workspace_bytes));
      return true;
    } catch (const std::exception& e) {
      t.candidate->status = std::string("failed while timed: ") + e.what();
      t.candidate->verdict.passed = false;
      return false;
    }
  }
  static bool alive(const Contender& t) { return !t.out && t.candidate->verdict.passed; }

  const arb_problem& problem;
  const KernelRecord* incumbent;
  Device& device;
  const TuneConfig& config;
  VerificationGate& gate;
  const TuneObserver& observer;
  Tuner& tuner;
  TuneResult& result;
  const bool cold;
  std::vector<Contender> contenders;
  std::optional<BenchHarness> bench;
  std::vector<Contender*> survivors;
};

}  // namespace


double measured_noise(const TimingStats& a, const TimingStats& b) {
  return std::max({a.spread(), b.spread(), 0.01});
}

bool incumbent_stays(const TimingStats& incumbent, const TimingStats& challenger) {
  return (incumbent.median - challenger.median) / incumbent.median <= measured_noise(incumbent, challenger);
}

Tuner::Tuner(const Devices& devices, const KernelRegistry& registry, VerificationGate& gate, const TuneConfig& config)
    : devices_(devices), registry_(registry), gate_(gate), config_(config) {}

double Tuner::copy_bandwidth(Device& device) {
  if (auto it = copy_bandwidth_.find(&device); it != copy_bandwidth_.end()) return it->second;
  const double bandwidth = measure_copy_bandwidth(device);
  copy_bandwidth_[&device] = bandwidth;
  return bandwidth;
}

TuneResult Tuner::tune(const arb_problem& problem, const KernelRecord* incumbent) {
  const auto started = Clock::now();
  Device& device = devices_.of(problem.device_type);
  TuneResult result;
  TuningRun run(problem, incumbent, device, config_, gate_, observer_, *this, result);
  run.gather(registry_);
  if (device.emulated()) {
    run.pick_first_verified();
  } else if (run.prepare()) {
    run.warm_up();
    run.screen();
    run.measure();
    run.retime_top();
    run.decide();
    run.describe_method();
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace arbiter
