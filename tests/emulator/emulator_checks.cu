// The SIMT emulator's own checks, each on a small kernel written for it: what it must report
// (a divergent barrier, a barrier after threads exited, a shuffle reading a lane outside its
// mask, a deadlock, races on shared memory) and what it must not (correctly synchronised
// reductions, shuffles, warp-local exchanges, shared atomics). Every case runs under every
// schedule; a check that fires in one schedule only, or a false report, fails the test.
// Compiled by arbiter-emucc like the plugins' kernels (CTest: emulated.checks).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kThreads = 64;

// ---- kernels that are right ----------------------------------------------------------------

__global__ void synchronised_reduction(const float* x, float* y) {
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[0] = partial[0];
}

__global__ void shuffle_reduction(const float* x, float* y) {
  float v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) y[threadIdx.x / 32] = v;
}

// Lanes of one warp exchange through shared memory with __syncwarp between: no race.
__global__ void warp_local_exchange(const float* x, float* y) {
  __shared__ float slot[kThreads];
  slot[threadIdx.x] = x[threadIdx.x];
  __syncwarp();
  const unsigned warp_base = threadIdx.x / 32 * 32;
  y[threadIdx.x] = slot[warp_base + (threadIdx.x + 1) % 32];
}

// Every thread adds to one shared counter atomically: atomics never race with each other.
__global__ void shared_atomics(const float*, float* y) {
  __shared__ int counter;
  if (threadIdx.x == 0) counter = 0;
  __syncthreads();
  atomicAdd(&counter, 1);
  __syncthreads();
  if (threadIdx.x == 0) y[0] = static_cast<float>(counter);
}

// ---- kernels that are wrong ------------------------------------------------------------------

__global__ void divergent_barrier(const float*, float* y) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  y[threadIdx.x] = 1.0f;
}

__global__ void barrier_after_exit(const float*, float* y) {
  if (threadIdx.x >= 32) return;
  __syncthreads();
  y[threadIdx.x] = 1.0f;
}

__global__ void shuffle_outside_mask(const float* x, float* y) {
  if (threadIdx.x >= 16) return;
  // Lane 8 reads lane 16, which is not among the 16 lanes of the mask.
  y[threadIdx.x] = __shfl_down_sync(0x0000ffffu, x[threadIdx.x], 8);
}

// Lane 31 waits in a full-warp shuffle for lanes that wait at __syncthreads for lane 31.
__global__ void shuffle_barrier_deadlock(const float* x, float* y) {
  float v = x[threadIdx.x];
  if (threadIdx.x % 32 == 31)
    v = __shfl_sync(0xffffffffu, v, 0);
  else
    __syncthreads();
  y[threadIdx.x] = v;
}

// Thread i reads what thread i + 1 wrote, with no barrier between.
__global__ void read_without_barrier(const float* x, float* y) {
  __shared__ float slot[kThreads];
  slot[threadIdx.x] = x[threadIdx.x];
  y[threadIdx.x] = slot[(threadIdx.x + 1) % kThreads];
}

// Threads of different warps exchange with only __syncwarp between: it orders a warp, not the block.
__global__ void syncwarp_across_warps(const float* x, float* y) {
  __shared__ float slot[kThreads];
  slot[threadIdx.x] = x[threadIdx.x];
  __syncwarp();
  y[threadIdx.x] = slot[(threadIdx.x + 32) % kThreads];
}

// Every thread stores to one shared word (not atomically), then one reads it after a barrier.
__global__ void unordered_writes(const float* x, float* y) {
  __shared__ float last;
  last = x[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) y[0] = last;
}

// A write after a read by another thread, in the same phase: the reader may see either value.
__global__ void write_after_read(const float* x, float* y) {
  __shared__ float slot[kThreads];
  slot[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  const float neighbour = slot[(threadIdx.x + 1) % kThreads];
  slot[threadIdx.x] = neighbour * 2.0f;
  __syncthreads();
  y[threadIdx.x] = slot[threadIdx.x];
}

using Kernel = void (*)(const float*, float*);

struct Case {
  const char* name;
  Kernel kernel;
  const char* expected;  // nullptr: the launch must succeed; else a text the report must hold
  bool race = false;     // caught by the race check
};

// The race check needs emucc's thread instrumentation, which the sanitizers' build replaces
// with AddressSanitizer's (emulator/README.md), and can be turned off.
bool race_check_on() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#else
  const char* v = std::getenv("ARBITER_EMU_RACE_CHECK");
  return v == nullptr || std::string(v) != "0";
#endif
}

const Case kCases[] = {
    {"synchronised_reduction", synchronised_reduction, nullptr},
    {"shuffle_reduction", shuffle_reduction, nullptr},
    {"warp_local_exchange", warp_local_exchange, nullptr},
    {"shared_atomics", shared_atomics, nullptr},
    {"divergent_barrier", divergent_barrier, "divergent __syncthreads"},
    {"barrier_after_exit", barrier_after_exit, "exited"},
    {"shuffle_outside_mask", shuffle_outside_mask, "lane 8 reads lane 16, which is not in the mask"},
    {"shuffle_barrier_deadlock", shuffle_barrier_deadlock, "deadlock"},
    {"read_without_barrier", read_without_barrier, "race on shared memory", true},
    {"syncwarp_across_warps", syncwarp_across_warps, "race on shared memory", true},
    {"unordered_writes", unordered_writes, "race on shared memory", true},
    {"write_after_read", write_after_read, "race on shared memory", true},
};

// The launch as the plugins do it (no <<< >>> syntax: one source for both targets), then a
// synchronisation: the status of the launch or of the run.
cudaError_t run(Kernel kernel, const float* x, float* y) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(kThreads);
  cudaError_t status = cudaLaunchKernelEx(&config, kernel, x, y);
  if (status == cudaSuccess) status = cudaDeviceSynchronize();
  return status;
}

// The report names the source line of the faulting access or wait, in this file.
bool names_this_file(const std::string& report) { return report.find("emulator_checks.cu:") != std::string::npos; }

}  // namespace

int main() {
  float *x = nullptr, *y = nullptr;
  if (cudaMalloc(&x, kThreads * sizeof(float)) != cudaSuccess || cudaMalloc(&y, kThreads * sizeof(float)) != cudaSuccess) {
    std::printf("FAIL cannot allocate emulated device memory\n");
    return 1;
  }
  std::vector<float> host(kThreads);
  for (int i = 0; i < kThreads; ++i) host[i] = 0.5f + static_cast<float>(i);
  cudaMemcpy(x, host.data(), kThreads * sizeof(float), cudaMemcpyHostToDevice);

  const arbiter::emu::Schedule schedules[] = {{arbiter::emu::ScheduleKind::lockstep, 0},
                                              {arbiter::emu::ScheduleKind::reverse, 0},
                                              {arbiter::emu::ScheduleKind::warp_ahead, 1},
                                              {arbiter::emu::ScheduleKind::random, 7}};
  const char* schedule_names[] = {"lockstep", "reverse", "warp-ahead", "random"};
  int failures = 0, skipped = 0;
  for (const Case& c : kCases) {
    if (c.race && !race_check_on()) {
      std::printf("skip %s: no race check in this build or run\n", c.name);
      skipped += 4;
      continue;
    }
    for (int s = 0; s < 4; ++s) {
      arbiter::emu::force_schedule(&schedules[s]);
      const cudaError_t status = run(c.kernel, x, y);
      const std::string report = status == cudaSuccess ? "" : arbiter::emu::last_launch_report();
      cudaGetLastError();
      bool ok;
      if (c.expected == nullptr)
        ok = status == cudaSuccess;
      else
        ok = status != cudaSuccess && report.find(c.expected) != std::string::npos && names_this_file(report);
      std::printf("%s %s [%s]%s%s\n", ok ? "ok  " : "FAIL", c.name, schedule_names[s], report.empty() ? "" : ": ",
                  report.c_str());
      failures += !ok;
    }
  }
  arbiter::emu::force_schedule(nullptr);
  // The right kernels computed the right thing too (the last schedule's run).
  run(shared_atomics, x, y);
  float counted = 0;
  cudaMemcpy(&counted, y, sizeof counted, cudaMemcpyDeviceToHost);
  if (counted != kThreads) {
    std::printf("FAIL shared_atomics counted %g, not %d\n", counted, kThreads);
    ++failures;
  }
  run(synchronised_reduction, x, y);
  float sum = 0;
  cudaMemcpy(&sum, y, sizeof sum, cudaMemcpyDeviceToHost);
  const float expected_sum = kThreads * 0.5f + kThreads * (kThreads - 1) / 2.0f;
  if (sum != expected_sum) {
    std::printf("FAIL synchronised_reduction gave %g, not %g\n", sum, expected_sum);
    ++failures;
  }
  cudaFree(x);
  cudaFree(y);
  std::printf("%d of %zu checks failed, %d skipped\n", failures, 4 * std::size(kCases) + 2 - skipped, skipped);
  return failures == 0 ? 0 : 1;
}
