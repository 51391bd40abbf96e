// The public C API on CUDA tensors: a tuned dispatch captured into a CUDA graph and
// replayed on new data, and many threads dispatching on their own streams at once.
#include "gpu_support.hpp"

#include <arbiter/arbiter.h>

#include <atomic>
#include <filesystem>
#include <thread>

using namespace arbiter;

namespace {

arb_context create(const std::string& toml) {
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml.c_str();
  arb_context context = nullptr;
  REQUIRE_MESSAGE(arb_context_create(&options, &context) == ARB_OK, arb_last_error());
  return context;
}

}  // namespace

TEST_CASE("a tuned gemm + rmsnorm captured into a CUDA graph replays with the right result") {
  // A Llama-3-8B decode step in miniature: 16 tokens through a 4096 x 4096 projection, then
  // the norm. The first calls tune (tune-missing) and warm the selection cache; capture
  // then records only launches, which is what a graph needs.
  const int64_t m = 16, n = test::light() ? 128 : test::emulated() ? 512 : 4096, k = n;
  const int32_t dtype = ARB_DTYPE_BF16;
  const test::TempDir dir;
  const std::string table = dir.file("tuning-table.toml");
  arb_context context = create(test::gpu_config(
      test::cuda_plugins(), "[table]\npath = \"" + table + "\"\npolicy = \"tune-missing\"\n[tune]\nbudget_ms = 50\n"));

  test::DeviceArray a(m * k, dtype), b(n * k, dtype), d(m * n, dtype), w(n, dtype), y(m * n, dtype);
  test::CudaTensor ta(a, {m, k}, dtype), tb(b, {n, k}, dtype), td(d, {m, n}, dtype), tw(w, {n}, dtype),
      ty(y, {m, n}, dtype);
  const std::vector<float> b_values = test::random_values(size_t(n * k), 2, dtype, 0.05f);
  const std::vector<float> w_values = test::random_values(size_t(n), 3, dtype);
  b.upload(b_values);
  w.upload(w_values);
  a.upload(test::random_values(size_t(m * k), 1, dtype));

  arb_gemm_args gemm = ARB_GEMM_ARGS_INIT;
  gemm.a = &ta.t;
  gemm.b = &tb.t;
  gemm.d = &td.t;
  gemm.trans_b = 1;
  arb_rmsnorm_args norm = ARB_RMSNORM_ARGS_INIT;
  norm.x = &td.t;
  norm.weight = &tw.t;
  norm.y = &ty.t;
  norm.eps = 1e-5f;

  cudaStream_t stream;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  REQUIRE_MESSAGE(arb_gemm(context, &gemm, stream) == ARB_OK, arb_last_error());  // tunes, then runs
  REQUIRE_MESSAGE(arb_rmsnorm(context, &norm, stream) == ARB_OK, arb_last_error());
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  size_t length = 0;
  CHECK(arb_explain(context, ARB_OP_GEMM, &gemm, nullptr, 0, &length) == ARB_ERR_BUFFER_TOO_SMALL);
  std::string report(length, '\0');
  REQUIRE(arb_explain(context, ARB_OP_GEMM, &gemm, report.data(), report.size(), nullptr) == ARB_OK);
  MESSAGE("gemm dispatch: " << report.c_str());

  // Capture in global mode: any call that is not capturable (a synchronisation, an
  // allocation) in the dispatch path fails the capture.
  cudaGraph_t graph = nullptr;
  CUDA_REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const arb_status gemm_status = arb_gemm(context, &gemm, stream);
  const std::string gemm_error = gemm_status == ARB_OK ? "" : arb_last_error();
  const arb_status norm_status = arb_rmsnorm(context, &norm, stream);
  const std::string norm_error = norm_status == ARB_OK ? "" : arb_last_error();
  CUDA_REQUIRE(cudaStreamEndCapture(stream, &graph));
  REQUIRE_MESSAGE(gemm_status == ARB_OK, gemm_error);
  REQUIRE_MESSAGE(norm_status == ARB_OK, norm_error);
  size_t nodes = 0;
  CUDA_REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(nodes >= 2);
  cudaGraphExec_t exec = nullptr;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));

  // New activations, poisoned outputs: the replay must compute, not remember.
  for (uint64_t step = 0; step < 3; ++step) {
    CAPTURE(step);
    const std::vector<float> a_values = test::random_values(size_t(m * k), 100 + step, dtype);
    a.upload(a_values);
    d.poison();
    y.poison();
    CUDA_REQUIRE(cudaGraphLaunch(exec, stream));
    CUDA_REQUIRE(cudaStreamSynchronize(stream));
    const std::vector<double> want_d = test::rounded_to(test::gemm_nt_reference(a_values, b_values, m, n, k), dtype);
    const std::vector<double> want_y = test::rmsnorm_reference(want_d, w_values, m, n, 1e-5);
    const double d_error = test::relative_error(d.download(), want_d);
    const double y_error = test::relative_error(y.download(), want_y);
    CHECK(d_error < 1e-2);  // bf16 output: relative rounding 2^-9 per element
    CHECK(y_error < 1e-2);
  }
  CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  CUDA_REQUIRE(cudaGraphDestroy(graph));
  CUDA_REQUIRE(cudaStreamDestroy(stream));

  // The first call on a fresh stream, captured: it either needs no workspace and is
  // recorded, or fails with a clear message; the capture itself must survive either way.
  cudaStream_t fresh;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking));
  cudaGraph_t fresh_graph = nullptr;
  CUDA_REQUIRE(cudaStreamBeginCapture(fresh, cudaStreamCaptureModeGlobal));
  const arb_status fresh_status = arb_gemm(context, &gemm, fresh);
  const std::string fresh_error = fresh_status == ARB_OK ? "" : arb_last_error();
  CUDA_REQUIRE(cudaStreamEndCapture(fresh, &fresh_graph));
  CAPTURE(fresh_error);
  CHECK((fresh_status == ARB_OK ||
         (fresh_status == ARB_ERR_INVALID_ARGUMENT && fresh_error.find("captured into a graph") != std::string::npos)));
  CUDA_REQUIRE(cudaGraphDestroy(fresh_graph));
  CUDA_REQUIRE(cudaStreamDestroy(fresh));
  CHECK(arb_context_destroy(context) == ARB_OK);
  CHECK(std::filesystem::file_size(table) > 0);  // the tuned choices were written
}

TEST_CASE("threads on their own streams dispatch CUDA kernels at once") {
  // cuBLASLt handles per thread (on a GPU), workspace per thread and stream: no result may depend on
  // what other threads run at the same time.
  arb_context context = create(test::gpu_config(test::cuda_plugins()));
  const int kThreads = test::light() ? 3 : 6, kIterations = test::light() ? 3 : test::emulated() ? 10 : 40;
  const int32_t dtype = ARB_DTYPE_F16;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<double> worst(kThreads, 0.0);
  auto work = [&](int t, int iterations) {
    try {  // a failed REQUIRE throws; it must not leave the thread
      // Different shapes per thread (decode and prefill sizes), fixed inputs per thread.
      const int64_t m = t % 2 == 0 ? 1 + 7 * t : (test::emulated() ? 32 : 64) * (t + 1), n = (test::emulated() ? 128 : 1024) + 128 * t,
                    k = test::emulated() ? 128 : 512;
      test::DeviceArray a(m * k, dtype), b(n * k, dtype), d(m * n, dtype);
      test::CudaTensor ta(a, {m, k}, dtype), tb(b, {n, k}, dtype), td(d, {m, n}, dtype);
      const std::vector<float> av = test::random_values(size_t(m * k), 10 + t, dtype);
      const std::vector<float> bv = test::random_values(size_t(n * k), 20 + t, dtype, 0.1f);
      a.upload(av);
      b.upload(bv);
      cudaStream_t stream;
      if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        ++failures;
        return;
      }
      arb_gemm_args gemm = ARB_GEMM_ARGS_INIT;
      gemm.a = &ta.t;
      gemm.b = &tb.t;
      gemm.d = &td.t;
      gemm.trans_b = 1;
      const std::vector<double> want = test::rounded_to(test::gemm_nt_reference(av, bv, m, n, k), dtype);
      for (int i = 0; i < iterations; ++i) {
        if (arb_gemm(context, &gemm, stream) != ARB_OK) {
          errors[size_t(t)] = arb_last_error();
          ++failures;
          break;
        }
        if (i % 10 == 9 || i == iterations - 1) {  // check now and then, letting launches pile up in between
          cudaStreamSynchronize(stream);
          worst[size_t(t)] = std::max(worst[size_t(t)], test::relative_error(d.download(), want));
          d.poison();
        }
      }
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    } catch (...) {
      ++failures;
    }
  };
  // On the emulator each kernel's first use is verified in a forked child. GCC 12's
  // AddressSanitizer runtime is not fork-safe while other threads allocate (the child can
  // deadlock in its allocator), so the sanitizers' build verifies first, from one thread.
  if (test::light())
    for (int t = 0; t < kThreads; ++t) work(t, 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t, kIterations);
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CAPTURE(t);
    CHECK_MESSAGE(errors[size_t(t)].empty(), errors[size_t(t)]);
    CHECK(worst[size_t(t)] < 5e-3);  // f16 output
  }
  CHECK(failures == 0);
  CHECK(arb_context_destroy(context) == ARB_OK);
}
