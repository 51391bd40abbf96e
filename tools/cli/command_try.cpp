// arbiter try <manifest.toml> [--arch=sm_XY]: the feedback loop for a kernel generator.
// Compiles one generated kernel with NVRTC (for the GPU present, else --arch, default
// sm_90a), then, on a GPU, verifies it through the gate and times it against the current
// winners on every shape its manifest claims. Prints one JSON object; without a GPU it
// still compiles and says why verification and timing did not run.
#include "cli.hpp"

#include "common/failure.hpp"
#include "common/names.hpp"
#include "common/quoted.hpp"
#include "dispatch/problem.hpp"
#include "dispatch/problem_text.hpp"

#if defined(ARBITER_WITH_CUDA)
#include "kernel_manifest.hpp"
#include "nvrtc_compiler.hpp"

#include <cuda_runtime.h>
#endif

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

namespace arbiter::cli {

#if defined(ARBITER_WITH_CUDA)

int command_try(const Arguments& args) {
  if (args.positional.size() != 1) fail(ARB_ERR_INVALID_ARGUMENT, "try needs one manifest: arbiter try <manifest.toml>");
  const std::string path = args.positional[0];
  std::ostringstream json;
  json << "{\n  \"manifest\": " << quoted(path);
  generated::Manifest manifest;
  try {
    manifest = generated::load_manifest(path);
  } catch (const std::exception& e) {
    json << ",\n  \"manifest_ok\": false,\n  \"manifest_error\": " << quoted(e.what()) << ",\n  \"compiled\": false\n}\n";
    fmt::print("{}", json.str());
    return 5;
  }
  json << ",\n  \"manifest_ok\": true,\n  \"name\": " << quoted(manifest.name) << ",\n  \"op\": "
       << quoted(std::string(op_name(manifest.op))) << ",\n  \"source_sha256\": "
       << quoted(manifest.provenance.source_sha256) << ",\n  \"provenance\": {\"generator\": "
       << quoted(manifest.provenance.generator) << ", \"date\": " << quoted(manifest.provenance.date) << "}";

  // The device decides the architecture; without one, --arch (default sm_90a).
  int count = 0;
  std::string device_text;
  std::string arch = args.option("arch").empty() ? "sm_90a" : args.option("arch");
  const cudaError_t status = cudaGetDeviceCount(&count);
  const bool gpu = status == cudaSuccess && count > 0;
  if (gpu) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    arch = generated::arch_for(prop.major, prop.minor);
    device_text = fmt::format("{} ({})", prop.name, arch);
  } else {
    device_text = std::string("no CUDA device: ") + (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
  }
  json << ",\n  \"device\": " << quoted(device_text) << ",\n  \"compile\": {\"arch\": " << quoted(arch)
       << ", \"nvrtc\": " << quoted(generated::nvrtc_version()) << ", \"dtypes\": {";
  bool all_compiled = true;
  const std::string cache = generated::default_cache_dir();
  for (size_t i = 0; i < manifest.dtypes.size(); ++i) {
    const generated::CompileResult r = generated::compile(manifest, manifest.dtypes[i], arch, cache);
    all_compiled &= r.ok;
    json << (i ? ", " : "") << quoted(std::string(dtype_name(manifest.dtypes[i]))) << ": {\"compiled\": "
         << (r.ok ? "true" : "false") << ", \"cubin_bytes\": " << r.cubin.size() << ", \"cache\": "
         << quoted(r.from_cache ? "hit" : "miss") << ", \"nvrtc_log\": " << quoted(r.log) << "}";
  }
  json << "}},\n  \"compiled\": " << (all_compiled ? "true" : "false");

  bool verified_all = all_compiled;
  if (!gpu || !all_compiled) {
    const std::string why = !all_compiled ? "not run: the kernel did not compile" : "not run: " + device_text;
    json << ",\n  \"verified\": null,\n  \"verification\": " << quoted(why) << ",\n  \"timing\": " << quoted(why);
  } else {
    // The generated plugin loads this manifest too; the rest of the context is as configured.
    setenv("ARBITER_GENERATED_MANIFESTS", path.c_str(), 1);
    const auto context = make_context(args);
    const KernelRecord* candidate = context->registry().find("generated." + manifest.name);
    if (candidate == nullptr) {
      json << ",\n  \"verified\": false,\n  \"verification\": "
           << quoted("the generated plugin did not load it (a name taken by another kernel?): see `arbiter plugins`")
           << ",\n  \"timing\": null";
      verified_all = false;
    } else {
      std::string verification, timing;
      for (const std::string& text : manifest.shapes) {
        const arb_problem p = parse_problem(text).problem;
        std::string why;
        const bool supported = kernel_supports(*candidate, p, &why);
        const Verdict v = supported ? context->gate().verdict(*candidate, p, true) : Verdict{};
        verified_all &= supported && v.passed;
        verification += fmt::format("{}{{\"shape\": {}, \"supported\": {}, \"passed\": {}, \"checks\": {}}}",
                                    verification.empty() ? "" : ", ", quoted(text), supported ? "true" : "false",
                                    supported && v.passed ? "true" : "false",
                                    quoted(supported ? v.summary() + (v.passed ? "" : "\n" + v.detail) : why));
        if (!supported || !v.passed) continue;
        const TuneResult r = context->tuner().tune(p, nullptr);
        const Candidate* mine = nullptr;
        const Candidate* best_other = nullptr;
        for (const Candidate& c : r.candidates) {
          if (c.stats.samples == 0) continue;
          if (c.kernel == candidate) mine = &c;
          else if (!best_other || c.stats.median < best_other->stats.median) best_other = &c;
        }
        timing += fmt::format(
            "{}{{\"shape\": {}, \"median_us\": {}, \"incumbent\": {}, \"incumbent_median_us\": {}, \"speedup\": {}, "
            "\"winner\": {}}}",
            timing.empty() ? "" : ", ", quoted(text), mine ? fmt::format("{:.4g}", mine->stats.median * 1e6) : "null",
            best_other ? quoted(best_other->kernel->name) : "null",
            best_other ? fmt::format("{:.4g}", best_other->stats.median * 1e6) : "null",
            mine && best_other ? fmt::format("{:.3f}", best_other->stats.median / mine->stats.median) : "null",
            r.winning() ? quoted(r.winning()->kernel->name) : "null");
      }
      json << ",\n  \"verified\": " << (verified_all ? "true" : "false") << ",\n  \"verification\": [" << verification
           << "],\n  \"timing\": [" << timing << "]";
    }
  }
  json << "\n}\n";
  fmt::print("{}", json.str());
  return all_compiled && (verified_all || !gpu) ? 0 : 5;
}

#else

int command_try(const Arguments& args) {
  if (args.positional.size() != 1) fail(ARB_ERR_INVALID_ARGUMENT, "try needs one manifest: arbiter try <manifest.toml>");
  fmt::print("{{\n  \"manifest\": {},\n  \"compiled\": false,\n  \"reason\": {}\n}}\n", quoted(args.positional[0]),
             quoted("this arbiter was built without CUDA (ARBITER_CUDA=OFF or no toolkit): nothing to compile with"));
  return 5;
}

#endif

}  // namespace arbiter::cli
