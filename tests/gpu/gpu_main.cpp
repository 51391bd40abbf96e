// The GPU tests. Without a usable CUDA device they report themselves skipped (exit 77,
// CTest's SKIP_RETURN_CODE) and say why; they never pass without having run.
#define DOCTEST_CONFIG_IMPLEMENT
#include "common/log.hpp"
#include "device/device.hpp"
#include "doctest_main.hpp"
#include "gpu_support.hpp"

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  arbiter::set_log_level(ARB_LOG_ERROR);
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing |= std::strncmp(argv[i], "--list", 6) == 0 || std::strncmp(argv[i], "-l", 2) == 0;
  std::string why;
  if (!listing && arbiter::test::make_test_cuda_device(&why) == nullptr) {
    std::printf("SKIPPED: the GPU tests need a CUDA device: %s\n", why.c_str());
    return 77;
  }
  return arbiter::test::run_doctest(argc, argv);
}
