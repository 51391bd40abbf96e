#include "nvrtc_library.hpp"

#include "arbiter_base/library_symbols.hpp"

#include <nvrtc.h>

#include <cstddef>
#include <mutex>

namespace {

enum Symbol : size_t {
  version,
  error_string,
  create_program,
  compile_program,
  program_log_size,
  program_log,
  cubin_size,
  cubin,
  destroy_program,
  symbol_count
};
constexpr const char* kNames[symbol_count] = {"nvrtcVersion",          "nvrtcGetErrorString", "nvrtcCreateProgram",
                                              "nvrtcCompileProgram",   "nvrtcGetProgramLogSize", "nvrtcGetProgramLog",
                                              "nvrtcGetCUBINSize",     "nvrtcGetCUBIN",       "nvrtcDestroyProgram"};

void* resolved[symbol_count] = {};  // written once under nvrtc_unavailable's call_once

template <typename Fn>
Fn at(Symbol symbol) {
  return reinterpret_cast<Fn>(resolved[symbol]);
}

}  // namespace

namespace arbiter::generated {

const std::string& nvrtc_unavailable() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    failure = open_library_symbols({ARBITER_NVRTC_SONAME, ARBITER_NVRTC_TOOLKIT_PATH}, kNames, symbol_count, resolved);
    if (!failure.empty()) failure = "NVRTC: " + failure;
  });
  return failure;
}

}  // namespace arbiter::generated

// The forwarders, with nvrtc.h's signatures. Callers check nvrtc_unavailable() first; a call
// without NVRTC still returns an error instead of jumping to null.
#define ARB_NVRTC_FORWARD(name, symbol, ...)                                            \
  if (!arbiter::generated::nvrtc_unavailable().empty()) return NVRTC_ERROR_INTERNAL_ERROR; \
  return at<decltype(&name)>(symbol)(__VA_ARGS__)

extern "C" {

nvrtcResult nvrtcVersion(int* major, int* minor) { ARB_NVRTC_FORWARD(nvrtcVersion, version, major, minor); }

const char* nvrtcGetErrorString(nvrtcResult result) {
  if (!arbiter::generated::nvrtc_unavailable().empty()) return "NVRTC is not available";
  return at<decltype(&nvrtcGetErrorString)>(error_string)(result);
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram* program, const char* source, const char* name, int header_count,
                               const char* const* headers, const char* const* include_names) {
  ARB_NVRTC_FORWARD(nvrtcCreateProgram, create_program, program, source, name, header_count, headers, include_names);
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram program, int option_count, const char* const* options) {
  ARB_NVRTC_FORWARD(nvrtcCompileProgram, compile_program, program, option_count, options);
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram program, size_t* size) {
  ARB_NVRTC_FORWARD(nvrtcGetProgramLogSize, program_log_size, program, size);
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram program, char* log) {
  ARB_NVRTC_FORWARD(nvrtcGetProgramLog, program_log, program, log);
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram program, size_t* size) {
  ARB_NVRTC_FORWARD(nvrtcGetCUBINSize, cubin_size, program, size);
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram program, char* cubin_bytes) {
  ARB_NVRTC_FORWARD(nvrtcGetCUBIN, cubin, program, cubin_bytes);
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram* program) {
  ARB_NVRTC_FORWARD(nvrtcDestroyProgram, destroy_program, program);
}

}  // extern "C"
