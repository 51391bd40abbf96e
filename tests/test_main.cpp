#define DOCTEST_CONFIG_IMPLEMENT
#include "common/log.hpp"

#include <doctest/doctest.h>

#include <cstdio>

namespace {

// Counts the test cases a run selected, so that a filter matching nothing (a test name
// CTest split, a typo) fails instead of passing vacuously.
int selected = -1;

struct SelectionCounter : doctest::IReporter {
  explicit SelectionCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    selected = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("selection-counter", 1, SelectionCounter);

}  // namespace

int main(int argc, char** argv) {
  // The fixtures make the loader warn on purpose; keep the test output for failures.
  arbiter::set_log_level(ARB_LOG_ERROR);
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (result == 0 && selected == 0 && !context.shouldExit()) {
    std::fprintf(stderr, "no test case matched the filters: nothing was tested\n");
    return 1;
  }
  return result;
}
