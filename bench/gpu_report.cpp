#include "gpu_report.hpp"

#include "common/atomic_file.hpp"
#include "problem/problem_cost.hpp"
#include "problem/problem_text.hpp"

#include <fmt/format.h>
#include "arbiter_base/strict_toml.hpp"
#include "arbiter_base/text_file.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace arbiter::bench {

const Row* RunState::find(const std::string& problem) const {
  for (const Row& r : rows)
    if (r.problem == problem) return &r;
  return nullptr;
}

std::vector<std::string> RunState::excluded_kernels() const {
  std::vector<std::string> names;
  for (const Fault& f : faults)
    if (std::find(names.begin(), names.end(), f.kernel) == names.end()) names.push_back(f.kernel);
  return names;
}

int RunState::errors() const {
  int n = 0;
  for (const Row& r : rows) n += !r.error.empty();
  return n;
}

double speedup(const Row& r) { return r.baseline > 0 && r.winner_median > 0 ? r.baseline / r.winner_median : 0; }

std::vector<double> RunState::gains() const {
  std::vector<double> g;
  for (const Row& r : rows)
    if (speedup(r) > 0) g.push_back(speedup(r));
  return g;
}

int RunState::below_baseline() const {
  int n = 0;
  for (const Row& r : rows) n += speedup(r) > 0 && speedup(r) < 1.0 && !r.kept_incumbent;
  return n;
}

double RunState::geomean() const {
  const std::vector<double> g = gains();
  double log_sum = 0;
  for (double x : g) log_sum += std::log(x);
  return g.empty() ? 0 : std::exp(log_sum / static_cast<double>(g.size()));
}

// ---- the state file -------------------------------------------------------------------------

namespace {

template <typename T>
T get(const toml::table& t, std::string_view key, T fallback) {
  return t[key].value<T>().value_or(fallback);
}

toml::table map_table(const std::map<std::string, double>& m) {
  toml::table t;
  for (const auto& [k, v] : m) t.insert(k, v);
  return t;
}

toml::table map_table(const std::map<std::string, std::string>& m) {
  toml::table t;
  for (const auto& [k, v] : m) t.insert(k, v);
  return t;
}

}  // namespace

void save_state(const RunState& state, const std::string& path) {
  toml::table root{{"device", state.device},       {"copy_bandwidth", state.copy_bw},
                   {"seconds", state.seconds},     {"budget_ms", state.budget_ms},
                   {"processes", state.processes}, {"cost_error", state.cost_error}};
  toml::array rows;
  for (const Row& r : state.rows) {
    rows.push_back(toml::table{{"suite", r.suite},
                               {"problem", r.problem},
                               {"origin", r.origin},
                               {"winner", r.winner},
                               {"error", r.error},
                               {"winner_median", r.winner_median},
                               {"margin", r.margin},
                               {"baseline", r.baseline},
                               {"verified", r.verified},
                               {"rejected", r.rejected},
                               {"refused", r.refused},
                               {"kept_incumbent", r.kept_incumbent},
                               {"best", map_table(r.best_of_plugin)},
                               {"best_kernel", map_table(r.best_kernel_of_plugin)}});
  }
  root.insert("row", std::move(rows));
  toml::array faults;
  for (const Fault& f : state.faults)
    faults.push_back(toml::table{{"kernel", f.kernel}, {"problem", f.problem}, {"phase", f.phase}, {"what", f.what}});
  root.insert("fault", std::move(faults));
  if (state.cost.direct > 0)
    root.insert("dispatch_cost", toml::table{{"problem", state.cost.problem},
                                             {"kernel", state.cost.kernel},
                                             {"direct", state.cost.direct},
                                             {"dispatched", state.cost.dispatched},
                                             {"direct_host", state.cost.direct_host},
                                             {"dispatched_host", state.cost.dispatched_host}});
  std::ostringstream text;
  text << "# arbiter_bench_gpu's state: what this GPU check measured so far (bench/gpu_report.hpp)\n" << root << "\n";
  write_file_atomically(path, text.str(), ARB_ERR_INTERNAL);
}

RunState load_state(const std::string& path) {
  toml::table root;
  try {
    root = parse_toml_document(read_text_file(path, "GPU check state"), path);
  } catch (const InputError& e) {
    throw std::runtime_error(e.what());
  }
  RunState s;
  s.device = get<std::string>(root, "device", "");
  s.copy_bw = get<double>(root, "copy_bandwidth", 0);
  s.seconds = get<double>(root, "seconds", 0);
  s.budget_ms = static_cast<int>(get<int64_t>(root, "budget_ms", 0));
  s.processes = static_cast<int>(get<int64_t>(root, "processes", 0));
  s.cost_error = get<std::string>(root, "cost_error", "");
  if (const toml::array* rows = root["row"].as_array()) {
    for (const toml::node& node : *rows) {
      const toml::table* t = node.as_table();
      if (t == nullptr) continue;
      Row r;
      r.suite = get<std::string>(*t, "suite", "");
      r.problem = get<std::string>(*t, "problem", "");
      r.origin = get<std::string>(*t, "origin", "");
      r.winner = get<std::string>(*t, "winner", "");
      r.error = get<std::string>(*t, "error", "");
      r.winner_median = get<double>(*t, "winner_median", 0);
      r.margin = get<double>(*t, "margin", 0);
      r.baseline = get<double>(*t, "baseline", 0);
      r.verified = static_cast<int>(get<int64_t>(*t, "verified", 0));
      r.rejected = static_cast<int>(get<int64_t>(*t, "rejected", 0));
      r.refused = static_cast<int>(get<int64_t>(*t, "refused", 0));
      r.kept_incumbent = get<bool>(*t, "kept_incumbent", false);
      if (const toml::table* best = (*t)["best"].as_table())
        for (const auto& [k, v] : *best) r.best_of_plugin[std::string(k.str())] = v.value<double>().value_or(0);
      if (const toml::table* best = (*t)["best_kernel"].as_table())
        for (const auto& [k, v] : *best)
          r.best_kernel_of_plugin[std::string(k.str())] = v.value<std::string>().value_or("");
      r.p = parse_problem(r.problem).problem;
      s.rows.push_back(std::move(r));
    }
  }
  if (const toml::array* faults = root["fault"].as_array()) {
    for (const toml::node& node : *faults) {
      const toml::table* t = node.as_table();
      if (t == nullptr) continue;
      s.faults.push_back({get<std::string>(*t, "kernel", ""), get<std::string>(*t, "problem", ""),
                          get<std::string>(*t, "phase", ""), get<std::string>(*t, "what", "")});
    }
  }
  if (const toml::table* c = root["dispatch_cost"].as_table()) {
    s.cost.problem = get<std::string>(*c, "problem", "");
    s.cost.kernel = get<std::string>(*c, "kernel", "");
    s.cost.direct = get<double>(*c, "direct", 0);
    s.cost.dispatched = get<double>(*c, "dispatched", 0);
    s.cost.direct_host = get<double>(*c, "direct_host", 0);
    s.cost.dispatched_host = get<double>(*c, "dispatched_host", 0);
  }
  return s;
}

// ---- the report -----------------------------------------------------------------------------

namespace {

std::string rate(const Row& r, double copy_bw) {
  if (r.winner_median <= 0) return "-";
  if (flop_count(r.p) > 0) return fmt::format("{:.1f} TFLOP/s", flop_count(r.p) / r.winner_median * 1e-12);
  const double bw = bytes_moved(r.p) / r.winner_median;
  return fmt::format("{:.0f} GB/s ({:.0f}% of copy)", bw * 1e-9, 100 * bw / copy_bw);
}

std::string us(const Row& r, const std::string& group) {
  auto it = r.best_of_plugin.find(group);
  return it == r.best_of_plugin.end() ? std::string("-") : fmt::format("{:.2f}", it->second * 1e6);
}

}  // namespace

void write_report(const RunState& state, const std::string& dir) {
  std::string md = fmt::format(
      "# GPU benchmark\n\n- device: {}\n- copy bandwidth: {:.0f} GB/s (the tuner's, device-to-device copy of max(2 x L2, 64 MiB), bytes read "
      "+ written per second, median of 10)\n- method: every kernel verified by the gate first, then timed by the "
      "tuner with {} as the incumbent (docs/tuning.md); time = median seconds per launch over buffers rotated "
      "past L2; budget {} ms per problem\n- TFLOP/s = 2mnk / time; GB/s = bytes every kernel must move (inputs read "
      "once, outputs written once) / time\n- speedup = {} median / winner median, both from the same tuning run\n"
      "- run time so far: {:.0f} s, {} problems, {} process(es) (a kernel that faults ends its process; the next "
      "resumes without it)\n\n",
      state.device, state.copy_bw * 1e-9, kBaseline, state.budget_ms, kBaseline, state.seconds, state.rows.size(),
      state.processes);
  md += "| suite | problem | cublaslt.heuristic us | cublaslt best config us | generated best us | cuda best us | "
        "winner | winner us | rate | speedup | verified / rejected / refused |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | --- |\n";
  std::string csv = "suite,problem,plugin_or_kernel,median_us\n";
  for (const Row& r : state.rows) {
    if (!r.error.empty()) {
      md += fmt::format("| {} | {} | error: {} |||||||||\n", r.suite, r.problem, r.error);
      continue;
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {}{} | {:.2f} | {} | {} | {} / {} / {} |\n", r.suite, r.problem,
                      us(r, kBaseline), us(r, "cublaslt"), us(r, "generated"), us(r, "cuda"), r.winner,
                      r.kept_incumbent ? " (kept)" : "", r.winner_median * 1e6, rate(r, state.copy_bw),
                      speedup(r) > 0 ? fmt::format("{:.3f}x", speedup(r)) : "-", r.verified, r.rejected, r.refused);
    for (const auto& [group, median] : r.best_of_plugin)
      csv += fmt::format("{},\"{}\",{},{:.3f}\n", r.suite, r.problem, r.best_kernel_of_plugin.at(group), median * 1e6);
  }
  md += fmt::format(
      "\n- geometric-mean speedup over {} (gemm shapes): {:.3f}x over {} shapes; shapes where the tuned choice is "
      "slower than the baseline beyond the noise: {}\n",
      kBaseline, state.geomean(), state.gains().size(), state.below_baseline());
  // The matmul ceiling of this run: the best gemm rate any kernel reached (measured
  // ceilings beside the numbers).
  const Row* fastest = nullptr;
  for (const Row& r : state.rows)
    if (r.error.empty() && flop_count(r.p) > 0 && r.winner_median > 0 &&
        (!fastest || flop_count(r.p) / r.winner_median > flop_count(fastest->p) / fastest->winner_median))
      fastest = &r;
  if (fastest)
    md += fmt::format("- matmul rate: {:.1f} TFLOP/s, the best gemm rate of this run ({}, {})\n",
                      flop_count(fastest->p) / fastest->winner_median * 1e-12, fastest->problem, fastest->winner);
  const DispatchCost& cost = state.cost;
  if (cost.direct > 0)
    md += fmt::format(
        "- dispatch cost ({}, kernel {}): direct {:.2f} us, through dispatch {:.2f} us per launch ({:+.2f}%); host "
        "time to issue one launch: direct {:.2f} us, dispatch {:.2f} us. Back-to-back launches, 30 interleaved "
        "samples of 200, event-timed, median\n",
        cost.problem, cost.kernel, cost.direct * 1e6, cost.dispatched * 1e6, state.overhead() * 100,
        cost.direct_host * 1e6, cost.dispatched_host * 1e6);
  if (!state.cost_error.empty()) md += "- dispatch cost: not measured: " + state.cost_error + "\n";
  for (const Fault& f : state.faults)
    md += fmt::format("- FAULT: kernel {} while {} of `{}`: {}; excluded from the rest of the run\n", f.kernel, f.phase,
                      f.problem, f.what);
  write_file_atomically(dir + "/gpu-bench.md", md, ARB_ERR_INTERNAL);
  write_file_atomically(dir + "/gpu-bench.csv", csv, ARB_ERR_INTERNAL);
}

void print_short_table(const RunState& state) {
  fmt::print("\n{:<52} {:>10} {:>10} {:>8}  {}\n", "problem", "winner us", "heur. us", "speedup", "winner");
  for (const Row& r : state.rows) {
    if (!r.error.empty()) {
      fmt::print("{:<52} error: {}\n", r.problem.substr(0, 52), r.error.substr(0, 80));
      continue;
    }
    fmt::print("{:<52} {:>10.2f} {:>10} {:>8}  {} ({})\n", r.problem.substr(0, 52), r.winner_median * 1e6,
               us(r, kBaseline), speedup(r) > 0 ? fmt::format("{:.3f}x", speedup(r)) : "-", r.winner,
               rate(r, state.copy_bw));
  }
  for (const Fault& f : state.faults) fmt::print("FAULT {} ({}, {}): {}\n", f.kernel, f.phase, f.problem, f.what);
  fmt::print("\ncopy bandwidth {:.0f} GB/s; geomean speedup over {} {:.3f}x ({} gemm shapes, {} below); dispatch "
             "overhead {:+.2f}% at {:.1f} us{}; {} errors; {} faults; {:.0f} s in {} process(es)\n",
             state.copy_bw * 1e-9, kBaseline, state.geomean(), state.gains().size(), state.below_baseline(),
             state.overhead() * 100, state.cost.direct * 1e6,
             state.cost_error.empty() ? "" : " (" + state.cost_error + ")", state.errors(), state.faults.size(),
             state.seconds, state.processes);
}

}  // namespace arbiter::bench
