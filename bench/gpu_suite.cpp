// arbiter_bench_gpu --suite=FILE [--suite=FILE ...] --out=DIR [--table=PATH] [--budget-ms=N]
//                   [--deadline-s=S]
//
// The GPU benchmark of bench/gpu-check.sh. On CUDA device 0, in one run, so that every
// ratio compares numbers measured side by side:
//   copy bandwidth  a device-to-device copy of 1 GiB: (bytes read + bytes written) / time,
//                   median of 10; the floor the row ops are held against;
//   suite shapes    every problem of the suites moved to the GPU and tuned: every kernel
//                   that supports it is verified by the gate, then timed by the tuner
//                   (DESIGN.md section 5: warm-up, screening, median of >= 20 samples over
//                   buffers rotated past L2, the top 3 re-timed interleaved) with cuBLASLt's
//                   heuristic as the incumbent, so the winner must beat it by more than
//                   the measured noise. Reported per shape: each plugin's best median, the
//                   winner, TFLOP/s (gemm) or GB/s and % of copy bandwidth (row ops), and
//                   the speedup over cuBLASLt's heuristic. With --table the winners are
//                   written to the tuning table;
//   dispatch cost   for the suite kernel closest to 10 us: back-to-back launches through
//                   Context::run (selection-cache hit, workspace, launch) against the same
//                   kernel's launch pointer with the same operands, interleaved, 30 samples
//                   of 200 launches each timed with events.
// Problems found in several suites run once. DIR/gpu-bench.md (each number with its
// definition) and DIR/gpu-bench.csv are rewritten after every problem, so a run stopped
// early keeps what it measured; past --deadline-s no new problem starts. The short table is
// printed last. Exit 0 when every bar holds, 1 when one does not or a problem failed, 2 when
// nothing could run.
#include "context.hpp"
#include "device/device_operands.hpp"
#include "device/problem_buffers.hpp"
#include "dispatch/problem.hpp"
#include "dispatch/problem_cost.hpp"
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
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace arbiter;

namespace {

constexpr const char* kBaseline = "cublaslt.heuristic";

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

// Device-to-device copy of 1 GiB; bytes read plus bytes written per second.
double copy_bandwidth(Device& device) {
  const size_t bytes = size_t(1) << 30;
  DeviceMemory a = device.allocate(bytes), b = device.allocate(bytes);
  device.fill(a.data(), 0x3f800000u, bytes, nullptr);
  const auto timer = device.timer();
  device.copy(b.data(), a.data(), bytes, nullptr);  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < 10; ++i) {
    timer->start(nullptr);
    device.copy(b.data(), a.data(), bytes, nullptr);
    timer->stop(nullptr);
    seconds.push_back(timer->seconds());
  }
  return 2.0 * static_cast<double>(bytes) / median_of(seconds);
}

struct Row {
  std::string suite, problem, origin;
  arb_problem p{};
  std::map<std::string, double> best_of_plugin;  // plugin -> best measured median (s)
  std::map<std::string, std::string> best_kernel_of_plugin;
  double baseline = 0;  // cuBLASLt heuristic's median (s), 0 if not measured
  std::string winner, error;
  double winner_median = 0, margin = 0;
  int verified = 0, rejected = 0, refused = 0;
  bool kept_incumbent = false;
};

double speedup(const Row& r) { return r.baseline > 0 && r.winner_median > 0 ? r.baseline / r.winner_median : 0; }

std::string rate(const Row& r, double copy_bw) {
  if (r.winner_median <= 0) return "-";
  if (r.p.op == ARB_OP_GEMM) return fmt::format("{:.1f} TFLOP/s", flop_count(r.p) / r.winner_median * 1e-12);
  const double bw = bytes_moved(r.p) / r.winner_median;
  return fmt::format("{:.0f} GB/s ({:.0f}% of copy)", bw * 1e-9, 100 * bw / copy_bw);
}

Row tune_one(Context& context, const std::string& suite, const SuiteProblem& sp, bool write_table) {
  Row row;
  row.suite = suite;
  row.problem = sp.text;
  row.origin = sp.origin;
  row.p = sp.parsed.problem;
  const KernelRecord* baseline = row.p.op == ARB_OP_GEMM ? context.registry().find(kBaseline) : nullptr;
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

struct DispatchCost {
  std::string problem, kernel;
  double direct = 0, dispatched = 0;            // device seconds per launch, back to back
  double direct_host = 0, dispatched_host = 0;  // host seconds to issue one launch
};

// Back-to-back launches of one problem's dispatched kernel, through Context::run and
// through the kernel's own launch pointer, interleaved.
DispatchCost dispatch_cost(Context& context, Device& device, const Row& row) {
  DispatchCost cost;
  cost.problem = row.problem;
  const arb_problem& p = row.p;
  const Selection& selection = context.dispatcher().select(p);  // warms the selection cache
  const KernelRecord& kernel = *selection.kernel;
  cost.kernel = kernel.name;
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

struct Report {
  std::string device;
  double copy_bw = 0, seconds = 0;
  int budget_ms = 0;
  std::vector<Row> rows;
  DispatchCost cost;
  std::string cost_error;

  int errors() const {
    int n = 0;
    for (const Row& r : rows) n += !r.error.empty();
    return n;
  }
  std::vector<double> gains() const {
    std::vector<double> g;
    for (const Row& r : rows)
      if (speedup(r) > 0) g.push_back(speedup(r));
    return g;
  }
  int below_baseline() const {
    int n = 0;
    for (const Row& r : rows) n += speedup(r) > 0 && speedup(r) < 1.0 && !r.kept_incumbent;
    return n;
  }
  double geomean() const {
    const std::vector<double> g = gains();
    double log_sum = 0;
    for (double x : g) log_sum += std::log(x);
    return g.empty() ? 0 : std::exp(log_sum / static_cast<double>(g.size()));
  }
  double overhead() const { return cost.direct > 0 ? cost.dispatched / cost.direct - 1 : 0; }

  static std::string us(const Row& r, const std::string& group) {
    auto it = r.best_of_plugin.find(group);
    return it == r.best_of_plugin.end() ? std::string("-") : fmt::format("{:.2f}", it->second * 1e6);
  }

  void write(const std::string& dir) const {
    std::string md = fmt::format(
        "# GPU benchmark\n\n- device: {}\n- copy bandwidth: {:.0f} GB/s (device-to-device copy of 1 GiB, bytes read "
        "+ written per second, median of 10)\n- method: every kernel verified by the gate first, then timed by the "
        "tuner with {} as the incumbent (DESIGN.md section 5); time = median seconds per launch over buffers rotated "
        "past L2; budget {} ms per problem\n- TFLOP/s = 2mnk / time; GB/s = bytes every kernel must move (inputs read "
        "once, outputs written once) / time\n- speedup = {} median / winner median, both from the same tuning run\n"
        "- run time so far: {:.0f} s, {} problems\n\n",
        device, copy_bw * 1e-9, kBaseline, budget_ms, kBaseline, seconds, rows.size());
    md += "| suite | problem | cublaslt.heuristic us | cublaslt best config us | generated best us | cuda best us | "
          "winner | winner us | rate | speedup | verified / rejected / refused |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | --- |\n";
    std::string csv = "suite,problem,plugin_or_kernel,median_us\n";
    for (const Row& r : rows) {
      if (!r.error.empty()) {
        md += fmt::format("| {} | {} | error: {} |||||||||\n", r.suite, r.problem, r.error);
        continue;
      }
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {}{} | {:.2f} | {} | {} | {} / {} / {} |\n", r.suite, r.problem,
                        us(r, kBaseline), us(r, "cublaslt"), us(r, "generated"), us(r, "cuda"), r.winner,
                        r.kept_incumbent ? " (kept)" : "", r.winner_median * 1e6, rate(r, copy_bw),
                        speedup(r) > 0 ? fmt::format("{:.3f}x", speedup(r)) : "-", r.verified, r.rejected, r.refused);
      for (const auto& [group, median] : r.best_of_plugin)
        csv += fmt::format("{},\"{}\",{},{:.3f}\n", r.suite, r.problem, r.best_kernel_of_plugin.at(group), median * 1e6);
    }
    md += fmt::format(
        "\n- geometric-mean speedup over {} (gemm shapes): {:.3f}x over {} shapes; shapes where the tuned choice is "
        "slower than the baseline beyond the noise: {}\n",
        kBaseline, geomean(), gains().size(), below_baseline());
    // The matmul ceiling of this run: the best gemm rate any kernel reached (DESIGN.md
    // section 7: measured ceilings beside the numbers).
    const Row* fastest = nullptr;
    for (const Row& r : rows)
      if (r.error.empty() && r.p.op == ARB_OP_GEMM && r.winner_median > 0 &&
          (!fastest || flop_count(r.p) / r.winner_median > flop_count(fastest->p) / fastest->winner_median))
        fastest = &r;
    if (fastest)
      md += fmt::format("- matmul rate: {:.1f} TFLOP/s, the best gemm rate of this run ({}, {})\n",
                        flop_count(fastest->p) / fastest->winner_median * 1e-12, fastest->problem, fastest->winner);
    if (cost.direct > 0)
      md += fmt::format(
          "- dispatch cost ({}, kernel {}): direct {:.2f} us, through dispatch {:.2f} us per launch ({:+.2f}%); host "
          "time to issue one launch: direct {:.2f} us, dispatch {:.2f} us. Back-to-back launches, 30 interleaved "
          "samples of 200, event-timed, median\n",
          cost.problem, cost.kernel, cost.direct * 1e6, cost.dispatched * 1e6, overhead() * 100, cost.direct_host * 1e6,
          cost.dispatched_host * 1e6);
    if (!cost_error.empty()) md += "- dispatch cost: not measured: " + cost_error + "\n";
    std::ofstream(dir + "/gpu-bench.md") << md;
    std::ofstream(dir + "/gpu-bench.csv") << csv;
  }

  void print_short_table() const {
    fmt::print("\n{:<52} {:>10} {:>10} {:>8}  {}\n", "problem", "winner us", "heur. us", "speedup", "winner");
    for (const Row& r : rows) {
      if (!r.error.empty()) {
        fmt::print("{:<52} error: {}\n", r.problem.substr(0, 52), r.error.substr(0, 80));
        continue;
      }
      fmt::print("{:<52} {:>10.2f} {:>10} {:>8}  {} ({})\n", r.problem.substr(0, 52), r.winner_median * 1e6,
                 us(r, kBaseline), speedup(r) > 0 ? fmt::format("{:.3f}x", speedup(r)) : "-", r.winner,
                 rate(r, copy_bw));
    }
    fmt::print("\ncopy bandwidth {:.0f} GB/s; geomean speedup over {} {:.3f}x ({} gemm shapes, {} below); dispatch "
               "overhead {:+.2f}% at {:.1f} us{}; {} errors; {:.0f} s\n",
               copy_bw * 1e-9, kBaseline, geomean(), gains().size(), below_baseline(), overhead() * 100,
               cost.direct * 1e6, cost_error.empty() ? "" : " (" + cost_error + ")", errors(), seconds);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();  // --deadline-s counts from here
  std::vector<std::string> suites;
  std::string out_dir, table_path;
  int budget_ms = 100;
  double deadline_s = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--suite=", 0) == 0) suites.push_back(a.substr(8));
    else if (a.rfind("--out=", 0) == 0) out_dir = a.substr(6);
    else if (a.rfind("--table=", 0) == 0) table_path = a.substr(8);
    else if (a.rfind("--budget-ms=", 0) == 0) budget_ms = std::max(10, std::atoi(a.c_str() + 12));
    else if (a.rfind("--deadline-s=", 0) == 0) deadline_s = std::atof(a.c_str() + 13);
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (suites.empty() || out_dir.empty()) {
    std::fprintf(stderr, "usage: arbiter_bench_gpu --suite=FILE [--suite=FILE ...] --out=DIR [--table=PATH] "
                         "[--budget-ms=N] [--deadline-s=S]\n");
    return 2;
  }
  try {
    std::string toml = fmt::format(
        "log_level = \"warn\"\n[plugins]\nsearch_default_paths = false\npaths = [\"{}\"]\n"
        "enable = [\"reference\", \"cublaslt\", \"generated\", \"cuda\"]\n[verify]\nallow_tf32 = false\n"
        "[tune]\nbudget_ms = {}\n",
        install_plugin_dir().string(), budget_ms);
    if (!table_path.empty()) toml += fmt::format("[table]\npath = \"{}\"\npolicy = \"tune-missing\"\n", table_path);
    Context context(parse_config(toml, "arbiter_bench_gpu", ""));
    if (context.devices().cuda == nullptr) {
      std::fprintf(stderr, "arbiter_bench_gpu: %s\n", context.devices().cuda_unavailable.c_str());
      return 2;
    }
    Device& gpu = *context.devices().cuda;
    const double copy_bw = copy_bandwidth(gpu);
    std::fprintf(stderr, "copy bandwidth: %.0f GB/s\n", copy_bw * 1e-9);

    std::vector<SuiteProblem> problems;  // every suite's, each problem once
    std::vector<std::string> problem_suites;
    std::set<std::string> seen;
    for (const std::string& path : suites) {
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

    Report report;
    report.device = gpu.fingerprint().name + " [" + gpu.fingerprint().details + "]";
    report.copy_bw = copy_bw;
    report.budget_ms = budget_ms;
    for (size_t i = 0; i < problems.size(); ++i) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::fprintf(stderr, "[%zu/%zu, %.0f s] %s\n", i + 1, problems.size(), elapsed, problems[i].text.c_str());
      Row row;
      if (deadline_s > 0 && elapsed > deadline_s) {
        row.suite = problem_suites[i];
        row.problem = problems[i].text;
        row.p = problems[i].parsed.problem;
        row.error = "not run: out of time (--deadline-s)";
      } else {
        try {
          row = tune_one(context, problem_suites[i], problems[i], !table_path.empty());
        } catch (const std::exception& e) {
          row.suite = problem_suites[i];
          row.problem = problems[i].text;
          row.p = problems[i].parsed.problem;
          row.error = e.what();
        }
      }
      report.rows.push_back(row);
      report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      report.write(out_dir);  // after every row: a run cut short still leaves its report
    }

    // The dispatch-cost kernel: the suite winner whose time is closest to 10 us.
    const Row* ten_us = nullptr;
    for (const Row& r : report.rows)
      if (r.winner_median > 0 && (!ten_us || std::abs(std::log(r.winner_median / 10e-6)) <
                                                 std::abs(std::log(ten_us->winner_median / 10e-6))))
        ten_us = &r;
    if (ten_us) {
      try {
        report.cost = dispatch_cost(context, gpu, *ten_us);
      } catch (const std::exception& e) {
        report.cost_error = e.what();
      }
    }
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    report.write(out_dir);
    report.print_short_table();
    return report.below_baseline() == 0 && report.errors() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arbiter_bench_gpu: %s\n", e.what());
    return 2;
  }
}
