// Runs doctest and fails a run whose filters selected no test case (a test name CTest split,
// a typo), instead of passing it vacuously. Include once, from a test executable's main.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>

namespace arbiter::test {

inline int selected_test_cases = -1;

struct SelectionCounter : doctest::IReporter {
  explicit SelectionCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    selected_test_cases = static_cast<int>(stats.numTestCasesPassingFilters);
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

inline int run_doctest(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (result == 0 && selected_test_cases == 0 && !context.shouldExit()) {
    std::fprintf(stderr, "no test case matched the filters: nothing was tested\n");
    return 1;
  }
  return result;
}

}  // namespace arbiter::test
