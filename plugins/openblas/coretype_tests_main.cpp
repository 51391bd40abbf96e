// main() of arbiter_openblas_coretype_tests (tests/test_openblas_coretype.cpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include "doctest_main.hpp"

int main(int argc, char** argv) { return arbiter::test::run_doctest(argc, argv); }
