#include "nvrtc_compiler.hpp"

#include "arbiter_base/sha256.hpp"
#include "nvrtc_library.hpp"

#include <nvrtc.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace arbiter::generated {
namespace {

namespace fs = std::filesystem;

const char* dtype_macro(int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return "-DARB_DTYPE_F32";
    case ARB_DTYPE_F16: return "-DARB_DTYPE_F16";
    default: return "-DARB_DTYPE_BF16";
  }
}

bool read_binary(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return !out.empty();
}

// Written beside, then renamed: a reader never sees half a binary.
void write_binary(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!out) return;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return;
  }
  fs::rename(temporary, path, ec);
  if (ec) fs::remove(temporary, ec);
}

}  // namespace

std::string arch_for(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (major == 9 && minor == 0) arch += "a";
  return arch;
}

std::string nvrtc_version() {
  if (!nvrtc_unavailable().empty()) return "unavailable";
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string default_cache_dir() {
  if (const char* explicit_dir = std::getenv("ARBITER_NVRTC_CACHE")) return explicit_dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/arbiter/nvrtc";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/arbiter/nvrtc";
  return "";
}

CompileResult compile(const Manifest& manifest, int32_t dtype, const std::string& arch, const std::string& cache_dir) {
  CompileResult result;
  if (const std::string& why = nvrtc_unavailable(); !why.empty()) {
    result.log = why;
    return result;
  }
  const std::vector<std::string> options = {"--gpu-architecture=" + arch, "-std=c++17", "--device-as-default-execution-space",
                                            dtype_macro(dtype)};
  std::string keyed = manifest.source + '\0' + kernel_prelude() + '\0' + arch + '\0' + nvrtc_version();
  for (const std::string& o : options) keyed += '\0' + o;
  result.key = sha256_hex(keyed);
  const std::string cached = cache_dir.empty() ? "" : cache_dir + "/" + result.key + ".cubin";
  if (!cached.empty() && read_binary(cached, result.cubin)) {
    result.ok = true;
    result.from_cache = true;
    return result;
  }

  nvrtcProgram program = nullptr;
  const char* header = kernel_prelude();
  const char* header_name = "arbiter_kernel.h";
  nvrtcResult status = nvrtcCreateProgram(&program, manifest.source.c_str(), fs::path(manifest.source_path).filename().c_str(),
                                          1, &header, &header_name);
  if (status != NVRTC_SUCCESS) {
    result.log = std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(status);
    return result;
  }
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  status = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  result.log = log;
  if (status == NVRTC_SUCCESS) {
    size_t size = 0;
    if (nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS && size > 0) {
      result.cubin.resize(size);
      if (nvrtcGetCUBIN(program, result.cubin.data()) == NVRTC_SUCCESS) result.ok = true;
    }
    if (!result.ok) result.log += (result.log.empty() ? "" : "\n") + std::string("no CUBIN was produced");
  } else if (result.log.empty()) {
    result.log = nvrtcGetErrorString(status);
  }
  nvrtcDestroyProgram(&program);
  if (result.ok && !cached.empty()) write_binary(cached, result.cubin);
  return result;
}

}  // namespace arbiter::generated
