// State a kernel leaves behind (tests/fixtures/leaks_state.cpp). A kernel may change the
// calling thread's floating-point control for its own work, but must give it back
// (plugin/float_control.hpp): every launch compares it before and after, puts it back, and
// fails the launch, so the gate refuses such a kernel and the application's arithmetic stays
// its own. A kernel verified in the sandbox that leaves file descriptors open is refused.
#include "common/failure.hpp"
#include "plugin/float_control.hpp"
#include "plugin/process_state.hpp"
#include "problem/problem_text.hpp"
#include "verify/accuracy.hpp"
#include "verify/verifier.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cfenv>

using namespace arbiter;

namespace {

std::unique_ptr<Context> with_leaks(const std::string& kernel, const std::string& sandbox) {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("leaks_state"));
  return test::make_context(test::config_loading(files, "[verify]\nsandbox = \"" + sandbox +
                                                            "\"\n[[dispatch.override]]\nop = \"softmax\"\nkernel = "
                                                            "\"leaks_state." + kernel + "\"\n"));
}

// 1/3 in f32 as this thread computes it now (volatile: computed at run time).
float one_third() {
  volatile float one = 1.0f, three = 3.0f;
  return one / three;
}

}  // namespace

TEST_CASE("a kernel that leaves the thread's floating-point control changed is refused, and the control is put back") {
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  const float expected = one_third();
  for (const char* kernel : {"softmax_rounds_toward_zero", "softmax_flushes_subnormals"}) {
    for (const char* sandbox : {"off", "untrusted"}) {
      CAPTURE(kernel);
      CAPTURE(sandbox);
      const auto context = with_leaks(kernel, sandbox);
      const KernelRecord& leaky = *context->registry().find(std::string("leaks_state.") + kernel);
      const Verdict v = context->gate().verdict(leaky, problem);
      CHECK_FALSE(v.passed);
      CHECK(v.failed("launch_failed"));
      CHECK(v.detail.find("floating-point control") != std::string::npos);
      CHECK(one_third() == expected);
      CHECK(std::fegetround() == FE_TONEAREST);

      // Dispatch serves the next verified kernel, and the caller's arithmetic is untouched.
      ProblemBuffers inputs(problem, 1.0f, 0.0f, 1e-5f);
      inputs.randomize(3);
      ProblemBuffers result = inputs;
      context->run(problem, result.operands(), nullptr);
      CHECK(context->dispatcher().select(problem).kernel->name != leaky.name);
      CHECK(compare_outputs(result, reference_answer(*context->gate().oracle(ARB_OP_SOFTMAX), inputs))
                .accepted(tolerance_for(problem.dtype)));
      CHECK(one_third() == expected);
    }
  }
}

TEST_CASE("a launch that leaks the control fails with what changed, and this thread gets it back") {
  const auto context = with_leaks("softmax_flushes_subnormals", "off");
  const arb_problem problem = parse_problem("softmax f32 rows=2 cols=8").problem;
  ProblemBuffers buffers(problem, 1.0f, 0.0f, 1e-5f);
  buffers.randomize(1);
  const FloatControl before = FloatControl::now();
  try {
    context->run_kernel(*context->registry().find("leaks_state.softmax_flushes_subnormals"), problem,
                        buffers.operands(), nullptr);
    FAIL("the launch should have failed");
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_KERNEL);
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("flush-to-zero on") != std::string::npos);
    CHECK(what.find("denormals-are-zero on") != std::string::npos);
  }
  CHECK(FloatControl::now() == before);
  volatile float tiny = 1e-40f;
  CHECK(tiny * 1.0f != 0.0f);  // subnormals survive again

  // A kernel that changes the control and restores it is fine.
  const auto fine = with_leaks("softmax_restores", "off");
  CHECK(fine->gate().verdict(*fine->registry().find("leaks_state.softmax_restores"), problem).passed);
}

TEST_CASE("a kernel that changes the process's state or leaks descriptors is refused, here or in its sandbox") {
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  struct Case {
    const char* kernel;
    const char* what;
  };
  for (const Case& c : {Case{"softmax_leaks_descriptor", "more open file descriptors"},
                        Case{"softmax_sets_sigpipe", "Broken pipe"}, Case{"softmax_umask_zero", "umask 0"},
                        Case{"softmax_chdir_root", "working directory"}}) {
    for (const char* sandbox : {"off", "untrusted"}) {
      CAPTURE(c.kernel);
      CAPTURE(sandbox);
      const ProcessState before = ProcessState::now();
      const auto context = with_leaks(c.kernel, sandbox);
      const Verdict v = context->gate().verdict(*context->registry().find(std::string("leaks_state.") + c.kernel), problem);
      CAPTURE(v.detail);
      CHECK_FALSE(v.passed);
      CHECK(v.failed(std::string(sandbox) == "off" ? "process_state" : "launch_failed"));
      CHECK(v.detail.find(c.what) != std::string::npos);
      // Put back (descriptors excepted, which nobody can give back): the host's own state.
      const ProcessState after = ProcessState::now();
      CHECK(after.changes_since(before, 64) == "");
      if (std::string(sandbox) == "off" && std::string(c.kernel) == "softmax_leaks_descriptor")
        CHECK(after.descriptors - before.descriptors < 64);  // stopped after a few dozen launches
    }
  }
}

TEST_CASE("a shadow-checked call that leaves the control changed quarantines its kernel, and the caller gets it back") {
  // Trusted, so the gate never verifies it: only the check of the live call can see it.
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("leaks_state"));
  const auto context = test::make_context(test::config_loading(
      files, test::trusting({test::fixture_file("leaks_state")}) +
                 "[verify]\nshadow_one_in = 1\n[[dispatch.override]]\nop = \"softmax\"\nkernel = "
                 "\"leaks_state.softmax_rounds_toward_zero\"\n"));
  const arb_problem problem = parse_problem("softmax f32 rows=4 cols=64").problem;
  const float expected = one_third();
  ProblemBuffers inputs(problem, 1.0f, 0.0f, 1e-5f);
  inputs.randomize(5);
  ProblemBuffers result = inputs;
  context->run(problem, result.operands(), nullptr);
  CHECK(one_third() == expected);
  const std::optional<std::string> why =
      context->gate().quarantined(*context->registry().find("leaks_state.softmax_rounds_toward_zero"));
  REQUIRE(why);
  CHECK(why->find("floating-point control") != std::string::npos);
  CHECK(context->dispatcher().select(problem).kernel->name != "leaks_state.softmax_rounds_toward_zero");
}
