// The bench harness: how one problem's kernels are timed, apart from the policy that picks
// among them (tuner.cpp). Buffer sets filled once with random data (never zeros), and
// scalars, drawn as the verification gate draws them (so a kernel cannot tell a timing run
// from a real call, and the tuner re-checks every timed kernel on this very data), that
// launches rotate through, past the last-level cache when the cache is to be cold; samples
// of a batch of launches timed by the device's timer.
#pragma once

#include "device/device.hpp"
#include "device/device_operands.hpp"
#include "device/problem_buffers.hpp"
#include "plugin/kernel_call.hpp"
#include "verify/verifier.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace arbiter {

inline constexpr size_t kMaxBenchSets = 8192;
inline constexpr size_t kMaxBenchSetBytes = size_t(512) << 20;

// The buffer sets launches rotate through, and how to time a batch of launches. On a GPU a
// batch is captured once into a graph and replayed (docs/architecture.md, "Measurement": kernels of a few
// microseconds are timed without the host's launch cost); a kernel whose launches cannot
// be captured is timed by direct launches on the same stream, and the method says so.
class BenchHarness {
 public:
  BenchHarness(Device& device, const arb_problem& problem, bool cold, uint64_t seed)
      : device_(device), problem_(problem), stream_(device.create_stream()), host_(make_inputs(problem, seed)) {
    const ProblemBuffers& host = host_;
    sets_.push_back(std::make_unique<DeviceOperands>(device, host, nullptr));
    const size_t per_set = std::max<size_t>(sets_[0]->bytes(), 1);
    size_t wanted = cold ? (2 * device.last_level_cache_bytes() + per_set - 1) / per_set : 1;
    wanted = std::clamp<size_t>(wanted, 1, std::min(kMaxBenchSets, std::max<size_t>(1, kMaxBenchSetBytes / per_set)));
    while (sets_.size() < wanted) sets_.push_back(std::make_unique<DeviceOperands>(device, host, nullptr));
    device.synchronize(nullptr);
  }
  ~BenchHarness() {
    try {
      device_.synchronize(stream_);  // nothing may still run when the sets are freed
    } catch (const std::exception&) {
    }
    graphs_.clear();
    device_.destroy_stream(stream_);
  }
  BenchHarness(const BenchHarness&) = delete;
  BenchHarness& operator=(const BenchHarness&) = delete;

  size_t set_count() const { return sets_.size(); }
  // The inputs every set was filled with, and what `kernel` gives for them (set 0 filled
  // again first: kernels that write an input, in place, have changed it while timed).
  const ProblemBuffers& inputs() const { return host_; }
  ProblemBuffers result_of(const KernelRecord& kernel, DeviceMemory& workspace, size_t workspace_bytes) {
    sets_[0]->upload(host_, stream_);
    launch(kernel, 0, workspace, workspace_bytes);
    device_.synchronize(stream_);
    ProblemBuffers result = host_;
    sets_[0]->download(result, stream_);
    return result;
  }
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
  static ProblemBuffers make_inputs(const arb_problem& problem, uint64_t seed) {
    const Scalars scalars = draw_scalars(problem, seed, static_cast<int>(seed % 4));
    ProblemBuffers host(problem, scalars.alpha, scalars.beta, scalars.eps);
    host.randomize(seed, seed % 2 ? Distribution::normal : Distribution::uniform);  // never zeros
    return host;
  }

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
  ProblemBuffers host_;
  std::vector<std::unique_ptr<DeviceOperands>> sets_;
  size_t next_ = 0;
  std::map<const KernelRecord*, KernelGraphs> graphs_;
  std::vector<std::string> uncaptured_;
};

}  // namespace arbiter
