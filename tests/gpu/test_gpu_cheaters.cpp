// The cheating gallery in CUDA form (tests/fixtures/generated_cheaters: AI-generated-style
// kernels compiled by the generated plugin): the gate must reject each for its own reason,
// exactly as it rejects the CPU gallery, and dispatch must never run one.
#include "cheater_expectations.hpp"
#include "problem/problem_text.hpp"
#include "gpu_support.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

using namespace arbiter;

namespace {

const std::string kCheaters = std::string(ARBITER_TEST_SOURCE_DIR) + "/tests/fixtures/generated_cheaters";

std::set<std::string> as_set(const std::vector<std::string>& checks) { return {checks.begin(), checks.end()}; }

}  // namespace

TEST_CASE("the gate rejects every CUDA cheater, for the right reason") {
  const test::ScopedEnv env("ARBITER_GENERATED_PATH", kCheaters);
  const auto context = test::make_context(test::gpu_config(test::cuda_plugins()));
  // Tile-aligned (64 columns): only the edge shapes expose aligned_only.
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64 device=cuda").problem;
  for (const auto& [name, checks] : test::cheater_expectations()) {
    CAPTURE(name);
    const KernelRecord* kernel = context->registry().find("generated.cheat_" + name);
    REQUIRE_MESSAGE(kernel != nullptr, "the generated plugin did not load cheat_", name);
    CHECK(kernel->provenance == ARB_PROVENANCE_AI_GENERATED);
    const Verdict v = context->gate().verdict(*kernel, problem);
    CAPTURE(v.detail);
    CHECK_FALSE(v.passed);
    CHECK(as_set(v.failed_checks) == checks);
  }
  const Verdict one = context->gate().verdict(*context->registry().find("generated.cheat_one_distribution"), problem);
  CHECK(one.detail.find("normal inputs") != std::string::npos);
  const Verdict past = context->gate().verdict(*context->registry().find("generated.cheat_writes_past_end"), problem);
  CHECK(past.detail.find("wrote past the bounds of y") != std::string::npos);
  // The honest softmax of the same plugin passes on the same problem.
  const KernelRecord* honest = context->registry().find("generated.softmax_rowblock");
  REQUIRE(honest != nullptr);
  CHECK(context->gate().verdict(*honest, problem).passed);
}

TEST_CASE("dispatch never runs a CUDA cheater, whatever its priority") {
  const test::ScopedEnv env("ARBITER_GENERATED_PATH", kCheaters);
  const auto context = test::make_context(test::gpu_config(
      test::cuda_plugins(), "[plugins.priority]\ngenerated = 1000\n" + test::trusting(test::cuda_plugins())));
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64 device=cuda").problem;
  const Selection& selection = context->dispatcher().select(problem);
  REQUIRE(selection.kernel != nullptr);
  CAPTURE(selection.kernel->name);
  CHECK(selection.kernel->name.find("cheat_") == std::string::npos);
}

#if ARBITER_TEST_EMULATED
// On the emulator a kernel is host code: the gate verifies an AI-generated one in its sandbox
// (a process with an emulated device of its own, as on a GPU), so that a wild pointer, a
// misaligned access (trapped, as a GPU faults) or a spin that never yields is a failed
// verdict with the reason, and this process goes on.
TEST_CASE("on the emulator a kernel that crashes, faults or hangs fails the gate, and the host survives") {
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizers' build: they report a misaligned access (and exit) before the trap would,
  // and a wild access too (then abort, with CI's abort_on_error).
  const std::string limit_seconds = "90", misaligned = "sanitizer";
  const std::vector<std::string> wild = {"wild or out-of-bounds pointer", "SIGABRT", "sanitizer"};
#else
  const std::string limit_seconds = "20", misaligned = "misaligned access";
  const std::vector<std::string> wild = {"wild or out-of-bounds pointer"};
#endif
  const test::ScopedEnv path("ARBITER_GENERATED_PATH", std::string(ARBITER_TEST_SOURCE_DIR) + "/tests/fixtures/generated_hostile");
  const auto context = test::make_context(test::gpu_config(test::cuda_plugins()));
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64 device=cuda").problem;
  // The honest softmax of the same plugin passes (and the emulator works in the children).
  const KernelRecord* honest = context->registry().find("generated.softmax_rowblock");
  REQUIRE(honest != nullptr);
  CHECK(context->gate().verdict(*honest, problem).passed);

  const test::ScopedEnv limit("ARBITER_EMU_VERIFY_SECONDS", limit_seconds);
  // Each kernel and the causes its detail may name (any one).
  const std::map<std::string, std::vector<std::string>> expected = {
      {"wild_pointer", wild},
      {"misaligned_vector", {misaligned}},
      {"spins_forever", {"did not finish within " + limit_seconds + " s (ARBITER_EMU_VERIFY_SECONDS)"}},
  };
  for (const auto& [name, causes] : expected) {
    CAPTURE(name);
    const KernelRecord* kernel = context->registry().find("generated.hostile_" + name);
    REQUIRE_MESSAGE(kernel != nullptr, "the generated plugin did not load hostile_", name);
    const Verdict v = context->gate().verdict(*kernel, problem);
    CAPTURE(v.detail);
    CHECK_FALSE(v.passed);
    CHECK(as_set(v.failed_checks) == std::set<std::string>{"crashed"});
    CHECK(std::any_of(causes.begin(), causes.end(),
                      [&](const std::string& cause) { return v.detail.find(cause) != std::string::npos; }));
    CHECK(v.detail.find("in its sandbox") != std::string::npos);
  }
}

TEST_CASE("on the emulator with verify.sandbox = off a crashing kernel fails in a forked child instead") {
  const test::ScopedEnv path("ARBITER_GENERATED_PATH", std::string(ARBITER_TEST_SOURCE_DIR) + "/tests/fixtures/generated_hostile");
  const auto context = test::make_context(test::gpu_config(test::cuda_plugins(), "[verify]\nsandbox = \"off\"\n"));
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64 device=cuda").problem;
  const KernelRecord* kernel = context->registry().find("generated.hostile_wild_pointer");
  REQUIRE(kernel != nullptr);
  const Verdict v = context->gate().verdict(*kernel, problem);
  CAPTURE(v.detail);
  CHECK(as_set(v.failed_checks) == std::set<std::string>{"crashed"});
  CHECK(v.detail.find("on the emulator") != std::string::npos);
  CHECK(v.detail.find("in its sandbox") == std::string::npos);
}
#endif
