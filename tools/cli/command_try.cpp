// arbiter try <manifest.toml> [--arch=sm_XY] [--device=cuda-emulated]: the feedback loop for
// a kernel generator. Compiles one generated kernel with NVRTC (for the GPU present, else
// --arch, default sm_90a), then verifies it through the gate on every shape its manifest
// claims and, on a GPU, times it against the current winners. Without a GPU (or with
// --device=cuda-emulated) the SIMT emulator runs the same source: a real verdict, and
// "emulated: correctness only" where the times would be. Prints one JSON object.
#include "cli.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "arbiter_base/cuda_absence.hpp"
#include "common/string_literal.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"

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

// The shapes a manifest claims; if it claims none, one ordinary problem per dtype it lists,
// so that no kernel passes for want of a test.
std::vector<std::string> shapes_to_try(const generated::Manifest& manifest) {
  if (!manifest.shapes.empty()) return manifest.shapes;
  std::vector<std::string> shapes;
  for (const int32_t dtype : manifest.dtypes) {
    const std::string d(dtype_name(dtype));
    if (const Op* op = find_op(manifest.op))
      shapes.push_back(fmt::format("{} {} {} device=cuda", op->name(), d, op->example_fields()));
  }
  return shapes;
}

// Why the manifest cannot be tried on the shapes above, or "": a shape that does not parse,
// or one its launch formulas give no launch for (overflow, division by zero, a grid or block
// CUDA refuses). Said as the manifest's error, before anything is compiled.
std::string shape_error(const generated::Manifest& manifest) {
  for (const std::string& text : shapes_to_try(manifest)) {
    arb_problem p{};
    try {
      p = parse_problem(text).problem;
    } catch (const std::exception& e) {
      return fmt::format("shape '{}' does not parse: {}", text, e.what());
    }
    std::string why;
    if (!generated::launch_dims(manifest.grid, manifest.block, manifest.shared_bytes, p, why))
      return fmt::format("shape '{}' has no launch: {}", text, why);
  }
  return "";
}

// One shape's timing on the GPU: this kernel against the fastest other verified kernel.
std::string timing_json(Context& context, const KernelRecord& candidate, const arb_problem& p, const std::string& text,
                        bool first) {
  const TuneResult r = context.tuner().tune(p, nullptr);
  const Candidate* mine = nullptr;
  const Candidate* best_other = nullptr;
  for (const Candidate& c : r.candidates) {
    if (c.stats.samples == 0) continue;
    if (c.kernel == &candidate) mine = &c;
    else if (!best_other || c.stats.median < best_other->stats.median) best_other = &c;
  }
  return fmt::format(
      "{}{{\"shape\": {}, \"median_us\": {}, \"incumbent\": {}, \"incumbent_median_us\": {}, \"speedup\": {}, "
      "\"winner\": {}}}",
      first ? "" : ", ", string_literal(text), mine ? fmt::format("{:.4g}", mine->stats.median * 1e6) : "null",
      best_other ? string_literal(best_other->kernel->name) : "null",
      best_other ? fmt::format("{:.4g}", best_other->stats.median * 1e6) : "null",
      mine && best_other ? fmt::format("{:.3f}", best_other->stats.median / mine->stats.median) : "null",
      r.winning() ? string_literal(r.winning()->kernel->name) : "null");
}

int command_try(const Arguments& args) {
  if (args.positional.size() != 1) fail(ARB_ERR_INVALID_ARGUMENT, "try needs one manifest: arbiter try <manifest.toml>");
  const std::string path = args.positional[0];
  std::ostringstream json;
  json << "{\n  \"manifest\": " << string_literal(path);
  generated::Manifest manifest;
  std::string manifest_error;
  try {
    manifest = generated::load_manifest(path);
    manifest_error = shape_error(manifest);
  } catch (const std::exception& e) {
    manifest_error = e.what();
  }
  if (!manifest_error.empty()) {
    json << ",\n  \"manifest_ok\": false,\n  \"manifest_error\": " << string_literal(manifest_error)
         << ",\n  \"compiled\": false\n}\n";
    fmt::print("{}", json.str());
    return 5;
  }
  json << ",\n  \"manifest_ok\": true,\n  \"name\": " << string_literal(manifest.name) << ",\n  \"op\": "
       << string_literal(std::string(op_name(manifest.op))) << ",\n  \"source_sha256\": "
       << string_literal(manifest.provenance.source_sha256) << ",\n  \"provenance\": {\"generator\": "
       << string_literal(manifest.provenance.generator) << ", \"date\": " << string_literal(manifest.provenance.date) << "}";

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
    device_text = status != cudaSuccess ? no_cuda_device_reason(status, cudaGetErrorString(status))
                                        : std::string("no CUDA device: 0 devices");
  }
  json << ",\n  \"device\": " << string_literal(device_text) << ",\n  \"compile\": {\"arch\": " << string_literal(arch)
       << ", \"nvrtc\": " << string_literal(generated::nvrtc_version()) << ", \"dtypes\": {";
  bool all_compiled = true;
  const std::string cache = generated::default_cache_dir();
  for (size_t i = 0; i < manifest.dtypes.size(); ++i) {
    const generated::CompileResult r = generated::compile(manifest, manifest.dtypes[i], arch, cache);
    all_compiled &= r.ok;
    json << (i ? ", " : "") << string_literal(std::string(dtype_name(manifest.dtypes[i]))) << ": {\"compiled\": "
         << (r.ok ? "true" : "false") << ", \"cubin_bytes\": " << r.cubin.size() << ", \"cache\": "
         << string_literal(r.from_cache ? "hit" : "miss") << ", \"nvrtc_log\": " << string_literal(r.log) << "}";
  }
  json << "}},\n  \"compiled\": " << (all_compiled ? "true" : "false");

  // Where it is verified: the GPU, else (or with --device=cuda-emulated) the SIMT emulator,
  // which gives a real verdict and no time worth reporting.
  const bool emulate = emulated_device(args) || !gpu;
  json << ",\n  \"emulated\": " << (emulate ? "true" : "false");
  bool verified_all = all_compiled;
  if (!all_compiled) {
    const std::string why = "not run: the kernel did not compile";
    json << ",\n  \"verified\": null,\n  \"verification\": " << string_literal(why) << ",\n  \"timing\": " << string_literal(why);
  } else {
    // The generated plugin loads this manifest too; the rest of the context is as configured.
    setenv("ARBITER_GENERATED_MANIFESTS", path.c_str(), 1);
    Arguments context_args = args;
    if (emulate && !emulated_device(args)) context_args.options.push_back("--device=cuda-emulated");
    const auto context = make_context(context_args);
    const KernelRecord* candidate = context->registry().find("generated." + manifest.name);
    if (context->devices().cuda == nullptr) {
      const std::string why = "not run: " + device_text + ", and no SIMT emulator: " + context->devices().cuda_unavailable;
      json << ",\n  \"verified\": null,\n  \"verification\": " << string_literal(why) << ",\n  \"timing\": " << string_literal(why);
    } else if (candidate == nullptr) {
      json << ",\n  \"verified\": false,\n  \"verification\": "
           << string_literal("the generated plugin did not load it (a name taken by another kernel?): see `arbiter plugins`")
           << ",\n  \"timing\": null";
      verified_all = false;
    } else {
      std::string verification, timing;
      const std::vector<std::string> shapes = shapes_to_try(manifest);
      verified_all = !shapes.empty();
      for (const std::string& text : shapes) {
        const arb_problem p = parse_problem(text).problem;
        std::string why;
        const bool supported = kernel_supports(*candidate, p, &why);
        // The claimed shapes at their own size too (where the fp64 reference can afford it):
        // they are what gets timed, so they are what must be right.
        const Verdict v = supported ? context->gate().reverify(*candidate, p) : Verdict{};
        verified_all &= supported && v.passed;
        verification += fmt::format("{}{{\"shape\": {}, \"supported\": {}, \"passed\": {}, \"checks\": {}}}",
                                    verification.empty() ? "" : ", ", string_literal(text), supported ? "true" : "false",
                                    supported && v.passed ? "true" : "false",
                                    string_literal(supported ? v.summary() + (v.passed ? "" : "\n" + v.detail) : why));
        if (!supported || !v.passed || emulate) continue;
        timing += timing_json(*context, *candidate, p, text, timing.empty());
      }
      json << ",\n  \"verified\": " << (verified_all ? "true" : "false") << ",\n  \"verification\": [" << verification
           << "],\n  \"timing\": ";
      if (emulate)
        json << string_literal("emulated: correctness only (verified on arbiter's SIMT emulator, the CUDA source run on the "
                       "CPU; its times say nothing about a GPU, so none is reported)");
      else
        json << "[" << timing << "]";
    }
  }
  json << "\n}\n";
  fmt::print("{}", json.str());
  return all_compiled && verified_all ? 0 : 5;
}

#else

int command_try(const Arguments& args) {
  if (args.positional.size() != 1) fail(ARB_ERR_INVALID_ARGUMENT, "try needs one manifest: arbiter try <manifest.toml>");
  fmt::print("{{\n  \"manifest\": {},\n  \"compiled\": false,\n  \"reason\": {}\n}}\n", string_literal(args.positional[0]),
             string_literal("this arbiter was built without CUDA (ARBITER_CUDA=OFF or no toolkit): nothing to compile with"));
  return 5;
}

#endif

}  // namespace arbiter::cli
