// NVRTC, opened when a kernel is first compiled, not when the code that compiles is loaded.
// The generated plugin and the arbiter program do not link libnvrtc: mapping and relocating
// it was 70% of a context's cost on a host without a GPU (where the plugin compiles nothing),
// with the file hash cache warm. nvrtc_library.cpp defines the NVRTC functions that
// nvrtc_compiler.cpp calls as forwarders to the library nvrtc_unavailable() opens.
#pragma once

#include <string>

namespace arbiter::generated {

// Opens libnvrtc (the toolkit's major version: by its SONAME, then at the toolkit's path
// found at build time) and resolves every function called, once; thread-safe. "" when NVRTC
// can be used, else why not.
const std::string& nvrtc_unavailable();

}  // namespace arbiter::generated
