// The tuner: two honest kernels of widely different speed (tests/fixtures/speeds.cpp).
#include "problem/problem_text.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace arbiter;

namespace {
// The reference plugin verifies but is excluded from the race: its softmax runs about as fast
// as "fast" (CI once measured it faster), so which of the two won would be noise.
std::unique_ptr<Context> speeds_only(const std::string& also_excluded = "") {
  return test::make_context(test::config_loading(
      {test::fixture_file("speeds")},
      "[tune]\nbudget_ms = 50\nexclude = [\"reference.softmax\"" + also_excluded + "]\n"));
}
}  // namespace

TEST_CASE("the tuner picks the faster of two honest kernels, with a plausible margin") {
  const auto context = speeds_only();
  const arb_problem p = parse_problem("softmax f32 rows=8 cols=1024").problem;
  const TuneResult r = context->tuner().tune(p, nullptr);
  REQUIRE(r.winning() != nullptr);
  const std::string winner = r.winning()->kernel->name;
  CHECK((winner == "speeds.fast" || winner == "speeds.fast_twin"));  // the same code twice
  REQUIRE(r.second() != nullptr);
  const double slow_ratio = [&] {
    for (const Candidate& c : r.candidates)
      if (c.kernel->name == "speeds.slow") return c.stats.median / r.winning()->stats.median;
    return 0.0;
  }();
  // It does the work 20 times. No upper bound: "slow" is screened out after a few samples,
  // and on a loaded machine (CI's ASan run measured 107x) those few can be far slower still.
  CHECK(slow_ratio > 5.0);
  CHECK(r.margin >= 0.0);
  CHECK(r.winning()->stats.samples >= 20);
  CHECK(r.winning()->stats.p20 <= r.winning()->stats.median);
  CHECK(r.winning()->stats.median <= r.winning()->stats.p80);
  for (const Candidate& c : r.candidates)
    if (c.kernel->name == "speeds.slow") CHECK(c.status.find("screened out") != std::string::npos);
  CHECK(r.method.find("cache cold") != std::string::npos);
}

TEST_CASE("an incumbent that is beaten by far more than the noise is replaced") {
  const auto context = speeds_only();
  const arb_problem p = parse_problem("softmax f32 rows=8 cols=1024").problem;
  const TuneResult r = context->tuner().tune(p, context->registry().find("speeds.slow"));
  REQUIRE(r.winning() != nullptr);
  CHECK(r.winning()->kernel->name != "speeds.slow");
  CHECK_FALSE(r.kept_incumbent);
}

TEST_CASE("the incumbent rule: replaced only by a gain larger than the measured noise") {
  auto stats = [](double median, double p20, double p80) {
    TimingStats s;
    s.median = median;
    s.p20 = p20;
    s.p80 = p80;
    s.samples = 20;
    return s;
  };
  const TimingStats incumbent = stats(10.0, 9.8, 10.2);              // spread 2%
  CHECK(incumbent_stays(incumbent, stats(9.85, 9.8, 9.9)));          // 1.5% faster: within the noise
  CHECK_FALSE(incumbent_stays(incumbent, stats(9.5, 9.45, 9.55)));   // 5% faster: replaced
  CHECK(incumbent_stays(incumbent, stats(9.5, 8.0, 11.0)));          // but not by a noisy challenger (16%)
  CHECK(measured_noise(stats(1, 1, 1), stats(1, 1, 1)) == 0.01);     // the floor
}

TEST_CASE("identical kernels: the incumbent stays unless the measured gain beat the noise") {
  const auto context = speeds_only();
  const arb_problem p = parse_problem("softmax f32 rows=8 cols=1024").problem;
  const TuneResult r = context->tuner().tune(p, context->registry().find("speeds.fast_twin"));
  REQUIRE(r.winning() != nullptr);
  const Candidate* fast = nullptr;
  const Candidate* twin = nullptr;
  for (const Candidate& c : r.candidates) {
    if (c.kernel->name == "speeds.fast") fast = &c;
    if (c.kernel->name == "speeds.fast_twin") twin = &c;
  }
  REQUIRE(fast != nullptr);
  REQUIRE(twin != nullptr);
  CHECK((r.winning() == fast || r.winning() == twin));
  if (r.winning() == fast) {
    CHECK_FALSE(incumbent_stays(twin->stats, fast->stats));  // it did beat the noise
  } else {
    CHECK((r.kept_incumbent || twin->stats.median <= fast->stats.median));
  }
}

TEST_CASE("an excluded kernel is neither verified nor timed, and the observer sees every kernel that runs") {
  const auto context = speeds_only(", \"speeds.fast\"");
  std::vector<std::string> observed;
  context->tuner().set_observer([&](const KernelRecord& kernel, const char* phase) {
    observed.push_back(kernel.name + " " + phase);
  });
  const TuneResult r = context->tuner().tune(parse_problem("softmax f32 rows=8 cols=1024").problem, nullptr);
  REQUIRE(r.winning() != nullptr);
  CHECK(r.winning()->kernel->name == "speeds.fast_twin");
  for (const Candidate& c : r.candidates)
    if (c.kernel->name == "speeds.fast") {
      CHECK(c.status == "refused: excluded by tune.exclude");
      CHECK(c.stats.samples == 0);
    }
  auto seen = [&](const std::string& what) { return std::find(observed.begin(), observed.end(), what) != observed.end(); };
  CHECK(seen("speeds.fast_twin verify"));
  CHECK(seen("speeds.fast_twin time"));
  CHECK(seen("speeds.slow verify"));
  for (const std::string& o : observed) CHECK(o.rfind("speeds.fast ", 0) != 0);
  context->tuner().set_observer(nullptr);
}

TEST_CASE("cheaters never reach the timing phase") {
  std::vector<std::string> files = {test::fixture_file("cheaters")};
  const auto context = test::make_context(test::config_loading(files, "[tune]\nbudget_ms = 20\n"));
  const TuneResult r = context->tuner().tune(parse_problem("softmax f32 rows=4 cols=100").problem, nullptr);
  REQUIRE(r.winning() != nullptr);
  CHECK(r.winning()->kernel->name == "reference.softmax");
  for (const Candidate& c : r.candidates) {
    if (c.kernel->plugin->name != "cheaters") continue;
    CAPTURE(c.kernel->name);
    CHECK_FALSE(c.measured);
    CHECK(c.status.find("verification failed") == 0);
  }
}
