// The cpu plugin's kernels. Each file is compiled for its ISA (see CMakeLists.txt): AVX2 +
// FMA + F16C, and AVX-512F for the *_avx512 kernel. The plugin's supports() checks the
// running CPU before any of them can be chosen.
#pragma once

#include <arbiter/plugin.h>

#include <cstddef>

namespace arbiter::cpu {

constexpr int64_t kSmallGemmMax = 64;     // gemm_small: m, n and k up to this
constexpr int64_t kMediumGemmMax = 1024;  // gemm_bf16_avx512 and gemm_bf16_amx: m, n and k up to this

void gemm_small_avx2(const arb_problem& problem, const arb_operands& operands);
void gemm_small_avx512(const arb_problem& problem, const arb_operands& operands);
// bf16 only, with AVX512-BF16; its operands packed into the workspace (the size below).
size_t gemm_bf16_avx512_workspace(const arb_problem& problem);
void gemm_bf16_avx512(const arb_problem& problem, const arb_operands& operands, void* workspace, size_t workspace_bytes);
// bf16 only, on AMX tiles; amx_usable() asks Linux for the tile state (once per process).
bool amx_usable();
size_t gemm_bf16_amx_workspace(const arb_problem& problem);
void gemm_bf16_amx(const arb_problem& problem, const arb_operands& operands, void* workspace, size_t workspace_bytes);
void rmsnorm(const arb_problem& problem, const arb_operands& operands);
void softmax(const arb_problem& problem, const arb_operands& operands);
void swiglu(const arb_problem& problem, const arb_operands& operands);
void rope(const arb_problem& problem, const arb_operands& operands);  // AVX2, FMA, F16C
// AVX2, FMA, F16C; its blocks of keys and rows widened to f32 in the workspace (the size below).
size_t attention_workspace(const arb_problem& problem);
void attention(const arb_problem& problem, const arb_operands& operands, void* workspace);
// bf16 only, AVX512-BF16 (and AVX-512F, VL, BW), head_dim up to kAttentionBf16MaxDim; V's
// blocks interleaved and the rows' accumulators in the workspace (the size below).
constexpr int64_t kAttentionBf16MaxDim = 256;
size_t attention_avx512_bf16_workspace(const arb_problem& problem);
void attention_avx512_bf16(const arb_problem& problem, const arb_operands& operands, void* workspace);
// The MLP block in one pass, AVX2, FMA, F16C; rows up to kMlpFusedMaxRows (decode sizes), the
// rows' normalised activations and products in f32 in the workspace (the size below).
constexpr int64_t kMlpFusedMaxRows = 64;
size_t mlp_fused_workspace(const arb_problem& problem);
void mlp_fused(const arb_problem& problem, const arb_operands& operands, void* workspace);
// The same for bf16 with AVX512-BF16 (and AVX-512F, VL, BW): the products as vdpbf16ps on the
// weights as they lie, n and h rounded to bf16 (as the chain rounds them); rows up to
// kMlpFusedMaxRows; the workspace holds n, h and the projections (the size below).
size_t mlp_avx512_bf16_workspace(const arb_problem& problem);
void mlp_avx512_bf16(const arb_problem& problem, const arb_operands& operands, void* workspace);
// The attention block's input (qkv) in one pass, AVX2, FMA, F16C; rows up to kQkvFusedMaxRows
// (decode sizes), the rows' normalised activations and projections in f32 in the workspace
// (the size below).
constexpr int64_t kQkvFusedMaxRows = 64;
size_t qkv_fused_workspace(const arb_problem& problem);
void qkv_fused(const arb_problem& problem, const arb_operands& operands, void* workspace);
// The same for bf16 with AVX512-BF16 (and AVX-512F, VL, BW): the projection as vdpbf16ps on the
// weight as it lies, n rounded to bf16 (as the chain rounds it), the projections turned in f32
// and y rounded once; rows up to kQkvFusedMaxRows; the workspace holds n and the projections
// (the size below).
size_t qkv_avx512_bf16_workspace(const arb_problem& problem);
void qkv_avx512_bf16(const arb_problem& problem, const arb_operands& operands, void* workspace);
void swiglu_avx512(const arb_problem& problem, const arb_operands& operands);  // AVX-512F, VL, BW
void swiglu_avx512_bf16(const arb_problem& problem, const arb_operands& operands);  // bf16 only; also AVX512-BF16

}  // namespace arbiter::cpu
