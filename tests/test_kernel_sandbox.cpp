// Untrusted kernels verified in a sandbox process (verify/kernel_sandbox.hpp,
// docs/verification.md, "Untrusted kernels run in a sandbox"), against the kernels of
// tests/fixtures/hostile.cpp: an exit(), abort(), crash or hang during verification is a
// failed verdict that says how the sandbox ended, the host goes on and dispatch serves the
// next verified kernel; work left running after a launch is seen; a kernel that behaves only
// in the sandbox is caught by the same checks in this process.
#include "config/config.hpp"
#include "problem/problem_text.hpp"
#include "verify/accuracy.hpp"
#include "verify/kernel_sandbox.hpp"
#include "verify/verifier.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

using namespace arbiter;

namespace {

// The shipped CPU kernels and the hostile ones, `kernel` chosen by an override.
std::unique_ptr<Context> with_hostile(const std::string& kernel, const std::string& verify = "") {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("hostile"));
  return test::make_context(test::config_loading(
      files, "[verify]\ntime_limit_s = 5\n" + verify + "[[dispatch.override]]\nop = \"softmax\"\nkernel = \"hostile." +
                 kernel + "\"\n"));
}

const KernelRecord& kernel_named(const Context& context, const std::string& name) {
  const KernelRecord* k = context.registry().find(name);
  REQUIRE_MESSAGE(k != nullptr, name);
  return *k;
}

// Calls through dispatch on random data and says whether the answer was the oracle's.
bool right_answer(Context& context, const arb_problem& problem) {
  ProblemBuffers inputs(problem, 1.0f, 0.0f, 1e-5f);
  inputs.randomize(7);
  ProblemBuffers result = inputs;
  context.run(problem, result.operands(), nullptr);
  const ProblemBuffers expected = reference_answer(*context.gate().oracle(problem.op), inputs);
  return compare_outputs(result, expected).accepted(tolerance_for(problem.dtype));
}

}  // namespace

TEST_CASE("a kernel that ends or hangs its process at the caller's size is refused with how, and the host goes on") {
  struct Case {
    const char* kernel;
    const char* ended;
  };
  for (const Case& c : {Case{"exit_on_large", "exited (status 0)"}, Case{"abort_on_large", "SIGABRT"},
                        Case{"spin_on_large", "did not finish within 5 s (verify.time_limit_s)"}}) {
    CAPTURE(c.kernel);
    const auto context = with_hostile(c.kernel);
    const KernelRecord& kernel = kernel_named(*context, std::string("hostile.") + c.kernel);
    const arb_problem small = parse_problem("softmax f32 rows=16 cols=64").problem;
    const arb_problem large = parse_problem("softmax f32 rows=256 cols=64").problem;  // the shrunk shapes have 64 rows
    CHECK(context->gate().verdict(kernel, small).passed);  // the class's shapes never meet the harm
    const Verdict v = context->gate().verdict(kernel, large);  // the problem at full size does
    CHECK_FALSE(v.passed);
    CHECK(v.failed("crashed"));
    CHECK_MESSAGE(v.detail.find(c.ended) != std::string::npos, v.detail);
    CHECK(v.detail.find("in its sandbox") != std::string::npos);
    CHECK(v.detail.find("this process is unharmed") != std::string::npos);
    // Dispatch of the large problem falls back to a verified kernel; this process is still here.
    CHECK(right_answer(*context, large));
    CHECK(context->dispatcher().select(large).kernel != &kernel);
  }
}

TEST_CASE("a kernel that crashes at every launch is refused: killed by SIGSEGV in its sandbox (or stopped by a sanitizer)") {
  const auto context = with_hostile("crashes");
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  const Verdict v = context->gate().verdict(kernel_named(*context, "hostile.crashes"), problem);
  CHECK_FALSE(v.passed);
  CHECK(v.failed("crashed"));
  // Under AddressSanitizer the sandbox reports the access itself and exits with status 1.
  const bool segv = v.detail.find("killed by SIGSEGV") != std::string::npos &&
                    v.detail.find("wild or out-of-bounds pointer") != std::string::npos;
  const bool sanitizer = v.detail.find("a sanitizer's report") != std::string::npos;
  CHECK_MESSAGE((segv || sanitizer), v.detail);
  CHECK(right_answer(*context, problem));
}

TEST_CASE("a kernel that leaves a thread writing its output after it returned is refused: wrote_after_return") {
  const auto context = with_hostile("lingering_writer");
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  const Verdict v = context->gate().verdict(kernel_named(*context, "hostile.lingering_writer"), problem);
  CHECK_FALSE(v.passed);
  // Usually the after-return check; on a slow machine (sanitizers) a late write can land
  // during the long series of launches at one address first, and is wrong there.
  if (v.failed("wrote_after_return"))
    CHECK(v.detail.find("y changed between the launch's return and 250 ms later") != std::string::npos);
  else
    CHECK_MESSAGE((v.failed("accuracy") || v.failed("stale_result")), v.detail);
}

TEST_CASE("a kernel right only inside the sandbox is caught by the same checks in this process") {
  const auto context = with_hostile("sandbox_aware");
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  const Verdict v = context->gate().verdict(kernel_named(*context, "hostile.sandbox_aware"), problem);
  CHECK_FALSE(v.passed);
  CHECK_MESSAGE(v.failed("accuracy"), v.detail);
}

TEST_CASE("honest kernels pass in the sandbox: the fixtures always, the shipped plugins with verify.sandbox = \"all\"") {
  for (const char* mode : {"untrusted", "all", "off"}) {
    CAPTURE(mode);
    std::vector<std::string> files = test::shipped_plugins();
    files.push_back(test::fixture_file("speeds"));
    const auto context =
        test::make_context(test::config_loading(files, std::string("[verify]\nsandbox = \"") + mode + "\"\n"));
    const arb_problem problem = parse_problem("softmax f32 rows=8 cols=1024").problem;
    for (const char* name : {"speeds.fast", "cpu.softmax"}) {
      CAPTURE(name);
      const Verdict v = context->gate().verdict(kernel_named(*context, name), problem);
      CHECK_MESSAGE(v.passed, v.detail);
    }
  }
}

TEST_CASE("a sandbox loads only the file the host hashed, and says so") {
  const auto context = with_hostile("crashes");
  const KernelRecord& real = kernel_named(*context, "hostile.crashes");
  PluginRecord other = {};
  other.path = real.plugin->path;
  other.sha256 = std::string(64, '0');  // not this file's
  KernelRecord claimed = real;
  claimed.plugin = &other;
  std::string why_not;
  const std::unique_ptr<KernelSandbox> sandbox =
      KernelSandbox::start(claimed, context->device(), KernelSandbox::TimeLimit{10}, &why_not);
  REQUIRE_MESSAGE(sandbox != nullptr, why_not);
  CHECK_MESSAGE(sandbox->ended().find("could not load the kernel: the plugin file changed") != std::string::npos,
                sandbox->ended());
  arb_operands none{};
  CHECK(sandbox->launch(parse_problem("softmax f32 rows=4 cols=64").problem, none, 0).find("ended") !=
        std::string::npos);
}

TEST_CASE("verify.sandbox, verify.time_limit_s and verify.after_return_ms are read and checked") {
  const Config config = parse_config("[verify]\nsandbox = \"all\"\ntime_limit_s = 7\nafter_return_ms = 0\n", "<t>", "");
  CHECK(config.verify.sandbox == VerifySandbox::all);
  CHECK(config.verify.time_limit_s == 7);
  CHECK(config.verify.after_return_ms == 0);
  CHECK(parse_config("", "<t>", "").verify.sandbox == VerifySandbox::untrusted);
  CHECK_THROWS_WITH(parse_config("[verify]\nsandbox = \"some\"\n", "<t>", ""),
                    doctest::Contains("'verify.sandbox' must be \"untrusted\", \"all\" or \"off\""));
  CHECK_THROWS_WITH(parse_config("[verify]\ntime_limit_s = 0\n", "<t>", ""),
                    doctest::Contains("'verify.time_limit_s' must be from 1 to 86400"));
  CHECK_THROWS_WITH(parse_config("[verify]\nafter_return_ms = -1\n", "<t>", ""),
                    doctest::Contains("'verify.after_return_ms' must be from 0 to 60000"));
}
