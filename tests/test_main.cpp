#define DOCTEST_CONFIG_IMPLEMENT
#include "common/log.hpp"
#include "doctest_main.hpp"

int main(int argc, char** argv) {
  // The fixtures make the loader warn on purpose; keep the test output for failures.
  arbiter::set_log_level(ARB_LOG_ERROR);
  return arbiter::test::run_doctest(argc, argv);
}
