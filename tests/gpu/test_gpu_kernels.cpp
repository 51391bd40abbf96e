// Every CUDA kernel against the fp64 reference through the verification gate, which runs
// each problem on its edge-shape set (odd sizes, padded strides, the alignment class kept)
// with fresh random inputs, guards, reruns and stale-data checks. A kernel that supports
// none of the problems below fails the test: nothing passes without having run.
#include "dispatch/problem_text.hpp"
#include "gpu_support.hpp"

#include <fmt/format.h>

#include <map>

using namespace arbiter;

namespace {

// Every layout and epilogue at a decode, a prefill and an odd (alignment 2-4) size.
std::vector<std::string> gemm_problems() {
  std::vector<std::string> problems;
  const char* sizes[] = {"m=16 n=4096 k=4096", "m=512 n=1024 k=1024", "m=77 n=300 k=123"};
  const char* epilogues[] = {"", "bias=1 act=relu", "bias=1 act=gelu_tanh", "act=gelu", "act=silu", "beta=1"};
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const char* layout : {"ta=0 tb=0", "ta=0 tb=1", "ta=1 tb=0", "ta=1 tb=1"})
      for (const char* size : sizes)
        for (const char* epilogue : epilogues)
          problems.push_back(fmt::format("gemm {} {} {} {} device=cuda", dtype, size, layout, epilogue));
  return problems;
}

// cuBLASLt's algorithm configurations are many (up to 64, each verified per problem class):
// the aligned sizes, the two layouts of LLM inference, no epilogue.
std::vector<std::string> algo_config_problems() {
  std::vector<std::string> problems;
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const char* layout : {"ta=0 tb=0", "ta=0 tb=1"})
      for (const char* size : {"m=16 n=4096 k=4096", "m=512 n=1024 k=1024"})
        problems.push_back(fmt::format("gemm {} {} {} device=cuda", dtype, size, layout));
  return problems;
}

std::vector<std::string> norm_problems() {
  std::vector<std::string> problems;
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const char* rows : {"rows=1", "rows=16"}) {
      for (const char* cols : {"cols=4096", "cols=1000", "cols=8192"})
        for (const char* residual : {"residual=0", "residual=1"})
          problems.push_back(fmt::format("rmsnorm {} {} {} {} device=cuda", dtype, rows, cols, residual));
      for (const char* cols : {"cols=4096", "cols=1000", "cols=32000", "cols=128256"})
        problems.push_back(fmt::format("softmax {} {} {} device=cuda", dtype, rows, cols));
    }
  return problems;
}

bool is_algo_config(const KernelRecord& k) {
  return k.plugin->name == "cublaslt" && k.name != "cublaslt.heuristic" && k.name != "cublaslt.heuristic_tf32";
}

}  // namespace

TEST_CASE("every CUDA kernel passes the verification gate against the reference") {
  const auto context = test::make_context(test::config_loading(test::cuda_plugins(), "[verify]\nallow_tf32 = true\n"));
  for (const char* plugin : {"cublaslt", "generated", "cuda"}) {
    const PluginRecord* record = test::plugin_named(*context, plugin);
    REQUIRE_MESSAGE(record != nullptr, plugin);
    REQUIRE_MESSAGE(record->state == PluginState::loaded, plugin, ": ", record->reason);
  }
  std::vector<std::string> all = gemm_problems(), norms = norm_problems();
  const std::vector<std::string> configs = algo_config_problems();
  all.insert(all.end(), norms.begin(), norms.end());

  std::map<std::string, int> verified;  // kernel -> problems it was verified on
  int verdicts = 0;
  for (const auto& plugin : context->registry().plugins()) {
    for (const KernelRecord& kernel : plugin->kernels) {
      if (kernel.abi.device_type != kDLCUDA) continue;
      verified[kernel.name];
      for (const std::string& text : is_algo_config(kernel) ? configs : all) {
        const arb_problem problem = parse_problem(text).problem;
        if (problem.op != kernel.abi.op || !kernel_supports(kernel, problem, nullptr)) continue;
        const Verdict v = context->gate().verdict(kernel, problem);
        CAPTURE(kernel.name);
        CAPTURE(text);
        CAPTURE(v.detail);
        CHECK(v.passed);
        ++verified[kernel.name];
        ++verdicts;
      }
    }
  }
  MESSAGE(verdicts << " verdicts over " << verified.size() << " CUDA kernels");
  // cuBLASLt's two heuristics, three generated kernels and three hand-written ones at least.
  CHECK(verified.size() >= 8);
  for (const auto& [name, problems] : verified)
    CHECK_MESSAGE(problems > 0, name << " supports none of the test problems");
}
