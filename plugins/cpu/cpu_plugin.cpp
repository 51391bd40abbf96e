// The cpu plugin: hand-written CPU kernels: a small-shape GEMM (AVX-512 and AVX2 builds), bf16
// GEMMs for small and medium shapes (AVX512-BF16, AMX) and vectorised RMSNorm and softmax
// (AVX2). On a CPU without an ISA its kernels refuse, with that reason, and dispatch falls
// through to the next kernel.
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

bool cpu_has_avx512_bf16() {
  static const bool present = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  return present;
}

// What both bf16 GEMMs take, once their ISA is known to be here.
bool bf16_gemm_shape(const arb_problem& p, Why& why) {
  if (p.dtype != ARB_DTYPE_BF16) return why.no("bf16 only");
  const int64_t max = arbiter::cpu::kMediumGemmMax;
  if (p.m > max || p.n > max || p.k > max)
    return why.no("small and medium shapes only: m, n, k <= %lld (got m=%lld n=%lld k=%lld)",
                  static_cast<long long>(max), static_cast<long long>(p.m), static_cast<long long>(p.n),
                  static_cast<long long>(p.k));
  // A transposed B is gathered by 32-bit byte offsets of its rows.
  if (p.trans_b && (p.n + 32) * p.ldb * 2 > INT32_MAX) return why.no("B's rows lie too far apart for the gather");
  return true;
}

bool bf16_gemm_avx512(const arb_problem& p, Why& why) {
  if (!runs_here(p, why)) return false;
  if (!cpu_has_avx512_bf16()) return why.no("this CPU lacks AVX512-BF16 (or AVX-512F, VL, BW)");
  return bf16_gemm_shape(p, why);
}

// What both fused MLP kernels take: decode sizes.
bool mlp_fused_shape(const arb_problem& p, Why& why) {
  if (!runs_here(p, why)) return false;
  if (p.rows > arbiter::cpu::kMlpFusedMaxRows)
    return why.no("rows above %lld (decode sizes; the chain's GEMMs serve more)",
                  static_cast<long long>(arbiter::cpu::kMlpFusedMaxRows));
  if (p.cols + p.inter > (int64_t{1} << 40)) return why.no("hidden + inter above 2^40");
  return true;
}

// The fused attention input: decode sizes.
bool qkv_fused_shape(const arb_problem& p, Why& why) {
  if (!runs_here(p, why)) return false;
  if (p.rows > arbiter::cpu::kQkvFusedMaxRows)
    return why.no("rows above %lld (decode sizes; the chain's GEMM serves more)",
                  static_cast<long long>(arbiter::cpu::kQkvFusedMaxRows));
  if (p.cols + (p.heads + 2 * p.kv_heads) * p.head_dim > (int64_t{1} << 40))
    return why.no("hidden + (heads + 2 kv_heads) head_dim above 2^40");
  return true;
}

bool bf16_gemm_amx(const arb_problem& p, Why& why) {
  if (!runs_here(p, why)) return false;
  static const bool amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
  if (!amx || !cpu_has_avx512_bf16()) return why.no("this CPU lacks AMX-BF16 (or AVX512-BF16)");
  if (!arbiter::cpu::amx_usable()) return why.no("Linux refused this process AMX tile state (arch_prctl XTILEDATA)");
  return bf16_gemm_shape(p, why);
}

}  // namespace

ARBITER_PLUGIN(
    arbiter::plugin::Plugin("cpu", "1.0.0")
        .description("hand-written AVX2/AVX-512 kernels: small-shape gemm, bf16 gemm (AVX512-BF16, AMX), vectorised rmsnorm, softmax, swiglu, rope and attention; the MLP block and the attention block's input (qkv) fused for decode")
        .provenance(ARB_PROVENANCE_HAND_TUNED)
        .priority(100)
        .kernel(arbiter::plugin::Kernel("gemm_small_avx512", ARB_OP_GEMM)
                    .priority(1)  // preferred where the CPU has it
                    .supports(small_gemm_avx512)
                    .launch([](const Launch& l) { arbiter::cpu::gemm_small_avx512(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("gemm_small_avx2", ARB_OP_GEMM)
                    .supports(small_gemm)
                    .launch([](const Launch& l) { arbiter::cpu::gemm_small_avx2(l.problem, l.operands); }))
        // The bf16 GEMMs rank below gemm_small_avx512 (kernel priority 1), which the small
        // shapes keep; above 64 the name orders them: gemm_bf16_amx, then gemm_bf16_avx512.
        .kernel(arbiter::plugin::Kernel("gemm_bf16_amx", ARB_OP_GEMM)
                    .supports(bf16_gemm_amx)
                    .workspace([](const arb_problem& p) { return arbiter::cpu::gemm_bf16_amx_workspace(p); })
                    .launch([](const Launch& l) {
                      arbiter::cpu::gemm_bf16_amx(l.problem, l.operands, l.workspace, l.workspace_bytes);
                    }))
        .kernel(arbiter::plugin::Kernel("gemm_bf16_avx512", ARB_OP_GEMM)
                    .supports(bf16_gemm_avx512)
                    .workspace([](const arb_problem& p) { return arbiter::cpu::gemm_bf16_avx512_workspace(p); })
                    .launch([](const Launch& l) {
                      arbiter::cpu::gemm_bf16_avx512(l.problem, l.operands, l.workspace, l.workspace_bytes);
                    }))
        .kernel(arbiter::plugin::Kernel("rmsnorm", ARB_OP_RMSNORM)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::rmsnorm(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("softmax", ARB_OP_SOFTMAX)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::softmax(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("swiglu_avx512", ARB_OP_SWIGLU)
                    .priority(1)  // preferred where the CPU has it
                    .supports([](const arb_problem& p, Why& why) {
                      if (!runs_here(p, why)) return false;
                      static const bool bw = cpu_has_avx512() && __builtin_cpu_supports("avx512bw");
                      return bw || why.no("this CPU lacks AVX-512F, VL or BW");
                    })
                    .launch([](const Launch& l) { arbiter::cpu::swiglu_avx512(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("swiglu", ARB_OP_SWIGLU)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::swiglu(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("rope", ARB_OP_ROPE)
                    .supports(runs_here)
                    .launch([](const Launch& l) { arbiter::cpu::rope(l.problem, l.operands); }))
        .kernel(arbiter::plugin::Kernel("attention_bf16_avx512", ARB_OP_ATTENTION)
                    .priority(1)  // preferred where the CPU has it
                    .supports([](const arb_problem& p, Why& why) {
                      if (!runs_here(p, why)) return false;
                      if (p.dtype != ARB_DTYPE_BF16) return why.no("bf16 only");
                      if (!cpu_has_avx512_bf16()) return why.no("this CPU lacks AVX512-BF16 (or AVX-512F, VL, BW)");
                      if (p.cols > arbiter::cpu::kAttentionBf16MaxDim)
                        return why.no("head_dim above %lld", static_cast<long long>(arbiter::cpu::kAttentionBf16MaxDim));
                      return true;
                    })
                    .workspace([](const arb_problem& p) { return arbiter::cpu::attention_avx512_bf16_workspace(p); })
                    .launch([](const Launch& l) { arbiter::cpu::attention_avx512_bf16(l.problem, l.operands, l.workspace); }))
        .kernel(arbiter::plugin::Kernel("attention", ARB_OP_ATTENTION)
                    .supports(runs_here)
                    .workspace([](const arb_problem& p) { return arbiter::cpu::attention_workspace(p); })
                    .launch([](const Launch& l) { arbiter::cpu::attention(l.problem, l.operands, l.workspace); }))
        .kernel(arbiter::plugin::Kernel("mlp_bf16_avx512", ARB_OP_MLP)
                    .priority(1)  // preferred where the CPU has it
                    .supports([](const arb_problem& p, Why& why) {
                      if (!mlp_fused_shape(p, why)) return false;
                      if (p.dtype != ARB_DTYPE_BF16) return why.no("bf16 only");
                      if (!cpu_has_avx512_bf16()) return why.no("this CPU lacks AVX512-BF16 (or AVX-512F, VL, BW)");
                      return true;
                    })
                    .workspace([](const arb_problem& p) { return arbiter::cpu::mlp_avx512_bf16_workspace(p); })
                    .launch([](const Launch& l) { arbiter::cpu::mlp_avx512_bf16(l.problem, l.operands, l.workspace); }))
        .kernel(arbiter::plugin::Kernel("mlp_fused", ARB_OP_MLP)
                    .supports(mlp_fused_shape)
                    .workspace([](const arb_problem& p) { return arbiter::cpu::mlp_fused_workspace(p); })
                    .launch([](const Launch& l) { arbiter::cpu::mlp_fused(l.problem, l.operands, l.workspace); }))
        .kernel(arbiter::plugin::Kernel("qkv_bf16_avx512", ARB_OP_QKV)
                    .priority(1)  // preferred where the CPU has it
                    .supports([](const arb_problem& p, Why& why) {
                      if (!qkv_fused_shape(p, why)) return false;
                      if (p.dtype != ARB_DTYPE_BF16) return why.no("bf16 only");
                      if (!cpu_has_avx512_bf16()) return why.no("this CPU lacks AVX512-BF16 (or AVX-512F, VL, BW)");
                      return true;
                    })
                    .workspace([](const arb_problem& p) { return arbiter::cpu::qkv_avx512_bf16_workspace(p); })
                    .launch([](const Launch& l) { arbiter::cpu::qkv_avx512_bf16(l.problem, l.operands, l.workspace); }))
        .kernel(arbiter::plugin::Kernel("qkv_fused", ARB_OP_QKV)
                    .supports(qkv_fused_shape)
                    .workspace([](const arb_problem& p) { return arbiter::cpu::qkv_fused_workspace(p); })
                    .launch([](const Launch& l) { arbiter::cpu::qkv_fused(l.problem, l.operands, l.workspace); })))
