// arbiter tune --suite=FILE [--table=PATH] [--shard=I/N]: verify and time every candidate of
// every problem (of one shard of the suite), keep the fastest by more than the noise, write
// the table as results arrive, and print the candidates, verdicts, times, winners and
// margins. The tuning is tune_problems's (core/api/tune_problems.hpp), as arb_tune's is.
#include "cli.hpp"
#include "arbiter_base/counted.hpp"

#include "api/tune_problems.hpp"
#include "common/failure.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <optional>

namespace arbiter::cli {
namespace {

struct Shard {
  size_t index = 0, count = 1;
};

constexpr unsigned long long kMaxShards = 1000000;

// --shard=I/N: shard I (0-based, as a Kubernetes JOB_COMPLETION_INDEX or the task id of a
// Slurm --array=0-<N-1>) of N. nullopt without the option; Failure for anything but two
// decimal numbers with 0 <= I < N <= kMaxShards.
std::optional<Shard> shard_option(const Arguments& args) {
  const std::string prefix = "--shard=";
  const std::string* given = nullptr;
  for (const std::string& o : args.options)
    if (o.rfind(prefix, 0) == 0) given = &o;
  if (given == nullptr) return std::nullopt;
  const std::string text = given->substr(prefix.size());
  const std::string what = "tune --shard=" + text;
  unsigned long long numbers[2] = {0, 0};
  const size_t slash = text.find('/');
  const std::string parts[2] = {text.substr(0, slash), slash == std::string::npos ? "" : text.substr(slash + 1)};
  for (int i = 0; i < 2; ++i) {
    const std::string& part = parts[i];
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (slash == std::string::npos || !digits)
      fail(ARB_ERR_INVALID_ARGUMENT, what + ": expected I/N, two whole numbers: shard I (0 to N-1) of N shards, "
                                            "as in --shard=0/3, --shard=1/3, --shard=2/3");
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), numbers[i]);
    if (ec != std::errc() || end != part.data() + part.size() || numbers[i] > kMaxShards)
      fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("{}: {} is too large (at most {} shards)", what, part, kMaxShards));
  }
  const auto [index, count] = numbers;
  if (count == 0) fail(ARB_ERR_INVALID_ARGUMENT, what + ": the number of shards N must be at least 1");
  if (index >= count)
    fail(ARB_ERR_INVALID_ARGUMENT,
         fmt::format("{}: the shard index runs from 0 to {} (0-based: a Kubernetes JOB_COMPLETION_INDEX, or "
                     "SLURM_ARRAY_TASK_ID with --array=0-{})",
                     what, count - 1, count - 1));
  return Shard{static_cast<size_t>(index), static_cast<size_t>(count)};
}

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
  const std::optional<Shard> shard = shard_option(args);
  std::vector<SuiteProblem> problems = problems_from(args, "tune");
  std::string of_shard;  // " (shard I/N of M)"
  if (shard) {
    const size_t all = problems.size();
    problems = suite_shard(problems, shard->index, shard->count);
    of_shard = fmt::format(" (shard {}/{} of {})", shard->index, shard->count, all);
    fmt::print("shard {}/{} takes {} of {}: those whose key has rank r with r mod {} = {} among the sorted "
               "distinct problem keys; the other shards take the rest{}\n",
               shard->index, shard->count, problems.size(), counted(static_cast<long long>(all), "problem"),
               shard->count, shard->index, problems.empty() ? "; none for this one: nothing to tune, no table written" : "");
    if (problems.empty()) return 0;
  }
  const auto context = make_context(args);
  require_plugin_files(*context, "tune");
  if (context->config().table.path.empty())
    fmt::print(stderr, "arbiter tune: no table (--table=PATH or table.path): results are printed, not saved\n");

  TuneRequest request;  // into the context's own table, if it has one
  request.progress = [&](size_t done, size_t total, double elapsed) {
    progress(done, total, elapsed, done < total ? problem_key(problems[done].parsed.problem) : "done");
    return true;
  };
  const TuneRun run = tune_problems(*context, problems, request, [](const TunedProblem& tuned) {
    const TuneResult& result = tuned.result;
    std::string report =
        fmt::format("\n{}\n  from: {}\n", tuned.key, tuned.problem->origin.empty() ? "-" : tuned.problem->origin);
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
      const Candidate* r = result.second();
      report += fmt::format("  winner: {} at {}{}{}\n", w->kernel->name, micros(w->stats.median),
                            r == nullptr ? "" : fmt::format(", {:.1f}% ahead of {}", result.margin * 100, r->kernel->name),
                            result.kept_incumbent ? " (the incumbent: not beaten by more than the noise)" : "");
    } else {
      report += "  no kernel both supports this problem and passes verification\n";
    }
    if (isatty(STDERR_FILENO)) fmt::print(stderr, "\r{:<120}\r", "");
    fmt::print("{}", report);
  });

  fmt::print("\n| problem | winner | median | runner-up | margin |\n| --- | --- | ---: | --- | ---: |\n");
  for (const TunedProblem& tuned : run.results) {
    const Candidate* w = tuned.result.winning();
    const Candidate* r = w ? tuned.result.second() : nullptr;
    const double median = w ? w->stats.median : 0;
    fmt::print("| {} | {}{} | {} | {} | {} |\n", tuned.problem->text, w ? w->kernel->name : "-",
               w && tuned.result.kept_incumbent ? " (kept)" : "", median > 0 ? micros(median) : "-",
               r ? r->kernel->name : "-", r ? fmt::format("{:.1f}%", tuned.result.margin * 100) : "-");
  }
  fmt::print("\nmethod: {}. Margin: the runner-up's median over the winner's, minus one.\n", run.method);
  fmt::print("tuning time: {:.1f} s for {}{}{}\n", run.elapsed, counted(static_cast<long long>(problems.size()), "problem"),
             of_shard, run.table.empty() ? "" : "; table written to " + run.table);
  return 0;
}

}  // namespace arbiter::cli
