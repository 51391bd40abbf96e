// The generated plugin: AI-generated CUDA kernels kept as .cu sources with TOML manifests
// (docs/generated-kernels.md), compiled at load time with NVRTC for the GPU present (the
// compile cache makes later loads cheap), always verified by the gate before use.
// Manifests are found in the "generated" folder beside this plugin, in the folders and
// files of ARBITER_GENERATED_PATH (colon-separated), and in ARBITER_GENERATED_MANIFESTS
// (colon-separated manifest files, for `arbiter try`). A kernel that fails to compile is
// logged with NVRTC's log and left out; the others stay. Without a GPU the plugin refuses
// to load, saying why.
#include <arbiter/plugin.hpp>

#include "cuda_plugin_support.hpp"
#include "kernel_manifest.hpp"
#include "nvrtc_compiler.hpp"
#include "sha256.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using arbiter::generated::Manifest;
using arbiter::plugin::check_cuda;
using arbiter::plugin::Error;
using arbiter::plugin::Launch;
using arbiter::plugin::Why;

constexpr const char* kPlugin = "generated";

// One manifest, compiled and loaded: a function per dtype that compiled.
struct LoadedKernel {
  Manifest manifest;
  std::map<int32_t, cudaKernel_t> functions;
  std::vector<cudaLibrary_t> libraries;  // kept loaded for the life of the process
};

std::vector<std::string> split(const char* list) {
  std::vector<std::string> out;
  if (list == nullptr) return out;
  std::string rest(list);
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t colon = rest.find(':', start);
    const std::string item = rest.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!item.empty()) out.push_back(item);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// The manifests to load, in a stable order.
std::vector<std::string> manifest_files() {
  std::vector<std::string> roots;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&manifest_files), &info) != 0 && info.dli_fname != nullptr)
    roots.push_back((fs::path(info.dli_fname).parent_path() / "generated").string());
  for (const std::string& p : split(std::getenv("ARBITER_GENERATED_PATH"))) roots.push_back(p);
  std::vector<std::string> files;
  for (const std::string& root : roots) {
    std::error_code ec;
    if (fs::is_directory(root, ec)) {
      std::vector<std::string> here;
      for (const auto& entry : fs::directory_iterator(root, ec))
        if (entry.path().extension() == ".toml") here.push_back(entry.path().string());
      std::sort(here.begin(), here.end());
      files.insert(files.end(), here.begin(), here.end());
    } else if (fs::is_regular_file(root, ec)) {
      files.push_back(root);
    }
  }
  for (const std::string& f : split(std::getenv("ARBITER_GENERATED_MANIFESTS"))) files.push_back(f);
  return files;
}

dim3 dims(const arbiter::generated::Formula (&f)[3], const arb_problem& p, const char* what) {
  const int64_t x = f[0].evaluate(p), y = f[1].evaluate(p), z = f[2].evaluate(p);
  if (x < 1 || y < 1 || z < 1 || x > 0x7fffffff || y > 65535 || z > 65535)
    throw Error(ARB_ERR_KERNEL, std::string(what) + " out of range: " + std::to_string(x) + " x " + std::to_string(y) +
                                    " x " + std::to_string(z));
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z));
}

// Launches one compiled kernel with the arguments of its signature convention.
void launch(const LoadedKernel& k, const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  auto it = k.functions.find(p.dtype);
  if (it == k.functions.end()) throw Error(ARB_ERR_UNSUPPORTED, "not compiled for this dtype");
  const Manifest& m = k.manifest;
  const dim3 grid = dims(m.grid, p, "grid"), block = dims(m.block, p, "block");
  const int64_t shared = m.shared_bytes.evaluate(p);
  if (shared < 0) throw Error(ARB_ERR_KERNEL, "shared_bytes is negative");
  cudaStream_t stream = static_cast<cudaStream_t>(l.stream);
  const void* function = reinterpret_cast<const void*>(it->second);
  if (shared > 48 * 1024) {  // above the default limit a kernel must opt in (up to 227 KiB on Hopper)
    cudaFuncAttributes attributes{};  // set only when missing: the query is harmless inside a graph capture
    check_cuda(cudaFuncGetAttributes(&attributes, function), "cudaFuncGetAttributes");
    if (attributes.maxDynamicSharedSizeBytes < shared)
      check_cuda(cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)),
            "cudaFuncSetAttribute (dynamic shared memory)");
  }
  cudaError_t status = cudaSuccess;
  switch (p.op) {
    case ARB_OP_GEMM: {
      const void *a = o.a, *b = o.b, *c = o.c, *bias = o.bias;
      void* d = o.d;
      long long mm = p.m, n = p.n, kk = p.k, lda = p.lda, ldb = p.ldb, ldc = p.ldc, ldd = p.ldd;
      float alpha = o.alpha, beta = o.beta;
      int ta = p.trans_a, tb = p.trans_b, act = p.activation, has_c = p.has_c, has_bias = p.has_bias;
      void* args[] = {&a, &b, &c, &bias, &d, &mm, &n, &kk, &lda, &ldb, &ldc, &ldd, &alpha, &beta, &ta, &tb, &act, &has_c, &has_bias};
      status = cudaLaunchKernel(function, grid, block, args, static_cast<size_t>(shared), stream);
      break;
    }
    case ARB_OP_RMSNORM: {
      void* x = o.x;
      const void *residual = o.residual, *weight = o.weight;
      void* y = o.y;
      long long rows = p.rows, cols = p.cols, ld_x = p.ld_x, ld_r = p.ld_residual, ld_y = p.ld_y;
      float eps = o.eps;
      int has_residual = p.has_residual;
      void* args[] = {&x, &residual, &weight, &y, &rows, &cols, &ld_x, &ld_r, &ld_y, &eps, &has_residual};
      status = cudaLaunchKernel(function, grid, block, args, static_cast<size_t>(shared), stream);
      break;
    }
    case ARB_OP_SOFTMAX: {
      const void* x = o.x;
      void* y = o.y;
      long long rows = p.rows, cols = p.cols, ld_x = p.ld_x, ld_y = p.ld_y;
      void* args[] = {&x, &y, &rows, &cols, &ld_x, &ld_y};
      status = cudaLaunchKernel(function, grid, block, args, static_cast<size_t>(shared), stream);
      break;
    }
    default: throw Error(ARB_ERR_UNSUPPORTED, "unknown op");
  }
  check_cuda(status, "cudaLaunchKernel");
}

arbiter::plugin::Plugin make() {
  const cudaDeviceProp prop = arbiter::plugin::require_cuda_device();
  const std::string arch = arbiter::generated::arch_for(prop.major, prop.minor);
  const std::string cache = arbiter::generated::default_cache_dir();

  // Referenced by the kernels' closures, so kept for the life of the library; each load
  // (one per context) appends its own. Contexts may be created on several threads at once.
  static std::vector<std::unique_ptr<LoadedKernel>> loaded;
  static std::mutex loading;
  const std::lock_guard<std::mutex> lock(loading);
  std::string identity = ARBITER_PLUGIN_BUILD_ID;            // plus every kernel's source hash
  int failed = 0;
  std::set<std::string> names;  // of this load
  const size_t first = loaded.size();
  for (const std::string& file : manifest_files()) {
    auto k = std::make_unique<LoadedKernel>();
    try {
      k->manifest = arbiter::generated::load_manifest(file);
    } catch (const std::exception& e) {
      arbiter::plugin::log(ARB_LOG_ERROR, kPlugin, "manifest %s skipped: %s", file.c_str(), e.what());
      ++failed;
      continue;
    }
    if (!names.insert(k->manifest.name).second) {  // the first in search order wins, as between plugins
      arbiter::plugin::log(ARB_LOG_WARN, kPlugin, "manifest %s skipped: a kernel named '%s' is already loaded",
                           file.c_str(), k->manifest.name.c_str());
      ++failed;
      continue;
    }
    for (int32_t dtype : k->manifest.dtypes) {
      const auto compiled = arbiter::generated::compile(k->manifest, dtype, arch, cache);
      if (!compiled.ok) {
        arbiter::plugin::log(ARB_LOG_ERROR, kPlugin, "%s (dtype %d) did not compile for %s:\n%s", file.c_str(), dtype,
                             arch.c_str(), compiled.log.c_str());
        continue;
      }
      cudaLibrary_t library = nullptr;
      cudaKernel_t function = nullptr;
      cudaError_t e = cudaLibraryLoadData(&library, compiled.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      if (e == cudaSuccess) e = cudaLibraryGetKernel(&function, library, k->manifest.entry.c_str());
      if (e != cudaSuccess) {
        arbiter::plugin::log(ARB_LOG_ERROR, kPlugin, "%s (dtype %d): loading the compiled kernel: %s", file.c_str(), dtype,
                             cudaGetErrorString(e));
        continue;
      }
      k->libraries.push_back(library);
      k->functions[dtype] = function;
    }
    if (k->functions.empty()) {
      ++failed;
      continue;
    }
    identity += k->manifest.provenance.source_sha256;
    loaded.push_back(std::move(k));
  }

  arbiter::plugin::Plugin plugin("generated", "1.0.0");
  plugin.provenance(ARB_PROVENANCE_AI_GENERATED)
      .priority(20)
      .build_id(arbiter::generated::sha256_hex(identity).substr(0, 16))
      .runtime_version("NVRTC " + arbiter::generated::nvrtc_version() + ", " + arch)
      .description("AI-generated CUDA kernels from .cu sources, compiled with NVRTC " +
                   arbiter::generated::nvrtc_version() + " for " + arch + " (" + std::to_string(loaded.size() - first) +
                   " loaded, " + std::to_string(failed) + " failed)");
  for (size_t i = first; i < loaded.size(); ++i) {
    const LoadedKernel* kernel = loaded[i].get();
    arbiter::plugin::Kernel definition(kernel->manifest.name, static_cast<arb_op>(kernel->manifest.op), kDLCUDA);
    definition.provenance(ARB_PROVENANCE_AI_GENERATED)
        .supports([kernel](const arb_problem& p, Why& why) {
          std::string reason;
          if (!arbiter::generated::satisfies(kernel->manifest, p, &reason)) return why.no("%s", reason.c_str());
          if (!kernel->functions.count(p.dtype)) return why.no("did not compile for this dtype");
          return true;
        })
        .launch([kernel](const Launch& l) { launch(*kernel, l); });
    if (!kernel->manifest.deterministic) definition.nondeterministic();
    plugin.kernel(std::move(definition));
  }
  return plugin;
}

}  // namespace

ARBITER_PLUGIN(make())
