// The cpu plugin: hand-written CPU kernels (AVX2): a small-shape GEMM and vectorised
// RMSNorm and softmax. Built for AVX2 + FMA + F16C; on a CPU without them every kernel
// refuses, with that reason, and dispatch falls through to the next plugin.
#include <arbiter/plugin.hpp>

#include "kernels.hpp"

namespace {

using arbiter::plugin::Launch;
using arbiter::plugin::Why;

bool cpu_has_avx2() {
  static const bool present = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                              __builtin_cpu_supports("f16c");
  return present;
}

bool runs_here(const arb_problem& p, Why& why) {
  if (p.device_type != kDLCPU) return why.no("CPU tensors only");
  if (!cpu_has_avx2()) return why.no("this CPU lacks AVX2, FMA or F16C");
  return true;
}

bool small_gemm(const arb_problem& p, Why& why) {
  if (!runs_here(p, why)) return false;
  const int64_t max = arbiter::cpu::kSmallGemmMax;
  if (p.m > max || p.n > max || p.k > max)
    return why.no("small shapes only: m, n, k <= %lld (got m=%lld n=%lld k=%lld)", static_cast<long long>(max),
                  static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k));
  return true;
}

}  // namespace

ARBITER_PLUGIN(
    arbiter::plugin::Plugin("cpu", "1.0.0")
        .description("hand-written AVX2 kernels: small-shape gemm, vectorised rmsnorm and softmax")
        .provenance(ARB_PROVENANCE_HAND_TUNED)
        .priority(100)
        .kernel(arbiter::plugin::Kernel("gemm_small", ARB_OP_GEMM)
                    .supports(small_gemm)
                    .launch([](const Launch& l) { arbiter::cpu::gemm_small(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("rmsnorm", ARB_OP_RMSNORM)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::rmsnorm(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("softmax", ARB_OP_SOFTMAX)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::softmax(l.problem, l.operands); })))
