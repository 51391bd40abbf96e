// arbiter_bench_gpu --suite=FILE [--suite=FILE ...] --out=DIR [--table=PATH] [--budget-ms=N]
//                   [--deadline-s=S] [--resume] [--dispatch-cost] [--hang-s=S]
//
// The GPU benchmark of bench/gpu-check.sh. On CUDA device 0, so that every ratio compares
// numbers measured side by side:
//   copy bandwidth  the tuner's (core/tune/copy_bandwidth.hpp): a device-to-device copy of
//                   max(2 x L2, 64 MiB), (bytes read + bytes written) / time, median of 10;
//                   the floor the row ops are held against, here and in the tuner;
//   suite shapes    every problem of the suites moved to the GPU and tuned: every kernel
//                   that supports it is verified by the gate, then timed by the tuner
//                   (docs/tuning.md: warm-up, screening, median of >= 20 samples over buffers
//                   rotated past L2, the top 3 re-timed interleaved) with cuBLASLt's
//                   heuristic as the incumbent, so the winner must beat it by more than the
//                   measured noise. Reported per shape: each plugin's best median, the winner,
//                   TFLOP/s (gemm) or GB/s and % of copy bandwidth (row ops), the speedup over
//                   cuBLASLt's heuristic. With --table the winners go to the tuning table;
//   dispatch cost   (--dispatch-cost) for the measured problem closest to 10 us: back-to-back
//                   launches through Context::run (selection-cache hit, workspace, launch)
//                   against the same kernel's launch pointer, interleaved, 30 samples of 200
//                   launches each timed with events.
// Problems found in several suites run once. Everything measured goes to DIR/gpu-bench-state.toml
// and the report made from it (DIR/gpu-bench.md, each number with its definition, and
// DIR/gpu-bench.csv), rewritten after every problem. Past --deadline-s (counted from the
// program's start) no new problem starts.
//
// Faults (bench/fault_guard.hpp): a kernel that breaks the CUDA context ends the process with
// status 3, one that hangs past --hang-s (default 60) with status 4, both named in the state
// file; --resume continues from the state file without every kernel that faulted so far (and
// without the one a crashed process was running). Other exit statuses: 0 every bar holds,
// 1 one does not or a problem failed, 2 nothing could run.
#include "context.hpp"
#include "device/device_operands.hpp"
#include "device/problem_buffers.hpp"
#include "problem/problem.hpp"
#include "fault_guard.hpp"
#include "gpu_report.hpp"
#include "plugin/plugin_search.hpp"
#include "table/tuned_entry.hpp"
#include "tune/shape_suite.hpp"
#include "tune/tuner.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

using namespace arbiter;
using namespace arbiter::bench;

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

Row tune_one(Context& context, const std::string& suite, const SuiteProblem& sp, bool write_table) {
  Row row;
  row.suite = suite;
  row.problem = sp.text;
  row.origin = sp.origin;
  row.p = sp.parsed.problem;
  const KernelRecord* baseline = context.registry().find(kBaseline);
  if (baseline != nullptr && baseline->abi.op != row.p.op) baseline = nullptr;  // the vendor gemm
  const TuneResult result = context.tuner().tune(row.p, baseline);
  for (const Candidate& c : result.candidates) {
    if (c.status.rfind("refused", 0) == 0) ++row.refused;
    else if (c.verdict.passed) ++row.verified;
    else ++row.rejected;
    if (!c.measured) continue;
    const std::string& plugin = c.kernel->plugin->name;
    // cuBLASLt's heuristic is the baseline, reported apart from its algorithm configurations.
    const std::string group = c.kernel->name == kBaseline ? kBaseline : plugin;
    if (!row.best_of_plugin.count(group) || c.stats.median < row.best_of_plugin[group]) {
      row.best_of_plugin[group] = c.stats.median;
      row.best_kernel_of_plugin[group] = c.kernel->name;
    }
    if (c.kernel->name == kBaseline) row.baseline = c.stats.median;
  }
  if (const Candidate* w = result.winning()) {
    row.winner = w->kernel->name;
    row.winner_median = w->stats.median;
    row.margin = result.margin;
    row.kept_incumbent = result.kept_incumbent;
    if (write_table) context.record(tuned_entry(result, row.p, context.devices().of(row.p.device_type).fingerprint()));
  } else {
    row.error = "no kernel both supports the problem and passes verification";
  }
  return row;
}

// Back-to-back launches of one problem's dispatched kernel, through Context::run and
// through the kernel's own launch pointer, interleaved.
DispatchCost dispatch_cost(Context& context, Device& device, const Row& row, FaultGuard& guard) {
  DispatchCost cost;
  cost.problem = row.problem;
  const arb_problem& p = row.p;
  const Selection& selection = context.dispatcher().select(p);  // warms the selection cache
  const KernelRecord& kernel = *selection.kernel;
  cost.kernel = kernel.name;
  guard.running(kernel.name, "dispatch cost", row.problem);
  ProblemBuffers host(p, 1.0f, p.has_c ? 1.0f : 0.0f, 1e-5f);
  host.randomize(11);
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  DeviceOperands operands(device, host, stream);
  DeviceMemory workspace = device.allocate(std::max<size_t>(selection.workspace_bytes, 1));
  const arb_operands& o = operands.operands();
  auto direct = [&] {
    char message[256];
    if (kernel.abi.launch(kernel.abi.ctx, &p, &o, workspace.data(), selection.workspace_bytes, stream, message,
                          sizeof message) != ARB_OK)
      throw std::runtime_error(std::string("direct launch failed: ") + message);
  };
  auto dispatched = [&] { context.run(p, o, stream); };
  const auto timer = device.timer();
  constexpr int kLaunches = 200, kSamples = 30;
  auto sample = [&](auto&& launch, double& host_seconds) {
    timer->start(stream);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) launch();
    host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kLaunches;
    timer->stop(stream);
    return timer->seconds() / kLaunches;
  };
  double ignored = 0;
  sample(direct, ignored);  // warm-up, both ways
  sample(dispatched, ignored);
  std::vector<double> d, s, dh, sh;
  for (int i = 0; i < kSamples; ++i) {
    double host_seconds = 0;
    d.push_back(sample(direct, host_seconds));
    dh.push_back(host_seconds);
    s.push_back(sample(dispatched, host_seconds));
    sh.push_back(host_seconds);
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  cost.direct = median_of(d);
  cost.dispatched = median_of(s);
  cost.direct_host = median_of(dh);
  cost.dispatched_host = median_of(sh);
  return cost;
}

struct Options {
  std::vector<std::string> suites;
  std::string out_dir, table_path;
  int budget_ms = 100;
  double deadline_s = 0, hang_s = 60;
  bool resume = false, dispatch_cost = false;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--suite=", 0) == 0) o.suites.push_back(a.substr(8));
    else if (a.rfind("--out=", 0) == 0) o.out_dir = a.substr(6);
    else if (a.rfind("--table=", 0) == 0) o.table_path = a.substr(8);
    else if (a.rfind("--budget-ms=", 0) == 0) o.budget_ms = std::max(10, std::atoi(a.c_str() + 12));
    else if (a.rfind("--deadline-s=", 0) == 0) o.deadline_s = std::atof(a.c_str() + 13);
    else if (a.rfind("--hang-s=", 0) == 0) o.hang_s = std::max(5.0, std::atof(a.c_str() + 9));
    else if (a == "--resume") o.resume = true;
    else if (a == "--dispatch-cost") o.dispatch_cost = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return false;
    }
  }
  return (!o.suites.empty() || o.dispatch_cost) && !o.out_dir.empty();
}

std::string toml_string_array(const std::vector<std::string>& items) {
  std::string s = "[";
  for (const std::string& item : items) s += fmt::format("{}\"{}\"", s.size() > 1 ? ", " : "", item);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();  // --deadline-s counts from here
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr, "usage: arbiter_bench_gpu --suite=FILE [--suite=FILE ...] --out=DIR [--table=PATH] "
                         "[--budget-ms=N] [--deadline-s=S] [--resume] [--dispatch-cost] [--hang-s=S]\n");
    return 2;
  }
  const std::string state_path = options.out_dir + "/gpu-bench-state.toml";
  const std::string journal_path = options.out_dir + "/gpu-bench-journal.txt";
  try {
    std::filesystem::create_directories(options.out_dir);
    RunState state;
    if (options.resume && std::filesystem::exists(state_path)) state = load_state(state_path);
    if (options.resume)
      if (std::optional<Fault> f = FaultGuard::previous(journal_path)) {
        std::fprintf(stderr, "arbiter_bench_gpu: the last process ended while %s ran (%s of '%s'); excluded now\n",
                     f->kernel.c_str(), f->phase.c_str(), f->problem.c_str());
        state.faults.push_back(*f);
      }
    const double seconds_before = state.seconds;
    ++state.processes;
    state.budget_ms = options.budget_ms;
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };

    std::string toml = fmt::format(
        "log_level = \"warn\"\n[plugins]\nsearch_default_paths = false\npaths = [\"{}\"]\n"
        "enable = [\"reference\", \"cublaslt\", \"generated\", \"cuda\"]\n[verify]\nallow_tf32 = false\n"
        "[tune]\nbudget_ms = {}\nexclude = {}\n",
        install_plugin_dir().string(), options.budget_ms, toml_string_array(state.excluded_kernels()));
    if (!options.table_path.empty())
      toml += fmt::format("[table]\npath = \"{}\"\npolicy = \"tune-missing\"\n", options.table_path);
    Context context(parse_config(toml, "arbiter_bench_gpu", ""));
    if (context.devices().cuda == nullptr) {
      std::fprintf(stderr, "arbiter_bench_gpu: %s\n", context.devices().cuda_unavailable.c_str());
      return 2;
    }
    Device& gpu = *context.devices().cuda;
    state.device = gpu.fingerprint().name + " [" + gpu.fingerprint().details + "]";
    if (state.copy_bw <= 0) state.copy_bw = context.tuner().copy_bandwidth(gpu);  // the tuner's own floor
    std::fprintf(stderr, "copy bandwidth: %.0f GB/s\n", state.copy_bw * 1e-9);

    FaultGuard guard(journal_path, options.hang_s);
    auto save = [&] {
      state.seconds = seconds_before + elapsed();
      save_state(state, state_path);
      write_report(state, options.out_dir);
    };
    // A broken device: record the kernel that broke it, keep what was measured, and end the
    // process (nothing more can run in this CUDA context).
    auto stop_if_broken = [&] {
      std::optional<Fault> f = guard.check_device();
      if (!f) return;
      std::fprintf(stderr, "arbiter_bench_gpu: FAULT: %s (%s of '%s'): %s\n", f->kernel.c_str(), f->phase.c_str(),
                   f->problem.c_str(), f->what.c_str());
      state.faults.push_back(*f);
      save();
      std::fflush(nullptr);
      std::_Exit(3);
    };
    std::string current_problem;
    context.tuner().set_observer([&](const KernelRecord& kernel, const char* phase) {
      stop_if_broken();  // what ran before this kernel broke the device
      guard.running(kernel.name, phase, current_problem);
    });

    std::vector<SuiteProblem> problems;  // every suite's, each problem once
    std::vector<std::string> problem_suites;
    std::set<std::string> seen;
    for (const std::string& path : options.suites) {
      const ShapeSuite suite = load_suite(path);
      for (SuiteProblem sp : suite.problems) {
        sp.parsed.problem.device_type = kDLCUDA;
        sp.parsed.problem.device_id = 0;
        sp.text += " device=cuda";
        if (!seen.insert(problem_key(sp.parsed.problem)).second) continue;
        problems.push_back(sp);
        problem_suites.push_back(suite.name);
      }
    }

    int not_run = 0;
    for (size_t i = 0; i < problems.size(); ++i) {
      const SuiteProblem& sp = problems[i];
      if (state.find(sp.text) != nullptr) continue;  // measured by an earlier process
      if (options.deadline_s > 0 && elapsed() > options.deadline_s) {
        ++not_run;
        continue;
      }
      std::fprintf(stderr, "[%zu/%zu, %.0f s] %s\n", i + 1, problems.size(), elapsed(), sp.text.c_str());
      current_problem = sp.text;
      Row row;
      try {
        row = tune_one(context, problem_suites[i], sp, !options.table_path.empty());
      } catch (const std::exception& e) {
        row.suite = problem_suites[i];
        row.problem = sp.text;
        row.p = sp.parsed.problem;
        row.error = e.what();
      }
      stop_if_broken();  // the last kernel of this problem
      guard.idle();
      state.rows.push_back(row);
      save();  // after every row: a run cut short still leaves its report
    }
    if (not_run > 0) std::fprintf(stderr, "arbiter_bench_gpu: %d problems not run (--deadline-s)\n", not_run);

    // The dispatch-cost kernel: the measured winner whose time is closest to 10 us.
    if (options.dispatch_cost && state.cost.direct <= 0) {
      const Row* ten_us = nullptr;
      for (const Row& r : state.rows)
        if (r.winner_median > 0 && (!ten_us || std::abs(std::log(r.winner_median / 10e-6)) <
                                                   std::abs(std::log(ten_us->winner_median / 10e-6))))
          ten_us = &r;
      if (ten_us) {
        try {
          state.cost = dispatch_cost(context, gpu, *ten_us, guard);
          state.cost_error.clear();
        } catch (const std::exception& e) {
          state.cost_error = e.what();
        }
        stop_if_broken();
        guard.idle();
      } else {
        state.cost_error = "no measured problem";
      }
      save();
    }
    save();
    print_short_table(state);
    if (not_run > 0) fmt::print("{} problems of these suites not run: out of time (--deadline-s)\n", not_run);
    return state.below_baseline() == 0 && state.errors() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arbiter_bench_gpu: %s\n", e.what());
    return 2;
  }
}
