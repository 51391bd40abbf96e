// Compiles generated kernels with NVRTC, for one dtype and one GPU architecture, with an
// on-disk cache keyed by the SHA-256 of the source, the prelude, the options, the
// architecture and the NVRTC version. Needs no GPU: the compile path runs anywhere the
// NVRTC library is.
#pragma once

#include "kernel_manifest.hpp"

#include <string>

namespace arbiter::generated {

struct CompileResult {
  bool ok = false;
  std::string log;    // NVRTC's log (warnings too), or why nothing was compiled
  std::string cubin;  // the binary, when ok
  bool from_cache = false;
  std::string key;    // the cache key
};

// "sm_90a" for compute capability 9.0 (arch-specific features), "sm_XY" otherwise.
std::string arch_for(int major, int minor);

// The cache folder: $ARBITER_NVRTC_CACHE, else $XDG_CACHE_HOME/arbiter/nvrtc, else
// $HOME/.cache/arbiter/nvrtc; "" (no caching) if none can be used. ARBITER_NVRTC_CACHE=""
// turns caching off.
std::string default_cache_dir();

// "13.0", or "unavailable" when NVRTC cannot be opened (nvrtc_library.hpp)
std::string nvrtc_version();

// The prelude header generated kernels include as "arbiter_kernel.h".
const char* kernel_prelude();

CompileResult compile(const Manifest& manifest, int32_t dtype, const std::string& arch, const std::string& cache_dir);

}  // namespace arbiter::generated
