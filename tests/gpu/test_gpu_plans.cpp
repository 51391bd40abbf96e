// Plans (arb_plan_create / arb_plan_run) on CUDA tensors: each run takes new device buffers,
// and a run captured into a CUDA graph replays on whatever the captured buffers hold then.
#include "gpu_support.hpp"

#include <arbiter/arbiter.h>

#include <string>

using namespace arbiter;

namespace {

struct Buffers {
  Buffers(int64_t m, int64_t n, int64_t k, int32_t dtype) : a(m * k, dtype), d(m * n, dtype) {}
  test::DeviceArray a, d;
};

}  // namespace

TEST_CASE("a gemm plan on CUDA tensors runs on new device buffers and replays from a CUDA graph") {
  const int64_t m = 4, n = test::light() ? 128 : test::emulated() ? 512 : 4096, k = n;
  const int32_t dtype = ARB_DTYPE_BF16;
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  const std::string toml = test::gpu_config(test::cuda_plugins());
  options.config_toml = toml.c_str();
  arb_context context = nullptr;
  REQUIRE_MESSAGE(arb_context_create(&options, &context) == ARB_OK, arb_last_error());

  // The plan is made over the first buffers; every run names its own.
  Buffers first(m, n, k, dtype), second(m, n, k, dtype);
  test::DeviceArray b(n * k, dtype);
  const std::vector<float> b_values = test::random_values(size_t(n * k), 2, dtype, 0.05f);
  b.upload(b_values);
  test::CudaTensor ta(first.a, {m, k}, dtype), tb(b, {n, k}, dtype), td(first.d, {m, n}, dtype);
  arb_gemm_args gemm = ARB_GEMM_ARGS_INIT;
  gemm.a = &ta.t;
  gemm.b = &tb.t;
  gemm.d = &td.t;
  gemm.trans_b = 1;
  arb_plan plan = nullptr;
  REQUIRE_MESSAGE(arb_plan_create(context, ARB_OP_GEMM, &gemm, &plan) == ARB_OK, arb_last_error());
  MESSAGE(test::plan_explanation(plan));
  CHECK(test::plan_explanation(plan).find("plan: runs ") == 0);

  cudaStream_t stream;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto operands = [&](Buffers& buffers) {
    arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
    o.tensors[0] = buffers.a.data();
    o.tensors[1] = b.data();
    o.tensors[4] = buffers.d.data();
    return o;
  };
  // Runs on one set of buffers with fresh inputs and a poisoned output, then the check.
  auto run_and_check = [&](Buffers& buffers, uint64_t seed) {
    const std::vector<float> a_values = test::random_values(size_t(m * k), seed, dtype);
    buffers.a.upload(a_values);
    buffers.d.poison();
    const arb_plan_operands o = operands(buffers);
    REQUIRE_MESSAGE(arb_plan_run(plan, &o, stream) == ARB_OK, arb_last_error());
    CUDA_REQUIRE(cudaStreamSynchronize(stream));
    const std::vector<double> want = test::rounded_to(test::gemm_nt_reference(a_values, b_values, m, n, k), dtype);
    CHECK(test::relative_error(buffers.d.download(), want) < 1e-2);  // bf16 output
  };
  // Alternate the buffers past the gate's first checked calls (verify.first_calls_checked),
  // which copy inputs and so cannot be captured.
  for (uint64_t run = 0; run < 4; ++run) {
    CAPTURE(run);
    run_and_check(run % 2 == 0 ? first : second, 10 + run);
  }

  // A run captured in global mode: anything not capturable on the plan's path fails it.
  cudaGraph_t graph = nullptr;
  const arb_plan_operands captured = operands(second);
  CUDA_REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const arb_status status = arb_plan_run(plan, &captured, stream);
  const std::string error = status == ARB_OK ? "" : arb_last_error();
  CUDA_REQUIRE(cudaStreamEndCapture(stream, &graph));
  REQUIRE_MESSAGE(status == ARB_OK, error);
  size_t nodes = 0;
  CUDA_REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(nodes >= 1);
  cudaGraphExec_t exec = nullptr;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  for (uint64_t step = 0; step < 2; ++step) {  // new inputs in the captured buffers: the replay computes
    CAPTURE(step);
    const std::vector<float> a_values = test::random_values(size_t(m * k), 100 + step, dtype);
    second.a.upload(a_values);
    second.d.poison();
    CUDA_REQUIRE(cudaGraphLaunch(exec, stream));
    CUDA_REQUIRE(cudaStreamSynchronize(stream));
    const std::vector<double> want = test::rounded_to(test::gemm_nt_reference(a_values, b_values, m, n, k), dtype);
    CHECK(test::relative_error(second.d.download(), want) < 1e-2);
  }
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));

  // Bad addresses are refused as on the CPU, before anything is queued.
  arb_plan_operands bad = operands(first);
  bad.tensors[4] = first.a.data();  // d over a
  CHECK(arb_plan_run(plan, &bad, stream) == ARB_ERR_INVALID_ARGUMENT);
  CHECK(std::string(arb_last_error()).find("overlaps") != std::string::npos);

  CUDA_REQUIRE(cudaStreamDestroy(stream));
  CHECK(arb_plan_destroy(plan) == ARB_OK);
  CHECK(arb_context_destroy(context) == ARB_OK);
}
