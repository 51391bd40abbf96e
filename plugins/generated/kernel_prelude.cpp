// arbiter_kernel.h's text, embedded at build time: what generated kernels include, handed to
// NVRTC as a header (nvrtc_compiler.cpp) or written beside the source for emucc
// (emulated_module.cpp).
#include "nvrtc_compiler.hpp"

namespace arbiter::generated {

const char* kernel_prelude() {
  static const char* text =
#include "arbiter_kernel_h.inc"
      ;
  return text;
}

}  // namespace arbiter::generated
