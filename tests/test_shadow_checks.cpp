// Shadow checks of live calls and quarantine (verify/shadow_check.hpp, docs/verification.md,
// "Shadow checks"), against kernels that are right whenever the gate looks
// (tests/fixtures/late_cheats.cpp): with the checks off their wrong answers reach the caller;
// with them on the caller never gets one, the kernel is quarantined, its table entries are
// marked failed, and dispatch falls back.
#include "common/failure.hpp"
#include "problem/problem_text.hpp"
#include "table/table_file.hpp"
#include "verify/accuracy.hpp"
#include "verify/verifier.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

using namespace arbiter;

namespace {

// A context with the shipped CPU kernels and late_cheats, `kernel` chosen by an override (the
// heuristic prefers the shipped kernels, which serve as the fallback).
// `extra` goes before the [verify] section, `verify` into it.
std::unique_ptr<Context> with_late_cheats(const std::string& kernel, const std::string& shadow,
                                          const std::string& extra = "", const std::string& verify = "") {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("late_cheats"));
  const std::string op = kernel.rfind("gemm", 0) == 0 ? "gemm" : "softmax";
  return test::make_context(test::config_loading(files, extra + "[verify]\nshadow_one_in = " + shadow + "\n" + verify +
                                                            "[[dispatch.override]]\nop = \"" + op +
                                                            "\"\nkernel = \"late_cheats." + kernel + "\"\n"));
}

size_t index_of(const ProblemBuffers& buffers, const std::string& name) {
  for (size_t i = 0; i < buffers.all().size(); ++i)
    if (buffers.all()[i].name == name) return i;
  FAIL("no operand " << name);
  return 0;
}

void set_first(ProblemBuffers& buffers, const std::string& name, float value) {
  std::memcpy(buffers.buffer_data(index_of(buffers, name)), &value, sizeof value);
}

// Random inputs, the backdoor's trigger in the first element of `trigger` unless it is "".
ProblemBuffers inputs_for(const arb_problem& problem, uint64_t seed, const std::string& trigger) {
  ProblemBuffers buffers(problem, 1.0f, problem.has_c ? 0.5f : 0.0f, 1e-5f);
  buffers.randomize(seed);
  if (!trigger.empty()) set_first(buffers, trigger, 42.0f);
  return buffers;
}

// Calls through dispatch and says whether the caller got the oracle's answer.
bool right_answer(Context& context, const ProblemBuffers& inputs) {
  ProblemBuffers result = inputs;
  context.run(inputs.problem(), result.operands(), nullptr);
  const ProblemBuffers expected = reference_answer(*context.gate().oracle(inputs.problem().op), inputs);
  return compare_outputs(result, expected).accepted(tolerance_for(inputs.problem().dtype));
}

const KernelRecord& kernel_named(const Context& context, const std::string& name) {
  const KernelRecord* k = context.registry().find(name);
  REQUIRE_MESSAGE(k != nullptr, name);
  return *k;
}

}  // namespace

TEST_CASE("without shadow checks, a kernel that passed the gate hands its backdoor's answer to the caller") {
  const auto context = with_late_cheats("softmax_backdoor", "0", "", "first_calls_checked = 0\n");
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  CHECK(right_answer(*context, inputs_for(problem, 1, "")));  // admitted: the gate never draws a 42
  CHECK(context->dispatcher().select(problem).kernel->name == "late_cheats.softmax_backdoor");
  CHECK_FALSE(right_answer(*context, inputs_for(problem, 2, "x")));
  CHECK(context->shadow_counts().checked == 0);
}

TEST_CASE("the first calls of a problem are checked even without shadow checks, later ones are not") {
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  {  // the default: the first 3 calls of each new problem
    const auto context = with_late_cheats("softmax_backdoor", "0");
    CHECK(right_answer(*context, inputs_for(problem, 1, "")));
    CHECK(right_answer(*context, inputs_for(problem, 2, "x")));  // its 2nd call: caught, served by the fallback
    CHECK(context->gate().quarantined(kernel_named(*context, "late_cheats.softmax_backdoor")));
    CHECK(context->shadow_counts().checked == 3);  // the fallback's first call is checked too
    CHECK(context->shadow_counts().mismatched == 1);
  }
  {  // past them, only sampled shadow checks would see the backdoor
    const auto context = with_late_cheats("softmax_backdoor", "0", "", "first_calls_checked = 2\n");
    for (uint64_t seed = 1; seed <= 3; ++seed) CHECK(right_answer(*context, inputs_for(problem, seed, "")));
    CHECK(context->shadow_counts().checked == 2);
    CHECK_FALSE(right_answer(*context, inputs_for(problem, 4, "x")));
    CHECK_FALSE(context->gate().quarantined(kernel_named(*context, "late_cheats.softmax_backdoor")));
  }
  {  // kernels the gate does not watch are not checked this way
    std::vector<std::string> files = test::shipped_plugins();
    const auto context = test::make_context(test::config_loading(files, test::trusting(files) + "[verify]\nshadow_one_in = 0\n"));
    for (uint64_t seed = 1; seed <= 4; ++seed) CHECK(right_answer(*context, inputs_for(problem, seed, "")));
    CHECK(context->shadow_counts().checked == 0);
    CHECK(context->shadow_counts().skipped == 0);
  }
}

TEST_CASE("with shadow checks, the backdoor's answer never reaches the caller: quarantine and fallback") {
  const auto context = with_late_cheats("softmax_backdoor", "1");
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  const KernelRecord& cheat = kernel_named(*context, "late_cheats.softmax_backdoor");
  CHECK(right_answer(*context, inputs_for(problem, 1, "")));
  CHECK(context->dispatcher().select(problem).kernel == &cheat);
  CHECK_FALSE(context->gate().quarantined(cheat));

  CHECK(right_answer(*context, inputs_for(problem, 2, "x")));  // caught, and served by the fallback
  const std::optional<std::string> why = context->gate().quarantined(cheat);
  REQUIRE(why);
  CAPTURE(*why);
  CHECK(why->find("relative norm error") != std::string::npos);
  CHECK(why->find("softmax f32 rows=4 cols=64") != std::string::npos);  // the problem of the call
  CHECK(context->shadow_counts().mismatched == 1);

  // Refused from then on, for every problem, and explain says why.
  CHECK(context->dispatcher().select(problem).kernel != &cheat);
  const arb_problem other = parse_problem("softmax f32 rows=3 cols=100").problem;
  CHECK(context->dispatcher().select(other).kernel != &cheat);
  const std::string explained = context->dispatcher().explain(problem);
  CAPTURE(explained);
  CHECK(explained.find("quarantined: relative norm error") != std::string::npos);
  CHECK_FALSE(context->gate().verdict(cheat, problem).passed);
  for (uint64_t seed = 3; seed < 8; ++seed) CHECK(right_answer(*context, inputs_for(problem, seed, "x")));
}

TEST_CASE("a kernel wrong after its 3000th launch is quarantined on the first checked call after it") {
  const auto context = with_late_cheats("softmax_counted", "3");
  const arb_problem problem = parse_problem("softmax f32 rows=2 cols=16").problem;
  const KernelRecord& cheat = kernel_named(*context, "late_cheats.softmax_counted");
  int wrong = 0;
  for (uint64_t call = 0; call < 3300; ++call) wrong += right_answer(*context, inputs_for(problem, call, "")) ? 0 : 1;
  CHECK(context->gate().quarantined(cheat));
  // One call in 3 on average is checked: the wrong answers between the 3000th launch and the
  // first checked call after it are the sampling's price (every one is caught at one in 1).
  CAPTURE(wrong);
  CHECK(wrong < 40);
  CHECK(context->dispatcher().select(problem).kernel != &cheat);
  CHECK(context->shadow_counts().checked > 500);
}

TEST_CASE("in place (C = D), the fallback computes from the C the caller passed") {
  const auto context = with_late_cheats("gemm_backdoor", "1");
  const arb_problem problem = parse_problem("gemm f32 m=8 n=12 k=16 beta=0.5 inplace=1").problem;
  REQUIRE(problem.c_is_d);
  const KernelRecord& cheat = kernel_named(*context, "late_cheats.gemm_backdoor");
  CHECK(right_answer(*context, inputs_for(problem, 1, "")));
  CHECK(context->dispatcher().select(problem).kernel == &cheat);
  CHECK(right_answer(*context, inputs_for(problem, 2, "a")));  // D was restored to C before the fallback ran
  CHECK(context->gate().quarantined(cheat));
}

TEST_CASE("an honest kernel is not quarantined on data whose answer cancels to rounding noise") {
  // D = A B - C with C = A B rounded: every element is a difference of nearly equal numbers,
  // so the result is mostly the kernel's own rounding. Relative to the reference's norm that
  // is far above f32's tolerance; relative to the scale of the sum (the reference on |A|, |B|,
  // |C|) it is rounding, as it should be.
  // The cpu plugin's small-shape gemm (k <= 64), so that the kernel is never the oracle,
  // which is not shadow-checked, on a machine without OpenBLAS.
  const auto context =
      test::make_context(test::config_loading({test::plugin_file("cpu")}, "[verify]\nshadow_one_in = 1\n"));
  const arb_problem problem = parse_problem("gemm f32 m=32 n=32 k=64 beta=-1").problem;
  ProblemBuffers inputs(problem, 1.0f, -1.0f, 0.0f);
  inputs.randomize(7);
  ProblemBuffers product(problem, 1.0f, 0.0f, 0.0f);
  product.randomize(7);  // the same A and B
  const ProblemBuffers exact = reference_answer(*context->gate().oracle(ARB_OP_GEMM), product);
  std::memcpy(inputs.buffer_data(index_of(inputs, "c")), exact.all()[index_of(exact, "d")].buffer.data(),
              exact.all()[index_of(exact, "d")].buffer.size());
  ProblemBuffers result = inputs;
  context->run(problem, result.operands(), nullptr);
  const KernelRecord& chosen = *context->dispatcher().select(problem).kernel;
  CAPTURE(chosen.name);
  REQUIRE(&chosen != context->gate().oracle(ARB_OP_GEMM));
  CHECK_FALSE(context->gate().quarantined(chosen));
  CHECK(context->shadow_counts().checked == 1);
  CHECK(context->shadow_counts().mismatched == 0);
  // What the plain comparison would have said (so the case above is not vacuous):
  const ProblemBuffers expected = reference_answer(*context->gate().oracle(ARB_OP_GEMM), inputs);
  CHECK_FALSE(compare_outputs(result, expected).accepted(tolerance_for(ARB_DTYPE_F32)));
}

TEST_CASE("a quarantine marks the kernel's table entries failed, and a later context does not use them") {
  test::TempDir dir;
  const std::string table = dir.path + "/table.toml";
  const std::string table_config = "[table]\npath = \"" + table + "\"\n";
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  {
    const auto context = with_late_cheats("softmax_backdoor", "1", table_config);
    const KernelRecord& cheat = kernel_named(*context, "late_cheats.softmax_backdoor");
    const Verdict verdict = context->gate().verdict(cheat, problem);
    REQUIRE(verdict.passed);
    TableEntry entry;
    entry.key = problem_key(problem);
    entry.device = context->device().fingerprint().id();
    entry.kernel = cheat.name;
    entry.plugin_version = cheat.plugin->version;
    entry.build_id = cheat.plugin->build_id;
    entry.runtime_version = cheat.plugin->runtime_version;
    entry.plugin_sha256 = cheat.plugin->sha256;
    entry.median_us = entry.p20_us = entry.p80_us = 1.0;
    entry.samples = 20;
    entry.verified = true;
    entry.verification = verdict.summary();
    context->record(entry);
    REQUIRE(context->table()->lookup(entry.key));
    CHECK(right_answer(*context, inputs_for(problem, 2, "x")));
    CHECK(context->gate().quarantined(cheat));
    CHECK_FALSE(context->table()->lookup(entry.key));  // out of use at once
  }
  const TuningTable file = load_table_file(table);
  REQUIRE(file.entries().size() == 1);
  CHECK_FALSE(file.entries()[0].verified);
  CHECK(file.entries()[0].verification.rfind("failed: shadow_check: quarantined", 0) == 0);
  // A new process: the entry is stale, with the reason, even with the table's verdicts taken unchecked.
  const auto later = with_late_cheats("softmax_backdoor", "0", table_config, "recheck_table_verdicts = false\n");
  CHECK_FALSE(later->table()->lookup(problem_key(problem)));
  const std::string why = later->table()->why_not(problem_key(problem));
  CAPTURE(why);
  CHECK(why.find("its verification failed: failed: shadow_check") != std::string::npos);
}

TEST_CASE("shadow checks from four threads at once: one quarantine, every answer right") {
  const auto context = with_late_cheats("softmax_backdoor", "1");
  const arb_problem problem = parse_problem("softmax f32 rows=8 cols=128").problem;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint64_t call = 0; call < 40; ++call)
        if (!right_answer(*context, inputs_for(problem, 100 * uint64_t(t) + call, call % 7 == 3 ? "x" : "")))
          wrong.fetch_add(1);
    });
  for (std::thread& t : threads) t.join();
  CHECK(wrong.load() == 0);
  CHECK(context->gate().quarantined(kernel_named(*context, "late_cheats.softmax_backdoor")));
  CHECK(context->shadow_counts().mismatched >= 1);
  CHECK(context->shadow_counts().checked >= 160);
}

TEST_CASE("the oracle and problems past the reference's bound are not shadow-checked, and say so") {
  const auto context = test::make_context(test::config_loading(test::shipped_plugins(), "[verify]\nshadow_one_in = 1\n"));
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  ProblemBuffers buffers = inputs_for(problem, 1, "");
  const KernelRecord& oracle = *context->gate().oracle(ARB_OP_SOFTMAX);
  ShadowCheck shadow(context->devices(), context->registry());
  std::string why_not;
  CHECK(shadow.capture(oracle, problem, buffers.operands(), nullptr, &why_not) == nullptr);
  CHECK(why_not == "the kernel is the oracle");
  CHECK(shadow.counts().skipped == 1);
}

TEST_CASE("one call in N is checked, at intervals no launch count predicts") {
  for (int i = 0; i < 5; ++i) shadow_check_due(1000);  // a countdown left by a lower rate
  int due = 0;
  for (int i = 0; i < 100; ++i) due += shadow_check_due(1) ? 1 : 0;
  CHECK(due == 100);
  due = 0;
  std::vector<int> gaps;
  int last = 0;
  for (int i = 1; i <= 200000; ++i)
    if (shadow_check_due(100)) {
      ++due;
      gaps.push_back(i - last);
      last = i;
    }
  CHECK(due > 1700);
  CHECK(due < 2300);
  std::sort(gaps.begin(), gaps.end());
  CHECK(gaps.front() < 20);   // the interval varies
  CHECK(gaps.back() > 150);
}

TEST_CASE("verify.shadow_one_in: off unless set, 0 to 2^40") {
  CHECK_FALSE(parse_config("", "<t>", "").verify.shadow_one_in);
  CHECK(parse_config("[verify]\nshadow_one_in = 1000\n", "<t>", "").verify.shadow_rate() == 1000);
  CHECK(parse_config("[verify]\nshadow_one_in = 0\n", "<t>", "").verify.shadow_rate() == 0);
  for (const char* bad : {"[verify]\nshadow_one_in = -1\n", "[verify]\nshadow_one_in = \"often\"\n",
                          "[verify]\nshadow_one_in = 2000000000000\n"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_config(bad, "<t>", ""), Failure);
  }
}
