// arbiter tune --suite=FILE [--table=PATH]: verify and time every candidate of every
// problem, keep the fastest by more than the noise, write the table as results arrive, and
// print the candidates, verdicts, times, winners and margins.
#include "cli.hpp"
#include "arbiter_base/counted.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/problem.hpp"
#include "table/tuned_entry.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

namespace arbiter::cli {
namespace {

// A progress bar on a terminal (redrawn in place), plain lines otherwise.
void progress(size_t done, size_t total, double elapsed, const std::string& what) {
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0;
  if (isatty(STDERR_FILENO)) {
    const size_t width = 30, filled = total ? width * done / total : width;
    fmt::print(stderr, "\r[{}{}] {}/{}  {:.0f}s elapsed, ETA {:.0f}s  {:<60.60}", std::string(filled, '#'),
               std::string(width - filled, '.'), done, total, elapsed, eta, what);
    if (done == total) fmt::print(stderr, "\n");
  } else {
    fmt::print(stderr, "[{}/{}] {:.0f}s elapsed, ETA {:.0f}s: {}\n", done, total, elapsed, eta, what);
  }
}

std::string micros(double seconds) { return fmt::format("{:.3g} us", seconds * 1e6); }

}  // namespace

int command_tune(const Arguments& args) {
  const std::vector<SuiteProblem> problems = problems_from(args, "tune");
  const auto context = make_context(args);
  require_plugin_files(*context, "tune");
  const std::string table_path = context->config().table.path;
  if (table_path.empty())
    fmt::print(stderr, "arbiter tune: no table (--table=PATH or table.path): results are printed, not saved\n");
  if (!context->table_error().empty()) fail(ARB_ERR_TABLE, context->table_error());

  struct Row {
    std::string problem, winner, runner_up;
    double median = 0, margin = 0;
    bool kept = false;
  };
  std::vector<Row> rows;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::string method;
  for (size_t i = 0; i < problems.size(); ++i) {
    const arb_problem& p = problems[i].parsed.problem;
    const std::string key = problem_key(p);
    progress(i, problems.size(), elapsed(), key);
    const KernelRecord* incumbent = nullptr;
    if (TableIndex* table = context->table())
      if (auto hit = table->lookup(key)) incumbent = hit->kernel;
    const TuneResult result = context->tuner().tune(p, incumbent);
    method = result.method;
    Row row{problems[i].text, "-", "", 0, 0, false};
    std::string report = fmt::format("\n{}\n  from: {}\n", key, problems[i].origin.empty() ? "-" : problems[i].origin);
    for (const Candidate& c : result.candidates) {
      const std::string time = c.stats.samples > 0 ? fmt::format("{:>10} (p20 {}, p80 {}, {} samples)", micros(c.stats.median),
                                                                 micros(c.stats.p20), micros(c.stats.p80), c.stats.samples)
                                                   : "";
      const bool won = &c == result.winning();
      report += fmt::format("  {} {:<28} {:<48} {}\n", won ? "*" : " ", c.kernel->name,
                            c.status == "measured" ? c.verdict.summary() : c.status, time);
    }
    for (const std::string& note : result.notes) report += "  note: " + note + "\n";
    if (const Candidate* w = result.winning()) {
      row.winner = w->kernel->name;
      row.median = w->stats.median;
      row.kept = result.kept_incumbent;
      if (const Candidate* r = result.second()) {
        row.runner_up = r->kernel->name;
        row.margin = result.margin;
      }
      report += fmt::format("  winner: {} at {}{}{}\n", row.winner, micros(row.median),
                            row.runner_up.empty() ? "" : fmt::format(", {:.1f}% ahead of {}", row.margin * 100, row.runner_up),
                            row.kept ? " (the incumbent: not beaten by more than the noise)" : "");
      if (!table_path.empty()) context->record(tuned_entry(result, p, context->devices().of(p.device_type).fingerprint()));
    } else {
      report += "  no kernel both supports this problem and passes verification\n";
    }
    if (isatty(STDERR_FILENO)) fmt::print(stderr, "\r{:<120}\r", "");
    fmt::print("{}", report);
    rows.push_back(row);
  }
  progress(problems.size(), problems.size(), elapsed(), "done");

  fmt::print("\n| problem | winner | median | runner-up | margin |\n| --- | --- | ---: | --- | ---: |\n");
  for (const Row& r : rows)
    fmt::print("| {} | {}{} | {} | {} | {} |\n", r.problem, r.winner, r.kept ? " (kept)" : "",
               r.median > 0 ? micros(r.median) : "-", r.runner_up.empty() ? "-" : r.runner_up,
               r.runner_up.empty() ? "-" : fmt::format("{:.1f}%", r.margin * 100));
  fmt::print("\nmethod: {}. Margin: the runner-up's median over the winner's, minus one.\n", method);
  fmt::print("tuning time: {:.1f} s for {}{}\n", elapsed(), counted(static_cast<long long>(problems.size()), "problem"),
             table_path.empty() ? "" : "; table written to " + table_path);
  return 0;
}

}  // namespace arbiter::cli
