// Every CUDA kernel against the fp64 reference through the verification gate, which runs
// each problem on its edge-shape set (odd sizes, padded strides, the alignment class kept)
// with fresh random inputs, guards, reruns and stale-data checks. A kernel that supports
// none of the problems below fails the test: nothing passes without having run.
#include "problem/problem_text.hpp"
#include "tune/tuner.hpp"
#include "gpu_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <map>

using namespace arbiter;

namespace {

// Every layout and epilogue at a decode, a prefill and an odd (alignment 2-4) size. The
// emulator runs a kernel some 10^4 times slower than a GPU, so there each dtype and layout is
// tried once, the sizes and epilogues rotating over the twelve; two problems (full_size) are
// also verified whole: m=200 n=264 k=520 has 9 k-tiles of 64 (the Hopper GEMM's 4 stages cycle
// twice; the sm80 GEMM's 3 stages, 17 k-tiles of 32) and 6 tiles over the emulator's 4 SMs
// (the persistent grid takes two in some blocks); m=16 n=64 k=4096 splits k into slices (the
// decode GEMM's reduction kernel runs).
std::vector<std::string> gemm_problems() {
  std::vector<std::string> problems;
  const char* dtypes[] = {"f32", "f16", "bf16"};
  const char* layouts[] = {"ta=0 tb=0", "ta=0 tb=1", "ta=1 tb=0", "ta=1 tb=1"};
  if (test::light())  // each GEMM kernel on one problem it takes: the tensor-core, decode and generic paths
    return {"gemm bf16 m=200 n=264 k=520 ta=0 tb=1 bias=1 act=gelu_tanh device=cuda",
            "gemm f32 m=16 n=64 k=4096 ta=0 tb=1 beta=1 device=cuda", "gemm f16 m=77 n=300 k=123 ta=1 tb=0 act=silu device=cuda"};
  if (test::emulated()) {
    const char* sizes[] = {"m=200 n=264 k=520", "m=16 n=64 k=4096", "m=77 n=300 k=123"};
    const char* epilogues[] = {"", "bias=1 act=gelu_tanh", "beta=1 act=silu", "bias=1 act=relu"};
    int i = 0;
    for (const char* dtype : dtypes)
      for (const char* layout : layouts) {
        problems.push_back(fmt::format("gemm {} {} {} {} device=cuda", dtype, sizes[i % 3], layout, epilogues[i % 4]));
        ++i;
      }
    // The tensor-core and decode GEMMs take ta=0 tb=1 only: each dtype once there.
    problems.push_back("gemm f16 m=200 n=264 k=520 ta=0 tb=1 device=cuda");
    problems.push_back("gemm bf16 m=16 n=64 k=4096 ta=0 tb=1 beta=1 device=cuda");
    return problems;
  }
  const char* sizes[] = {"m=16 n=4096 k=4096", "m=512 n=1024 k=1024", "m=77 n=300 k=123"};
  const char* epilogues[] = {"", "bias=1 act=relu", "bias=1 act=gelu_tanh", "act=gelu", "act=silu", "beta=1"};
  for (const char* dtype : dtypes)
    for (const char* layout : layouts)
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
  if (test::light())
    return {"rmsnorm f32 rows=3 cols=1000 residual=1 device=cuda", "rmsnorm bf16 rows=2 cols=4096 device=cuda",
            "rmsnorm f16 rows=2 cols=8192 device=cuda", "softmax f16 rows=3 cols=1000 device=cuda",
            "softmax bf16 rows=2 cols=4096 device=cuda", "softmax f32 rows=2 cols=32000 device=cuda",
            "swiglu bf16 rows=2 cols=14336 fused=1 device=cuda", "swiglu f32 rows=3 cols=1000 device=cuda"};
  const std::vector<const char*> row_counts = test::emulated() ? std::vector<const char*>{"rows=3"}
                                                               : std::vector<const char*>{"rows=1", "rows=16"};
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const char* rows : row_counts) {
      for (const char* cols : {"cols=4096", "cols=1000", "cols=8192"})
        for (const char* residual : {"residual=0", "residual=1"})
          problems.push_back(fmt::format("rmsnorm {} {} {} {} device=cuda", dtype, rows, cols, residual));
      for (const char* cols : {"cols=4096", "cols=1000", "cols=32000", "cols=128256"})
        problems.push_back(fmt::format("softmax {} {} {} device=cuda", dtype, rows, cols));
      for (const char* cols : {"cols=1000 fused=1", "cols=14336", "cols=28672 fused=1"})
        problems.push_back(fmt::format("swiglu {} {} {} device=cuda", dtype, rows, cols));
    }
  return problems;
}

// rope at decode (one token) and prefill, on both layouts: 16-byte vectors (a padded head
// stride with them), a pair at a time (dim 100 split-half, an odd head stride), Llama-2's base
// and positions up to 2^24. On the emulator one interleaved problem is also verified whole
// (full_size): 64 tokens of 32 heads are enough for the launcher to give a thread several heads.
std::vector<std::string> rope_problems() {
  if (test::light())
    return {"rope bf16 tokens=2 heads=4 dim=128 device=cuda",
            "rope f32 tokens=3 heads=5 dim=96 layout=interleaved ldhead=100 device=cuda"};
  std::vector<std::string> problems;
  const std::vector<const char*> token_counts = test::emulated() ? std::vector<const char*>{"tokens=3"}
                                                                 : std::vector<const char*>{"tokens=1", "tokens=4096"};
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const char* tokens : token_counts)
      for (const char* shape : {"heads=32 dim=128 layout=half", "heads=8 dim=128 layout=interleaved ldhead=136",
                                "heads=4 dim=100 layout=half maxpos=16777216", "heads=5 dim=64 layout=interleaved ldhead=65",
                                "heads=3 dim=96 layout=half theta=10000"})
        problems.push_back(fmt::format("rope {} {} {} device=cuda", dtype, tokens, shape));
  if (test::emulated()) problems.push_back("rope bf16 tokens=64 heads=32 dim=128 layout=interleaved device=cuda");
  return problems;
}

// attention: decode against a cache (split over the keys into chunks, GQA) and a causal prefill
// whose early rows see fewer chunks than the last; head_dim 64, 128 and 256, a fused-QKV query;
// for the tensor-core kernel, prefills of several 64-row blocks with partial key tiles.
std::vector<std::string> attention_problems() {
  if (test::light())
    return {"attention bf16 batch=2 q=3 kv=300 heads=4 kvheads=2 dim=64 causal=1 device=cuda",
            "attention f32 q=1 kv=700 heads=8 kvheads=2 dim=128 causal=1 device=cuda",
            "attention f16 q=20 kv=70 heads=4 kvheads=1 dim=128 causal=1 device=cuda"};
  std::vector<std::string> problems;
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    problems.push_back(fmt::format("attention {} q=1 kv=4096 heads=32 kvheads=8 dim=128 causal=1 device=cuda", dtype));
    problems.push_back(fmt::format("attention {} batch=16 q=1 kv=1024 heads=32 kvheads=8 dim=128 causal=1 "
                                   "ldq=6144,0,128 ldo=4096,0,128 device=cuda", dtype));
    problems.push_back(fmt::format("attention {} q=512 kv=512 heads=32 kvheads=8 dim=128 causal=1 device=cuda", dtype));
    problems.push_back(fmt::format("attention {} batch=2 q=3 kv=70 heads=4 kvheads=4 dim=256 device=cuda", dtype));
    // Non-causal GQA prefill over partial key tiles (smaller on the emulator: the gate's shapes
    // are cut to 128 a dimension there anyway).
    problems.push_back(fmt::format("attention {} batch=2 {} heads=8 kvheads=2 dim=64 device=cuda", dtype,
                                   test::emulated() ? "q=40 kv=90" : "q=200 kv=333"));
  }
  return problems;
}

// The MLP block at decode (one token, then 16) and a few rows of odd sizes with padded strides
// (the chain's steps refuse some of those: the fused kernel alone is verified there). Smaller on
// the emulator, whose gate cuts a problem down to 16 rows, hidden 256 and inter 512 anyway.
std::vector<std::string> mlp_problems() {
  if (test::light() || test::emulated())
    return {"mlp bf16 rows=1 hidden=256 inter=688 device=cuda", "mlp f32 rows=3 hidden=64 inter=128 device=cuda",
            "mlp f16 rows=5 hidden=33 inter=65 ldx=40 ldgate=36 lddown=70 device=cuda"};
  std::vector<std::string> problems;
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    problems.push_back(fmt::format("mlp {} rows=1 hidden=4096 inter=14336 device=cuda", dtype));
    problems.push_back(fmt::format("mlp {} rows=16 hidden=4096 inter=14336 device=cuda", dtype));
    problems.push_back(fmt::format("mlp {} rows=5 hidden=33 inter=65 ldx=40 ldgate=36 lddown=70 device=cuda", dtype));
  }
  return problems;
}

std::vector<std::string> qkv_problems() {
  if (test::light() || test::emulated())
    return {"qkv bf16 rows=1 hidden=256 heads=8 kvheads=2 dim=32 device=cuda",
            "qkv f32 rows=3 hidden=64 heads=4 kvheads=2 dim=16 layout=interleaved device=cuda",
            "qkv f16 rows=5 hidden=40 heads=3 kvheads=1 dim=8 ldx=48 ldy=48 device=cuda",
            // More units of pairs than the emulator's grid (4 SMs): blocks that take several.
            "qkv bf16 rows=17 hidden=72 heads=2 kvheads=1 dim=128 device=cuda"};
  std::vector<std::string> problems;
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    problems.push_back(fmt::format("qkv {} rows=1 hidden=4096 heads=32 kvheads=8 dim=128 device=cuda", dtype));
    problems.push_back(fmt::format("qkv {} rows=16 hidden=4096 heads=32 kvheads=8 dim=128 device=cuda", dtype));
    problems.push_back(fmt::format("qkv {} rows=5 hidden=40 heads=3 kvheads=1 dim=8 ldx=48 ldy=48 device=cuda", dtype));
  }
  return problems;
}

bool full_size(const std::string& problem) {
  return test::emulated() && !test::light() && (problem.find("gemm bf16 m=200 n=264 k=520 ta=0 tb=1") == 0 ||
                              problem.find("gemm f32 m=16 n=64 k=4096 ta=0 tb=1") == 0 ||
                              problem.find("rope bf16 tokens=64 heads=32") == 0);
}

bool is_algo_config(const KernelRecord& k) {
  return k.plugin->name == "cublaslt" && k.name != "cublaslt.heuristic" && k.name != "cublaslt.heuristic_tf32";
}

// Every CUDA kernel of `ops` through the gate on each of `problems` it supports (cuBLASLt's
// algorithm configurations on algo_config_problems()); at least `least` kernels, each verified
// on a problem. One test case per family of ops, so that CTest runs them side by side (on the
// emulator the whole set takes over ten minutes on one core).
void check_every_cuda_kernel(std::initializer_list<arb_op> ops, const std::vector<std::string>& problems, size_t least) {
  // Installed: the hand-written kernels verified here, the generated ones in their sandbox.
  const auto context = test::make_context(test::installed_gpu_config("[verify]\nallow_tf32 = true\n"));
  for (const char* plugin : {"cublaslt", "generated", "cuda"}) {
    if (test::emulated() && std::string(plugin) == "cublaslt") continue;  // NVIDIA's binary: no emulated build
    const PluginRecord* record = test::plugin_named(*context, plugin);
    REQUIRE_MESSAGE(record != nullptr, plugin);
    REQUIRE_MESSAGE(record->state == PluginState::loaded, plugin, ": ", record->reason);
    CHECK(record->origin == (test::emulated() ? "emulated" : "install"));
  }
  const std::vector<std::string> configs = algo_config_problems();
  std::map<std::string, int> verified;  // kernel -> problems it was verified on
  int verdicts = 0;
  for (const auto& plugin : context->registry().plugins()) {
    for (const KernelRecord& kernel : plugin->kernels) {
      if (kernel.abi.device_type != kDLCUDA || std::find(ops.begin(), ops.end(), kernel.abi.op) == ops.end()) continue;
      verified[kernel.name];
      for (const std::string& text : is_algo_config(kernel) ? configs : problems) {
        const arb_problem problem = parse_problem(text).problem;
        if (problem.op != kernel.abi.op || !kernel_supports(kernel, problem, nullptr)) continue;
        // reverify: new seeds and the problem at full size besides the shrunk shapes.
        const Verdict v = full_size(text) ? context->gate().reverify(kernel, problem) : context->gate().verdict(kernel, problem);
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
  CHECK(verified.size() >= least);
  for (const auto& [name, count] : verified) CHECK_MESSAGE(count > 0, name << " supports none of the test problems");
}

}  // namespace

// GEMM: cuBLASLt's two heuristics (on a GPU), the generated decode GEMM, and the hand-written
// split-K decode, wgmma (two tile widths) and mma.sync GEMMs.
TEST_CASE("every CUDA GEMM kernel passes the verification gate against the reference") {
  check_every_cuda_kernel({ARB_OP_GEMM}, gemm_problems(), test::emulated() ? 5u : 7u);
}

// Row ops: the generated RMSNorm and softmax, and the hand-written RMSNorm, softmax (two),
// SwiGLU and rope.
TEST_CASE("every CUDA RMSNorm, softmax, SwiGLU and rope kernel passes the verification gate against the reference") {
  std::vector<std::string> problems = norm_problems();
  const std::vector<std::string> ropes = rope_problems();
  problems.insert(problems.end(), ropes.begin(), ropes.end());
  check_every_cuda_kernel({ARB_OP_RMSNORM, ARB_OP_SOFTMAX, ARB_OP_SWIGLU, ARB_OP_ROPE}, problems, 7u);
}

// Attention: the generated decode kernel, split-KV and the tensor-core kernel.
TEST_CASE("every CUDA attention kernel passes the verification gate against the reference") {
  check_every_cuda_kernel({ARB_OP_ATTENTION}, attention_problems(), 3u);
}

// The MLP block: the hand-written fused kernels (three launches, one) and the chain of the CUDA single-op kernels.
TEST_CASE("every CUDA MLP-block kernel, fused or the chain, passes the verification gate against the reference") {
  check_every_cuda_kernel({ARB_OP_MLP}, mlp_problems(), 2u);
}

// The attention block's input: the hand-written fused kernel (one launch) and the chain of the CUDA single-op kernels.
TEST_CASE("every CUDA qkv kernel, fused or the chain, passes the verification gate against the reference") {
  check_every_cuda_kernel({ARB_OP_QKV}, qkv_problems(), 2u);
}

#if ARBITER_TEST_EMULATED
TEST_CASE("on the emulator the tuner verifies every candidate, times none and says so") {
  const auto context = test::make_context(test::gpu_config(test::cuda_plugins()));
  const arb_problem problem = parse_problem("rmsnorm bf16 rows=3 cols=1000 device=cuda").problem;
  const TuneResult r = context->tuner().tune(problem, nullptr);
  REQUIRE(r.winning() != nullptr);
  CHECK(r.winning()->verdict.passed);
  CHECK(r.method.find("correctness only") != std::string::npos);
  int verified = 0;
  for (const Candidate& c : r.candidates) {
    CAPTURE(c.kernel->name);
    CHECK_FALSE(c.measured);  // an emulated time means nothing
    if (c.verdict.passed) ++verified;
  }
  CHECK(verified >= 2);  // the hand-written and the generated kernel
}
#endif
