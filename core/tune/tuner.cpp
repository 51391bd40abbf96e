#include "tune/tuner.hpp"

#include "common/log.hpp"
#include "device/device_operands.hpp"
#include "device/problem_buffers.hpp"
#include "common/failure.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>

namespace arbiter {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kSampleSeconds = 50e-6;  // a sample lasts at least this long (batching)
constexpr size_t kMaxSets = 8192;
constexpr size_t kMaxSetBytes = size_t(512) << 20;

TimingStats statistics(std::vector<double> samples) {
  TimingStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return samples[static_cast<size_t>(std::lround(q * static_cast<double>(samples.size() - 1)))]; };
  s.median = at(0.5);
  s.p20 = at(0.2);
  s.p80 = at(0.8);
  s.samples = static_cast<int>(samples.size());
  return s;
}

// The buffer sets launches rotate through, and how to time a batch of launches. On a GPU a
// batch is captured once into a graph and replayed (docs/architecture.md, "Measurement": kernels of a few
// microseconds are timed without the host's launch cost); a kernel whose launches cannot
// be captured is timed by direct launches on the same stream, and the method says so.
class Bench {
 public:
  Bench(Device& device, const arb_problem& problem, bool cold)
      : device_(device), problem_(problem), stream_(device.create_stream()) {
    ProblemBuffers host(problem, 1.0f, problem.has_c ? 0.5f : 0.0f, 1e-5f);
    host.randomize(42, Distribution::uniform);  // never zeros
    sets_.push_back(std::make_unique<DeviceOperands>(device, host, nullptr));
    const size_t per_set = std::max<size_t>(sets_[0]->bytes(), 1);
    size_t wanted = cold ? (2 * device.last_level_cache_bytes() + per_set - 1) / per_set : 1;
    wanted = std::clamp<size_t>(wanted, 1, std::min(kMaxSets, std::max<size_t>(1, kMaxSetBytes / per_set)));
    while (sets_.size() < wanted) sets_.push_back(std::make_unique<DeviceOperands>(device, host, nullptr));
    device.synchronize(nullptr);
  }
  ~Bench() {
    try {
      device_.synchronize(stream_);  // nothing may still run when the sets are freed
    } catch (const std::exception&) {
    }
    graphs_.clear();
    device_.destroy_stream(stream_);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  size_t set_count() const { return sets_.size(); }
  size_t total_bytes() const { return sets_.size() * sets_[0]->bytes(); }
  // Kernels timed by direct launches although the device has graphs, and why.
  const std::vector<std::string>& uncaptured() const { return uncaptured_; }

  // One direct launch, waited for: first-use costs (module loading, a library handle made on
  // this thread) happen here, outside any timing or graph capture. Throws on failure.
  void warm(const KernelRecord& kernel, DeviceMemory& workspace, size_t workspace_bytes) {
    launch(kernel, next_++ % sets_.size(), workspace, workspace_bytes);
    device_.synchronize(stream_);
  }

  // Seconds per launch over `batch` launches, rotating the sets. Throws on kernel failure.
  double sample(const KernelRecord& kernel, int64_t batch, DeviceMemory& workspace, size_t workspace_bytes) {
    auto timer = device_.timer();
    if (DeviceGraph* graph = graph_for(kernel, batch, workspace, workspace_bytes)) {
      timer->start(stream_);
      graph->launch(stream_);
      timer->stop(stream_);
      return timer->seconds() / static_cast<double>(batch);
    }
    timer->start(stream_);
    for (int64_t i = 0; i < batch; ++i) launch(kernel, next_++ % sets_.size(), workspace, workspace_bytes);
    timer->stop(stream_);
    return timer->seconds() / static_cast<double>(batch);
  }

 private:
  void launch(const KernelRecord& kernel, size_t set, DeviceMemory& workspace, size_t workspace_bytes) {
    kernel_launch(kernel, problem_, sets_[set]->operands(), workspace.data(), workspace_bytes, stream_);
  }

  // The kernel's graphs for this batch size: graph g launches sets g * batch onwards, so
  // that successive samples still rotate through every set. Built as samples ask for them
  // (at most kMaxGraphs); nullptr when the device has no graphs or capturing failed.
  struct KernelGraphs {
    int64_t batch = 0;
    std::vector<std::unique_ptr<DeviceGraph>> graphs;
    size_t next = 0;
    bool unavailable = false;
  };
  static constexpr size_t kMaxGraphs = 64;

  DeviceGraph* graph_for(const KernelRecord& kernel, int64_t batch, DeviceMemory& workspace, size_t workspace_bytes) {
    if (stream_ == nullptr) return nullptr;  // the CPU: launches are synchronous anyway
    KernelGraphs& k = graphs_[&kernel];
    if (k.unavailable) return nullptr;
    if (k.batch != batch) k = KernelGraphs{batch, {}, 0, false};
    const size_t groups = std::min(kMaxGraphs, (sets_.size() + static_cast<size_t>(batch) - 1) / static_cast<size_t>(batch));
    const size_t index = k.next++ % groups;
    if (index < k.graphs.size()) return k.graphs[index].get();
    std::string why;
    auto graph = device_.capture(
        stream_,
        [&] {
          for (int64_t i = 0; i < batch; ++i)
            launch(kernel, (index * static_cast<size_t>(batch) + static_cast<size_t>(i)) % sets_.size(), workspace,
                   workspace_bytes);
        },
        &why);
    if (graph == nullptr) {
      k.unavailable = true;
      uncaptured_.push_back(kernel.name + " (" + why + ")");
      return nullptr;
    }
    k.graphs.push_back(std::move(graph));
    return k.graphs.back().get();
  }

  Device& device_;
  arb_problem problem_;
  void* stream_;  // the tuner's own; nullptr on the CPU
  std::vector<std::unique_ptr<DeviceOperands>> sets_;
  size_t next_ = 0;
  std::map<const KernelRecord*, KernelGraphs> graphs_;
  std::vector<std::string> uncaptured_;
};

// One candidate being timed.
struct Contender {
  Candidate* candidate;
  DeviceMemory workspace;
  size_t workspace_bytes = 0;
  int64_t batch = 1;
  std::vector<double> samples;
  bool out = false;  // screened out
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
  // Device to device where the device has its own memory (a GPU), host memcpy on the CPU.
  const size_t bytes = std::max<size_t>(2 * device.last_level_cache_bytes(), size_t(64) << 20);
  DeviceMemory a = device.allocate(bytes), b = device.allocate(bytes);
  device.fill(a.data(), 0x3f800000u, bytes, nullptr);
  std::vector<double> seconds;
  for (int i = 0; i < 5; ++i) {
    auto timer = device.timer();
    timer->start(nullptr);
    device.copy(b.data(), a.data(), bytes, nullptr);
    timer->stop(nullptr);
    seconds.push_back(timer->seconds());
  }
  const double bandwidth = 2.0 * static_cast<double>(bytes) / statistics(seconds).median;  // read + write
  copy_bandwidth_[&device] = bandwidth;
  return bandwidth;
}

TuneResult Tuner::tune(const arb_problem& problem, const KernelRecord* incumbent) {
  const auto started = Clock::now();
  auto observe = [&](const KernelRecord& kernel, const char* phase) {
    if (observer_) observer_(kernel, phase);
  };
  Device& device = devices_.of(problem.device_type);
  TuneResult result;
  // Candidates: every kernel of the op on this device; the gate runs before any timing.
  for (const KernelRecord* kernel : registry_.candidates(problem.op)) {
    if (kernel->abi.device_type != problem.device_type) continue;
    Candidate c;
    c.kernel = kernel;
    std::string why;
    if (std::find(config_.exclude.begin(), config_.exclude.end(), kernel->name) != config_.exclude.end()) {
      c.status = "refused: excluded by tune.exclude";
    } else if (!kernel_supports(*kernel, problem, &why)) {
      c.status = "refused: " + why;
    } else if (gate_.tf32_refused(*kernel, problem)) {
      c.status = "refused: a TF32 kernel (verify.allow_tf32 is false)";
    } else if (gate_.gated(*kernel)) {
      observe(*kernel, "verify");
      c.verdict = gate_.verdict(*kernel, problem);
      c.status = c.verdict.passed ? "verified" : "verification " + c.verdict.summary();
    } else {  // may run without a verdict; never recorded as verified
      c.verdict.passed = true;
      c.verdict.detail = kernel->provenance == ARB_PROVENANCE_REFERENCE ? "the reference (the oracle)"
                                                                         : "not verified (verify.allow_unverified)";
      c.status = "not gated";
      c.gated = false;
    }
    result.candidates.push_back(std::move(c));
  }

  // The SIMT emulator verifies for real but has no time worth measuring: the first verified
  // kernel in heuristic order wins, untimed, and the method says so.
  if (device.emulated()) {
    for (size_t i = 0; i < result.candidates.size() && result.winner < 0; ++i)
      if (result.candidates[i].verdict.passed) result.winner = static_cast<int>(i);
    result.method = "emulated (arbiter SIMT emulator): correctness only, nothing timed; the winner is the first "
                    "verified kernel in heuristic order";
    result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return result;
  }

  std::vector<Contender> contenders;
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
  if (contenders.empty()) {
    result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return result;
  }

  const bool cold = config_.cache == "cold";
  Bench bench(device, problem, cold);
  auto run_sample = [&](Contender& t) {
    observe(*t.candidate->kernel, "time");
    try {
      t.samples.push_back(bench.sample(*t.candidate->kernel, t.batch, t.workspace, t.workspace_bytes));
      return true;
    } catch (const std::exception& e) {
      t.candidate->status = std::string("failed while timed: ") + e.what();
      t.candidate->verdict.passed = false;
      return false;
    }
  };

  // 1. Warm-up, and the batch size that makes a sample last kSampleSeconds. Candidates come
  //    in priority order, so the likely fast ones go first; one whose first launch is both
  //    over a millisecond and 10x the best first launch so far is dropped right there (an
  //    fp64 reference on a large problem would otherwise take minutes to warm up).
  double best_first = INFINITY;
  for (Contender& t : contenders) {
    if (problem.device_type != kDLCPU) {  // CUDA loads a module at its first launch
      observe(*t.candidate->kernel, "warm-up");
      try {
        bench.warm(*t.candidate->kernel, t.workspace, t.workspace_bytes);
      } catch (const std::exception& e) {
        t.candidate->status = std::string("failed while timed: ") + e.what();
        t.candidate->verdict.passed = false;
        continue;
      }
    }
    if (!run_sample(t)) continue;
    const double first = t.samples.front();
    if (first > 1e-3 && first > 10 * best_first) {
      t.candidate->status = fmt::format("screened out after one launch ({:.1f}x the best)", first / best_first);
      t.candidate->stats = statistics(t.samples);
      t.out = true;
      continue;
    }
    best_first = std::min(best_first, first);
    for (int i = 1; i < config_.warmup; ++i) run_sample(t);
    const double per_launch = t.samples.empty() ? 1e-3 : *std::min_element(t.samples.begin(), t.samples.end());
    t.batch = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(kSampleSeconds / std::max(per_launch, 1e-9))), 1, 100000);
    t.samples.clear();
  }
  auto alive = [](const Contender& t) { return !t.out && t.candidate->verdict.passed; };

  // 2. Screening.
  double best = INFINITY;
  for (Contender& t : contenders) {
    for (int i = 0; i < 3 && alive(t); ++i) run_sample(t);
    if (alive(t)) best = std::min(best, statistics(t.samples).median);
  }
  std::vector<Contender*> survivors;
  for (Contender& t : contenders) {
    if (!alive(t)) continue;
    const double median = statistics(t.samples).median;
    if (median > config_.screen_factor * best) {
      t.candidate->status = fmt::format("screened out ({:.2f}x the best)", median / best);
      t.candidate->stats = statistics(t.samples);
      t.out = true;
      continue;
    }
    survivors.push_back(&t);
  }

  // 3. Measurement: round-robin until the budget is spent and every survivor has enough.
  const double budget = config_.budget_ms * 1e-3;
  const auto measure_start = Clock::now();
  auto enough = [&] {
    for (Contender* t : survivors)
      if (alive(*t) && static_cast<int>(t->samples.size()) < config_.min_samples) return false;
    return std::chrono::duration<double>(Clock::now() - measure_start).count() >= budget;
  };
  while (!enough()) {
    bool any = false;
    for (Contender* t : survivors)
      if (alive(*t) && t->samples.size() < 10000) any |= run_sample(*t);
    if (!any) break;
  }

  // 4. Re-time the top candidates interleaved; their fresh samples decide.
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
    for (int round = 0; round < config_.min_samples; ++round)
      for (size_t i = 0; i < top; ++i)
        if (alive(*ranked[i])) run_sample(*ranked[i]);
    for (size_t i = 0; i < top; ++i) ranked[i]->candidate->stats = statistics(ranked[i]->samples);
  }
  for (Contender* t : ranked) {
    if (!alive(*t)) continue;
    t->candidate->measured = true;
    t->candidate->status = "measured";
  }

  // 5 and 6: decide, re-verifying results that look too good to be true.
  // The vendor baseline: any timed vendor kernel, screened out or not (a winner 10x faster
  // than the vendor has usually screened the vendor out).
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
      if (rate > 0.95 * copy_bandwidth(device))
        suspicion = fmt::format("{:.1f} GB/s is above 95% of the measured copy bandwidth ({:.1f} GB/s)", rate * 1e-9,
                                copy_bandwidth(device) * 1e-9);
    }
    if (!suspicion.empty() && gate_.gated(*fastest->kernel)) {
      observe(*fastest->kernel, "verify");
      fastest->verdict = gate_.reverify(*fastest->kernel, problem);
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
    break;
  }
  result.method = fmt::format(
      "{} timer, {} warm-up launches, screening at {:.1f}x, median of >= {} samples within {} ms, the top 3 "
      "re-timed interleaved; each sample a batch of launches of >= {:.0f} us{}; cache {}: {} buffer sets, {:.1f} MiB "
      "(LLC {:.1f} MiB); inputs uniform[-1,1]",
      problem.device_type == kDLCPU ? "steady_clock" : "event", config_.warmup, config_.screen_factor,
      config_.min_samples, config_.budget_ms, kSampleSeconds * 1e6,
      problem.device_type == kDLCPU ? ""
      : bench.uncaptured().empty()
          ? ", replayed as a CUDA graph"
          : fmt::format(", replayed as a CUDA graph (direct launches for {})", fmt::join(bench.uncaptured(), "; ")),
      cold ? "cold" : "warm", bench.set_count(), static_cast<double>(bench.total_bytes()) / (1 << 20),
      static_cast<double>(device.last_level_cache_bytes()) / (1 << 20));
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace arbiter
