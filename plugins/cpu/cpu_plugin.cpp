// The cpu plugin: hand-written CPU kernels: a small-shape GEMM (AVX-512 and AVX2 builds)
// and vectorised RMSNorm and softmax (AVX2). On a CPU without an ISA its kernels refuse,
// with that reason, and dispatch falls through to the next kernel.
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

bool cpu_has_avx512() {
  static const bool present = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return present;
}

bool small_gemm(const arb_problem& p, Why& why) {
  if (!runs_here(p, why)) return false;
  const int64_t max = arbiter::cpu::kSmallGemmMax;
  if (p.m > max || p.n > max || p.k > max)
    return why.no("small shapes only: m, n, k <= %lld (got m=%lld n=%lld k=%lld)", static_cast<long long>(max),
                  static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k));
  return true;
}

bool small_gemm_avx512(const arb_problem& p, Why& why) {
  if (!cpu_has_avx512()) return why.no("this CPU lacks AVX-512F or AVX-512VL");
  return small_gemm(p, why);
}

}  // namespace

ARBITER_PLUGIN(
    arbiter::plugin::Plugin("cpu", "1.0.0")
        .description("hand-written AVX2/AVX-512 kernels: small-shape gemm, vectorised rmsnorm and softmax")
        .provenance(ARB_PROVENANCE_HAND_TUNED)
        .priority(100)
        .kernel(arbiter::plugin::Kernel("gemm_small_avx512", ARB_OP_GEMM)
                    .priority(1)  // preferred where the CPU has it
                    .supports(small_gemm_avx512)
                    .launch([](const Launch& l) { arbiter::cpu::gemm_small_avx512(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("gemm_small_avx2", ARB_OP_GEMM)
                    .supports(small_gemm)
                    .launch([](const Launch& l) { arbiter::cpu::gemm_small_avx2(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("rmsnorm", ARB_OP_RMSNORM)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::rmsnorm(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("softmax", ARB_OP_SOFTMAX)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::softmax(l.problem, l.operands); })))
