#include "api/tune_problems.hpp"

#include "common/failure.hpp"
#include "common/json_writer.hpp"
#include "problem/problem.hpp"
#include "table/table_file.hpp"
#include "table/tuned_entry.hpp"

#include <chrono>
#include <filesystem>

namespace arbiter {
namespace {

namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const fs::path x = fs::weakly_canonical(fs::absolute(a), ea), y = fs::weakly_canonical(fs::absolute(b), eb);
  return !ea && !eb && x == y;
}

// Where a run's winners go, and where its incumbents come from.
class Destination {
 public:
  Destination(Context& context, const std::optional<std::string>& requested) : context_(context) {
    const std::string& own = context.config().table.path;
    if (!requested) {
      kind_ = own.empty() ? Kind::none : Kind::own;
    } else if (requested->empty()) {
      kind_ = Kind::none;
    } else if (!own.empty() && same_file(*requested, own)) {
      kind_ = Kind::own;
    } else {
      kind_ = Kind::file;
      path_ = *requested;
      file_ = open_table_for_update(path_, context.config().table.max_file_bytes());
    }
    if (kind_ == Kind::own) {
      path_ = own;
      if (!context.table_error().empty()) fail(ARB_ERR_TABLE, context.table_error());
    }
  }

  const std::string& path() const { return path_; }

  // The kernel of the destination's valid entry for the problem, or nullptr.
  const KernelRecord* incumbent(const arb_problem& problem, const std::string& key) const {
    if (kind_ == Kind::own) {
      if (TableIndex* table = context_.table())
        if (auto hit = table->lookup(key)) return hit->kernel;
    } else if (kind_ == Kind::file) {
      const TableEntry* entry = file_.find(key, context_.devices().of(problem.device_type).fingerprint().id());
      arb_problem parsed{};
      if (entry != nullptr && stale_reason(*entry, context_.registry(), context_.gate(), &parsed).empty())
        return context_.registry().find(entry->kernel);
    }
    return nullptr;
  }

  void record(const TuneResult& result, const arb_problem& problem) const {
    if (kind_ == Kind::none || result.winning() == nullptr) return;
    const TableEntry entry = tuned_entry(result, problem, context_.devices().of(problem.device_type).fingerprint());
    if (kind_ == Kind::own)
      context_.record(entry);
    else
      context_.record_in_file(path_, entry);
  }

 private:
  enum class Kind { none, own, file };
  Context& context_;
  Kind kind_ = Kind::none;
  std::string path_;
  TuningTable file_;  // the file's table when the run began (Kind::file)
};

}  // namespace

TuneRun tune_problems(Context& context, const std::vector<SuiteProblem>& problems, const TuneRequest& request,
                      const std::function<void(const TunedProblem&)>& on_tuned) {
  const Destination destination(context, request.table_path);
  TuneRun run;
  run.table = destination.path();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (size_t i = 0; i < problems.size(); ++i) {
    if (request.progress && !request.progress(i, problems.size(), elapsed())) {
      run.cancelled = true;
      break;
    }
    const arb_problem& p = problems[i].parsed.problem;
    TunedProblem tuned;
    tuned.problem = &problems[i];
    tuned.key = problem_key(p);
    tuned.result = context.tuner().tune(p, destination.incumbent(p, tuned.key));
    run.method = tuned.result.method;
    destination.record(tuned.result, p);
    run.results.push_back(std::move(tuned));
    if (on_tuned) on_tuned(run.results.back());
  }
  if (!run.cancelled && request.progress) request.progress(problems.size(), problems.size(), elapsed());
  run.elapsed = elapsed();
  return run;
}

std::string tuning_json(const TuneRun& run) {
  const auto seconds = [](JsonWriter& json, const TimingStats& stats, double value) -> JsonWriter& {
    return stats.samples > 0 ? json.value(value) : json.null();
  };
  const auto or_null = [](const std::string& text) { return text.empty() ? std::nullopt : std::optional(text); };
  JsonWriter json;
  json.begin_object()
      .key("method").value(or_null(run.method))
      .key("table").value(or_null(run.table))
      .key("elapsed_s").value(run.elapsed)
      .key("cancelled").value(run.cancelled)
      .key("results").begin_array();
  for (const TunedProblem& tuned : run.results) {
    const TuneResult& r = tuned.result;
    const Candidate* winner = r.winning();
    const Candidate* second = winner ? r.second() : nullptr;
    json.begin_object()
        .key("problem").value(tuned.problem->text)
        .key("key").value(tuned.key)
        .key("origin").value(or_null(tuned.problem->origin))
        .key("winner").value(winner ? std::optional(winner->kernel->name) : std::nullopt)
        .key("median_s");
    if (winner) seconds(json, winner->stats, winner->stats.median); else json.null();
    json.key("runner_up").value(second ? std::optional(second->kernel->name) : std::nullopt).key("margin");
    if (second) json.value(r.margin); else json.null();
    json.key("noise").value(r.noise).key("kept_incumbent").value(r.kept_incumbent).key("candidates").begin_array();
    for (const Candidate& c : r.candidates) {
      // A default verdict: the gate never ran on it (refused first).
      const bool verdict = c.verdict.passed || !c.verdict.failed_checks.empty() || !c.verdict.detail.empty();
      json.begin_object()
          .key("kernel").value(c.kernel->name)
          .key("status").value(c.status)
          .key("verdict").value(verdict ? std::optional(c.verdict.summary()) : std::nullopt)
          .key("gated").value(c.gated)
          .key("median_s");
      seconds(json, c.stats, c.stats.median).key("p20_s");
      seconds(json, c.stats, c.stats.p20).key("p80_s");
      seconds(json, c.stats, c.stats.p80).key("samples").value(c.stats.samples);
      json.end_object();
    }
    json.end_array().key("notes").begin_array();
    for (const std::string& note : r.notes) json.value(note);
    json.end_array().end_object();
  }
  json.end_array().end_object();
  return json.text();
}

}  // namespace arbiter
