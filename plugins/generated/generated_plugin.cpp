// The generated plugin: AI-generated CUDA kernels kept as .cu sources with TOML manifests
// (docs/generated-kernels.md), compiled at load time with NVRTC for the GPU present, or for
// the SIMT emulator in its emulated build (kernel_module.hpp; compile caches make later loads
// cheap), always verified by the gate before use.
// Manifests are found in the "generated" folder beside this plugin, in the folders and
// files of ARBITER_GENERATED_PATH (colon-separated), and in ARBITER_GENERATED_MANIFESTS
// (colon-separated manifest files, for `arbiter try`). A kernel that fails to compile is
// logged with NVRTC's log and left out; the others stay. Without a GPU the plugin refuses
// to load, saying why.
#include <arbiter/plugin.hpp>

#include "cuda_plugin_support.hpp"
#include "kernel_manifest.hpp"
#include "launch_geometry.hpp"
#include "arbiter_base/path_list.hpp"
#include "kernel_module.hpp"
#include "arbiter_base/sha256.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
using arbiter::split_path_list;

constexpr const char* kPlugin = "generated";

// One manifest, compiled and loaded: a module per dtype that compiled.
struct LoadedKernel {
  Manifest manifest;
  std::map<int32_t, std::unique_ptr<arbiter::generated::KernelModule>> functions;
};

// The manifests to load, in a stable order.
std::vector<std::string> manifest_files() {
  std::vector<std::string> roots;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&manifest_files), &info) != 0 && info.dli_fname != nullptr)
    roots.push_back((fs::path(info.dli_fname).parent_path() / "generated").string());
  for (const std::string& p : split_path_list(std::getenv("ARBITER_GENERATED_PATH"))) roots.push_back(p);
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
  for (const std::string& f : split_path_list(std::getenv("ARBITER_GENERATED_MANIFESTS"))) files.push_back(f);
  return files;
}

// Launches one compiled kernel with the arguments of its signature convention.
void launch(const LoadedKernel& k, const Launch& l) {
  const arb_problem& p = l.problem;
  auto it = k.functions.find(p.dtype);
  if (it == k.functions.end()) throw Error(ARB_ERR_UNSUPPORTED, "not compiled for this dtype");
  const Manifest& m = k.manifest;
  // supports() refused problems without a valid launch; checked again, as it costs little.
  std::string why;
  const std::optional<arbiter::generated::LaunchDims> dims =
      arbiter::generated::launch_dims(m.grid, m.block, m.shared_bytes, p, why);
  if (!dims) throw Error(ARB_ERR_KERNEL, "no launch for this problem: " + why);
  const dim3 grid(dims->grid[0], dims->grid[1], dims->grid[2]), block(dims->block[0], dims->block[1], dims->block[2]);
  check_cuda(it->second->launch(p, l.operands, grid, block, dims->shared_bytes, static_cast<cudaStream_t>(l.stream)),
             "launch");
}

arbiter::plugin::Plugin make() {
  arbiter::plugin::require_cuda_device();
  const std::string toolchain = arbiter::generated::module_toolchain();

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
      std::string log;
      auto module = arbiter::generated::build_module(k->manifest, dtype, log);
      if (module == nullptr) {
        arbiter::plugin::log(ARB_LOG_ERROR, kPlugin, "%s (dtype %d): %s", file.c_str(), dtype, log.c_str());
        continue;
      }
      k->functions[dtype] = std::move(module);
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
      .build_id(arbiter::sha256_hex(identity).substr(0, 16))
      .runtime_version(toolchain)
      .description("AI-generated CUDA kernels from .cu sources, compiled with " + toolchain + " (" +
                   std::to_string(loaded.size() - first) + " loaded, " + std::to_string(failed) + " failed)");
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
