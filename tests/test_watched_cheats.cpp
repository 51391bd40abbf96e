// The gate against kernels that behave only while they are watched the way the gate used to
// watch (tests/fixtures/watched_cheats.cpp): each is refused, for a reason its cheat explains.
#include "problem/problem_text.hpp"
#include "tune/tuner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace arbiter;

namespace {

std::unique_ptr<Context> with_watched_cheats() {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("watched_cheats"));
  return test::make_context(test::config_loading(files));
}

Verdict verdict_of(Context& context, const std::string& kernel, const std::string& problem) {
  const KernelRecord* record = context.registry().find("watched_cheats." + kernel);
  REQUIRE_MESSAGE(record != nullptr, kernel);
  return context.gate().verdict(*record, parse_problem(problem).problem);
}

bool failed_any(const Verdict& v, const std::vector<const char*>& checks) {
  for (const char* check : checks)
    if (v.failed(check)) return true;
  return false;
}

}  // namespace

TEST_CASE("an exact kernel passes with the hard inputs, drawn strides and fills") {
  const auto context = with_watched_cheats();
  for (const char* problem : {"softmax f32 rows=4 cols=64", "softmax f32 rows=48 cols=4100 ldx=4160 ldy=4104",
                              "softmax f32 rows=5 cols=8192"}) {
    CAPTURE(problem);
    const Verdict v = verdict_of(*context, "exact", problem);
    CAPTURE(v.detail);
    CHECK(v.passed);
  }
}

TEST_CASE("each watched cheat is refused for its reason") {
  const auto context = with_watched_cheats();
  struct Case {
    const char* kernel;
    const char* problem;
    std::vector<const char*> any_of;  // at least one of these checks fails
  };
  const std::vector<Case> cases = {
      {"no_max_subtraction", "softmax f32 rows=4 cols=64", {"accuracy"}},         // logits of magnitude 100
      {"mask_blind", "softmax f32 rows=4 cols=64", {"accuracy"}},                 // -inf logits
      {"poison_aware", "softmax f32 rows=4 cols=64", {"accuracy"}},               // zero or random pre-fill
      {"guard_aware", "softmax f32 rows=4 cols=64", {"accuracy"}},                // drawn canaries
      {"per_pointer", "softmax f32 rows=4 cols=64", {"accuracy"}},                // 4 to 9 launches per address
      {"weak_memo", "softmax f32 rows=4 cols=64", {"stale_result"}},              // only the rows' insides change
      {"static_scratch", "softmax f32 rows=4 cols=64", {"concurrent_calls"}},     // three threads at once
      {"input_scratch", "softmax f32 rows=4 cols=64", {"input_modified", "concurrent_calls"}},
      {"tied_strides", "softmax f32 rows=48 cols=64 ldx=128 ldy=64", {"accuracy", "guard", "unwritten_output"}},
      {"wide_cols", "softmax f32 rows=4 cols=8192", {"accuracy"}},                // cols in full
      {"edge_dodger", "softmax f32 rows=48 cols=4100", {"accuracy", "unwritten_output"}},
      {"replays_after_9", "softmax f32 rows=4 cols=64", {"stale_result"}},         // a long series at one address
      {"negative_logits_shortcut", "softmax f32 rows=4 cols=64", {"accuracy"}},   // one-signed logits
  };
  for (const Case& c : cases) {
    const std::string kernel = c.kernel, problem = c.problem;
    CAPTURE(kernel);
    CAPTURE(problem);
    const Verdict v = verdict_of(*context, kernel, problem);
    CAPTURE(v.detail);
    CHECK_FALSE(v.passed);
    CHECK(failed_any(v, c.any_of));
  }
}

TEST_CASE("a class verdict covers a new problem only after that problem ran at full size") {
  const auto context = with_watched_cheats();
  // Right up to 4096 columns: the class verdict earned on 64 columns passes...
  CHECK(verdict_of(*context, "wide_cols", "softmax f32 rows=4 cols=64").passed);
  // ...and a problem of the same class with 8192 columns is run as it is before it is covered.
  const Verdict wide = verdict_of(*context, "wide_cols", "softmax f32 rows=4 cols=8192");
  CAPTURE(wide.detail);
  CHECK_FALSE(wide.passed);
  CHECK(wide.detail.find("the problem at full size") != std::string::npos);
  // The failure is the class's verdict from then on.
  CHECK_FALSE(verdict_of(*context, "wide_cols", "softmax f32 rows=4 cols=64").passed);

  // A kernel that refuses the edge shapes and leaves row tails unwritten: verified on a
  // tile-aligned problem, caught on the first problem with a tail.
  CHECK(verdict_of(*context, "edge_dodger", "softmax f32 rows=16 cols=1024").passed);
  CHECK_FALSE(verdict_of(*context, "edge_dodger", "softmax f32 rows=16 cols=1028").passed);
}

TEST_CASE("the tuner checks every timed kernel on the data it was timed on") {
  // No screening: a loaded machine once timed the cheat 2.3x slower than the best after its
  // first samples, and a screened-out kernel is never checked (it cannot win). At least 2600
  // samples (each one launch or more): the cheat turns wrong after 2500 launches, and a slow
  // build on a loaded machine once launched it fewer times than that in 150 ms.
  const auto context = test::make_context(test::config_loading(
      {test::fixture_file("watched_cheats")}, "[tune]\nbudget_ms = 150\nmin_samples = 2600\nscreen_factor = 1000\n"));
  const TuneResult r = context->tuner().tune(parse_problem("softmax f32 rows=4 cols=64").problem, nullptr);
  bool seen = false;
  for (const Candidate& c : r.candidates) {
    if (c.kernel->name != "watched_cheats.right_while_watched") continue;
    seen = true;
    CAPTURE(c.status);
    CHECK(c.status.find("wrong on the data it was timed on") != std::string::npos);
    CHECK_FALSE(c.verdict.passed);
  }
  CHECK(seen);
  REQUIRE(r.winning() != nullptr);
  CHECK(r.winning()->kernel->name != "watched_cheats.right_while_watched");
  // The failure is remembered: dispatch refuses it from then on.
  const KernelRecord& cheat = *context->registry().find("watched_cheats.right_while_watched");
  CHECK_FALSE(context->gate().verdict(cheat, parse_problem("softmax f32 rows=4 cols=64").problem).passed);
}
