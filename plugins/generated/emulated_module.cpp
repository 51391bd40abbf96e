// Generated kernels on the SIMT emulator: arbiter-emucc's pipeline (emulator/emucc) compiles
// the kernel's .cu with the host compiler into a shared library against libarbiter_emu, kept
// in an on-disk cache keyed by everything that goes into it; dlopen loads it, and launches
// call the kernel through its signature convention's parameter types.
#include "kernel_module.hpp"

#include "compile.hpp"  // emulator/emucc
#include "nvrtc_compiler.hpp"
#include "arbiter_base/sha256.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

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

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx && *cxx ? cxx : "c++";
}

// The first line of `<compiler> --version`: part of what a cached module was built with.
std::string compiler_identity() {
  static const std::string identity = [] {
    std::string line;
    if (FILE* p = popen((compiler() + " --version 2>/dev/null").c_str(), "r")) {
      char buffer[256];
      if (fgets(buffer, sizeof buffer, p)) line = buffer;
      pclose(p);
    }
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    return line.empty() ? compiler() : line;
  }();
  return identity;
}

// The folder of libarbiter_emu.so, which the modules link.
// The file of the emulator library this plugin links ("" if the loader cannot say).
const std::string& emulator_library_path() {
  static const std::string path = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&arbiter::emu::device_description), &info) == 0 || !info.dli_fname)
      return std::string();
    return std::string(info.dli_fname);
  }();
  return path;
}

std::string emulator_library_dir() {
  const std::string& path = emulator_library_path();
  return path.empty() ? "" : fs::path(path).parent_path().string();
}

// What identifies the emulator library a module links: its path, size and modification time
// (a rebuilt libarbiter_emu, say with another instrumentation contract, is a new one).
std::string emulator_library_identity() {
  static const std::string identity = [] {
    if (emulator_library_path().empty()) return std::string("?");
    std::error_code ec;
    const fs::path path = fs::canonical(emulator_library_path(), ec);
    const auto size = fs::file_size(path, ec);
    const auto time = fs::last_write_time(path, ec).time_since_epoch().count();
    return path.string() + '\0' + std::to_string(size) + '\0' + std::to_string(time);
  }();
  return identity;
}

// The emulator's stand-in headers: installed beside the libraries, else in the source tree
// this plugin was built from.
std::string emulator_include_dir() {
  const fs::path installed = fs::path(emulator_library_dir()) / ".." / "share" / "arbiter" / "emulator" / "include";
  std::error_code ec;
  if (fs::is_regular_file(installed / "arbiter_emulator" / "prelude.hpp", ec)) return installed.lexically_normal().string();
  return ARBITER_EMU_INCLUDE_DIR;
}

// $ARBITER_EMUCC_CACHE, else $XDG_CACHE_HOME/arbiter/emucc, else ~/.cache/arbiter/emucc, else
// a folder of this process under /tmp.
std::string cache_dir() {
  if (const char* d = std::getenv("ARBITER_EMUCC_CACHE"); d && *d) return d;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/arbiter/emucc";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/arbiter/emucc";
  return "/tmp/arbiter-emucc-" + std::to_string(::getpid());
}

// Writes text to path unless the file already holds it (written beside, then renamed).
bool ensure_file(const fs::path& path, const std::string& text) {
  std::error_code ec;
  {
    std::ifstream in(path, std::ios::binary);
    std::stringstream current;
    current << in.rdbuf();
    if (in && current.str() == text) return true;
  }
  fs::create_directories(path.parent_path(), ec);
  const fs::path temporary = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    if (!out) return false;
  }
  fs::rename(temporary, path, ec);
  return !ec;
}

// The signature conventions' parameter lists (docs/generated-kernels.md), pointers as void.
using GemmKernel = void (*)(const void*, const void*, const void*, const void*, void*, long long, long long, long long,
                            long long, long long, long long, long long, float, float, int, int, int, int, int);
using RmsnormKernel = void (*)(void*, const void*, const void*, void*, long long, long long, long long, long long,
                               long long, float, int);
using SoftmaxKernel = void (*)(const void*, void*, long long, long long, long long, long long);
using AttentionKernel = void (*)(const void*, const void*, const void*, void*, long long, long long, long long, long long,
                                 long long, long long, long long, long long, long long, long long, long long, long long,
                                 long long, long long, long long, long long, long long, long long, float, int);

class EmulatedModule final : public KernelModule {
 public:
  EmulatedModule(void* library, void* entry) : library_(library), entry_(entry) {}
  // The library stays loaded for the life of the process: launches may be captured in graphs.

  cudaError_t launch(const arb_problem& p, const arb_operands& o, dim3 grid, dim3 block, size_t shared,
                     cudaStream_t stream) const override {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared;
    config.stream = stream;
    auto opt_in = [&](auto kernel) -> cudaError_t {
      if (shared <= 48 * 1024) return cudaSuccess;
      return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    };
    switch (p.op) {
      case ARB_OP_GEMM: {
        const auto kernel = reinterpret_cast<GemmKernel>(entry_);
        if (const cudaError_t e = opt_in(kernel); e != cudaSuccess) return e;
        return cudaLaunchKernelEx(&config, kernel, o.a, o.b, o.c, o.bias, o.d, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.ldd,
                                  o.alpha, o.beta, p.trans_a, p.trans_b, p.activation, p.has_c, p.has_bias);
      }
      case ARB_OP_RMSNORM: {
        const auto kernel = reinterpret_cast<RmsnormKernel>(entry_);
        if (const cudaError_t e = opt_in(kernel); e != cudaSuccess) return e;
        return cudaLaunchKernelEx(&config, kernel, o.x, o.residual, o.weight, o.y, p.rows, p.cols, p.ld_x, p.ld_residual,
                                  p.ld_y, o.eps, p.has_residual);
      }
      case ARB_OP_SOFTMAX: {
        const auto kernel = reinterpret_cast<SoftmaxKernel>(entry_);
        if (const cudaError_t e = opt_in(kernel); e != cudaSuccess) return e;
        return cudaLaunchKernelEx(&config, kernel, static_cast<const void*>(o.x), o.y, p.rows, p.cols, p.ld_x, p.ld_y);
      }
      case ARB_OP_ATTENTION: {
        const auto kernel = reinterpret_cast<AttentionKernel>(entry_);
        if (const cudaError_t e = opt_in(kernel); e != cudaSuccess) return e;
        return cudaLaunchKernelEx(&config, kernel, o.q, o.k, o.v, o.o, p.batch, p.q_len, p.kv_len, p.heads, p.kv_heads,
                                  p.cols, p.ld_q_batch, p.ld_q_token, p.ld_q_head, p.ld_k_batch, p.ld_k_token,
                                  p.ld_k_head, p.ld_v_batch, p.ld_v_token, p.ld_v_head, p.ld_o_batch, p.ld_o_token,
                                  p.ld_o_head, o.alpha, p.causal);
      }
      default: return cudaErrorInvalidValue;
    }
  }

 private:
  void* library_;
  void* entry_;
};

}  // namespace

std::string module_toolchain() { return compiler_identity() + " (arbiter-emucc), arbiter SIMT emulator, sm_90a"; }

std::unique_ptr<KernelModule> build_module(const Manifest& manifest, int32_t dtype, std::string& log) {
  const std::string cache = cache_dir();
  const std::string prelude = kernel_prelude();
  const fs::path prelude_dir = fs::path(cache) / ("prelude-" + sha256_hex(prelude).substr(0, 16));
  if (!ensure_file(prelude_dir / "arbiter_kernel.h", prelude)) {
    log = "cannot write arbiter_kernel.h into " + prelude_dir.string();
    return nullptr;
  }
  arbiter::emucc::CompileJob job;
  job.compiler = compiler();
  job.emulator_include = emulator_include_dir();
  job.shared_library = true;
  const std::string libdir = emulator_library_dir();
  // -g: the race check and the sanitizers name the kernel's source lines.
  job.flags = {"-O1", "-g", "-fPIC", dtype_macro(dtype), "-I" + prelude_dir.string(), "-w"};
#if defined(__SANITIZE_ADDRESS__)
  // The kernel instrumented too: an access past a device buffer is reported at the kernel's line.
  job.flags.insert(job.flags.end(), {"-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"});
#endif
  std::string identity = manifest.source + '\0' + prelude + '\0' + compiler_identity() + '\0' + ARBITER_PLUGIN_BUILD_ID +
                         '\0' + emulator_library_identity();
  for (const std::string& f : job.flags) identity += '\0' + f;
  for (const std::string& f : arbiter::emucc::fixed_compile_flags(job.flags)) identity += '\0' + f;
  const std::string key = sha256_hex(identity);
  job.libraries = {"-L" + libdir, "-larbiter_emu", "-Wl,-rpath," + libdir, "-Wl,--no-undefined"};
  const fs::path module = fs::path(cache) / (key + ".so");
  // Compiled beside, renamed into place: other processes may build the same module at once.
  // The manifest's own source file, so that reports name its lines.
  auto compile = [&]() -> bool {
    std::error_code ec;
    job.input = manifest.source_path;
    job.output = module.string() + ".tmp-" + std::to_string(::getpid());
    const arbiter::emucc::CompileResult compiled = arbiter::emucc::compile_for_emulator(job);
    if (!compiled.ok) {
      fs::remove(job.output, ec);
      log = "did not compile for the SIMT emulator:\n" + compiled.log;
      return false;
    }
    fs::rename(job.output, module, ec);
    if (ec) {
      fs::remove(job.output, ec);
      log = "cannot put the compiled module at " + module.string() + ": " + ec.message();
      return false;
    }
    return true;
  };
  std::error_code ec;
  const bool cached = fs::is_regular_file(module, ec);
  if (!cached && !compile()) return nullptr;
  void* library = dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr && cached) {
    // A cache entry that does not load (cut short, or built by another emulator) is rebuilt once.
    if (!compile()) return nullptr;
    library = dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (library == nullptr) {
    const char* error = dlerror();
    log = std::string("cannot load the compiled module: ") + (error ? error : "?");
    return nullptr;
  }
  void* entry = dlsym(library, manifest.entry.c_str());
  if (entry == nullptr) {
    log = "the compiled module has no extern \"C\" symbol " + manifest.entry;
    return nullptr;
  }
  return std::make_unique<EmulatedModule>(library, entry);
}

}  // namespace arbiter::generated
