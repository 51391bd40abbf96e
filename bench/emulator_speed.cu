// arbiter_bench_emulator: how fast the SIMT emulator runs CUDA code, compiled for it by
// arbiter-emucc like the emulated plugins. Synthetic kernels isolate the emulator's costs
// (a thread's fiber, a barrier, a shuffle, a shared-memory access under the race check), then
// arbiter's own kernels (the RMSNorm, the mma.sync and the wgmma GEMMs) give the speed of
// real code. Each figure is the median of --samples launches (after one warm-up), host time
// around a launch and its synchronisation; the emulator runs a launch on the calling thread.
// bench/emulator-speed.sh runs it with and without the race check.
#include "kernel_args.hpp"
#include "launch.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

__global__ void empty_kernel(unsigned* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x; }

__global__ void barrier_kernel(unsigned* out, int rounds) {
  for (int i = 0; i < rounds; ++i) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = rounds;
}

__global__ void shuffle_kernel(float* out, int rounds) {
  float v = static_cast<float>(threadIdx.x);
  for (int i = 0; i < rounds; ++i) v += __shfl_xor_sync(0xffffffffu, v, i & 31);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// Shared-memory traffic between barriers: each thread writes its word, then reads a
// neighbour's, `rounds` times (no race: a barrier between the write and the reads).
__global__ void shared_kernel(float* out, int rounds) {
  __shared__ float words[256];
  float sum = 0.0f;
  for (int i = 0; i < rounds; ++i) {
    words[threadIdx.x] = static_cast<float>(i + threadIdx.x);
    __syncthreads();
    sum += words[(threadIdx.x + i) % blockDim.x];
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

double median_seconds(int samples, const std::function<void()>& launch) {
  launch();  // warm-up: fiber stacks pooled, kernel attributes probed
  std::vector<double> times;
  for (int i = 0; i < samples; ++i) {
    const auto start = std::chrono::steady_clock::now();
    launch();
    check(cudaDeviceSynchronize(), "synchronize");
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void* device_buffer(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  std::vector<unsigned char> noise(bytes);
  for (size_t i = 0; i < bytes; ++i) noise[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  for (size_t i = 1; i < bytes; i += 2) noise[i] &= 0x3f;  // 16-bit values of modest size, never NaN
  check(cudaMemcpy(p, noise.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

struct Row {
  std::string name, what;
  double threads, seconds, events;  // events: barriers, shuffles or accesses per thread x threads
  std::string event_name;
};

}  // namespace

int main(int argc, char** argv) {
  int samples = 5;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--samples=", 10) == 0) samples = std::max(1, std::atoi(argv[i] + 10));
  const char* race = std::getenv("ARBITER_EMU_RACE_CHECK");
  const bool race_check = race == nullptr || std::string(race) != "0";
  std::vector<Row> rows;

  const unsigned blocks = 64, threads = 256, total = blocks * threads;
  auto* out = static_cast<unsigned*>(device_buffer(total * sizeof(float)));
  rows.push_back({"empty", "64 blocks x 256 threads, one store each", double(total),
                  median_seconds(samples, [&] { check(arbiter::cuda::launch_kernel(empty_kernel, blocks, threads, 0, nullptr, out), "empty"); }), 0, ""});
  rows.push_back({"barriers", "64 x 256 threads, 100 __syncthreads each", double(total),
                  median_seconds(samples, [&] { check(arbiter::cuda::launch_kernel(barrier_kernel, blocks, threads, 0, nullptr, out, 100), "barriers"); }), 100.0 * total,
                  "thread-barriers"});
  rows.push_back({"shuffles", "64 x 256 threads, 100 __shfl_xor_sync each", double(total),
                  median_seconds(samples, [&] { check(arbiter::cuda::launch_kernel(shuffle_kernel, blocks, threads, 0, nullptr, reinterpret_cast<float*>(out), 100), "shuffles"); }),
                  100.0 * total, "thread-shuffles"});
  rows.push_back({"shared", "64 x 256 threads, 100 x (write, barrier, read, barrier)", double(total),
                  median_seconds(samples, [&] { check(arbiter::cuda::launch_kernel(shared_kernel, blocks, threads, 0, nullptr, reinterpret_cast<float*>(out), 100), "shared"); }),
                  200.0 * total, "shared accesses"});

  using namespace arbiter::cuda;
  {
    RowArgs a;
    a.rows = 256;
    a.cols = 4096;
    a.ld_x = a.ld_y = a.cols;
    a.dtype = Dtype::bf16;
    a.x = device_buffer(a.rows * a.cols * 2);
    a.y = device_buffer(a.rows * a.cols * 2);
    a.weight = device_buffer(a.cols * 2);
    rows.push_back({"rmsnorm_vec16", "bf16, 256 rows x 4096 (256 blocks x 64 threads)", 256.0 * 64,
                    median_seconds(samples, [&] { check(launch_rmsnorm(a, nullptr), "rmsnorm"); }),
                    double(a.rows * a.cols), "elements"});
  }
  for (const int which : {80, 90}) {
    GemmArgs g;
    g.m = 256;
    g.n = 256;
    g.k = 512;
    g.lda = g.k;
    g.ldb = g.k;
    g.ldd = g.n;
    g.trans_b = 1;
    g.dtype = Dtype::bf16;
    g.sm_count = 4;
    g.a = device_buffer(g.m * g.k * 2);
    g.b = device_buffer(g.n * g.k * 2);
    g.d = device_buffer(g.m * g.n * 2);
    const double macs = double(g.m) * g.n * g.k;
    if (which == 80)
      rows.push_back({"gemm_mma_sm80", "bf16 256 x 256 x 512 (4 blocks x 256 threads)", 4.0 * 256,
                      median_seconds(samples, [&] { check(launch_gemm_sm80(g, nullptr), "sm80"); }), macs,
                      "multiply-adds"});
    else
      rows.push_back({"gemm_wgmma_sm90", "bf16 256 x 256 x 512 (4 blocks x 384 threads)", 4.0 * 384,
                      median_seconds(samples, [&] { check(launch_gemm_sm90(g, 128, nullptr), "sm90"); }), macs,
                      "multiply-adds"});
  }

  std::printf("| kernel | launch | host ms | CUDA threads / s | events / s |\n|---|---|---:|---:|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %.2f | %.3g | %s |\n", r.name.c_str(), r.what.c_str(), r.seconds * 1e3,
                r.threads / r.seconds,
                r.events > 0 ? (std::to_string(static_cast<long long>(r.events / r.seconds)) + " " + r.event_name).c_str()
                             : "-");
  const char* schedule = std::getenv("ARBITER_EMU_SCHEDULE");
  std::printf("\nmethod: median of %d launches after one warm-up, host steady_clock around each launch and "
              "cudaDeviceSynchronize, one host thread; race check %s (ARBITER_EMU_RACE_CHECK); schedule %s "
              "(ARBITER_EMU_SCHEDULE)\n",
              samples, race_check ? "on" : "off", schedule && *schedule ? schedule : "rotating per launch");
  return 0;
}
