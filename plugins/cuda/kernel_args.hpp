// What the host side of the cuda plugin hands its kernels' launchers: plain structs, shared
// by the plugin (g++) and the kernels (nvcc). Each launcher checks nothing that supports()
// has checked already, enqueues its kernels on the stream and returns the launch status.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace arbiter::cuda {

enum class Dtype : int32_t { f32 = 1, f16 = 2, bf16 = 3 };  // the values of arb_dtype

// D[m,n] = act(alpha * op(A) * op(B) + beta * C + bias), row-major, strides in elements.
struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;     // read only when has_c
  const void* bias = nullptr;  // [n], read only when has_bias
  void* d = nullptr;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0, ldd = 0;
  float alpha = 1, beta = 0;
  int32_t trans_a = 0, trans_b = 0, activation = 0, has_c = 0, has_bias = 0;
  Dtype dtype = Dtype::bf16;
  void* workspace = nullptr;  // device memory from the host's pool
  size_t workspace_bytes = 0;
  int sm_count = 0;           // of the device, for persistent grids and split-K
};

// rmsnorm: y = x / sqrt(mean(x^2) + eps) * weight (x += residual first, written back);
// softmax: y = softmax(x). Per row of cols elements, row strides in elements.
struct RowArgs {
  void* x = nullptr;
  const void* residual = nullptr;
  const void* weight = nullptr;
  void* y = nullptr;
  int64_t rows = 0, cols = 0, ld_x = 0, ld_residual = 0, ld_y = 0;
  float eps = 1e-6f;
  int32_t has_residual = 0;
  Dtype dtype = Dtype::bf16;
};

// swiglu: y = silu(gate) * up over rows x cols, row strides in elements.
struct SwigluArgs {
  const void* gate = nullptr;
  const void* up = nullptr;
  void* y = nullptr;
  int64_t rows = 0, cols = 0, ld_gate = 0, ld_up = 0, ld_y = 0;
  Dtype dtype = Dtype::bf16;
};

// rope: in place on x [tokens, heads, dim] (token and head strides in elements): each head's
// pairs, (i, i + dim/2) or (2i, 2i + 1) when interleaved, turn by the angle
// positions[token] * theta^(-2i / dim).
struct RopeArgs {
  void* x = nullptr;
  const int32_t* positions = nullptr;
  int64_t tokens = 0, heads = 0, dim = 0, ld_token = 0, ld_head = 0;
  double theta = 10000;
  int32_t interleaved = 0;
  Dtype dtype = Dtype::bf16;
  int sm_count = 0;  // of the device: how many heads one thread turns with the same cos and sin
};

// attention: o = softmax(scale q k^T) v per batch and query head, q [batch, q_len, heads, dim],
// k and v [batch, kv_len, kv_heads, dim], o like q; strides (batch, token, head) in elements;
// causal: query i sees keys j <= i + kv_len - q_len. The workspace holds each row's chunks'
// partial results (attention_workspace_bytes).
struct AttentionArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* o = nullptr;
  int64_t batch = 0, q_len = 0, kv_len = 0, heads = 0, kv_heads = 0, dim = 0;
  int64_t ld_q[3] = {}, ld_k[3] = {}, ld_v[3] = {}, ld_o[3] = {};
  float scale = 1.0f;
  int32_t causal = 0;
  Dtype dtype = Dtype::bf16;
  int sm_count = 0;  // of the device: how many chunks of keys a row is split into
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// mlp: y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight; x and y [rows, hidden],
// gate and up [inter, hidden], down [hidden, inter] (torch.nn.Linear's layout), row strides in
// elements. Each launcher sizes its own workspace (mlp_workspace_bytes, mlp_persistent_workspace_bytes).
struct MlpArgs {
  const void *x = nullptr, *weight = nullptr, *gate = nullptr, *up = nullptr, *down = nullptr;
  void* y = nullptr;
  int64_t rows = 0, hidden = 0, inter = 0, ld_x = 0, ld_y = 0, ld_gate = 0, ld_up = 0, ld_down = 0;
  float eps = 1e-5f;
  Dtype dtype = Dtype::bf16;
  int sm_count = 0;  // of the device: the projections' grid
  void* workspace = nullptr;
};

// qkv, the attention block's input: n = rmsnorm(x) * weight, y = n W^T with W the fused QKV
// projection [(heads + 2 kv_heads) head_dim, hidden] (torch.nn.Linear's layout), then rope on
// y's first heads + kv_heads heads (q's and k's): each head's pairs, (i, i + head_dim/2) or
// (2i, 2i + 1) when interleaved, turn by positions[row] * theta^(-2i / head_dim). x [rows,
// hidden], y [rows, (heads + 2 kv_heads) head_dim] with the heads side by side; row strides
// in elements.
struct QkvArgs {
  const void *x = nullptr, *weight = nullptr, *w = nullptr;
  const int32_t* positions = nullptr;
  void* y = nullptr;
  int64_t rows = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ld_x = 0, ld_w = 0, ld_y = 0;
  float eps = 1e-5f;
  double theta = 10000;
  int32_t interleaved = 0;
  Dtype dtype = Dtype::bf16;
  int sm_count = 0;  // of the device: how finely the heads are split over blocks
};

// The widest row the register-resident row kernels take: 8 16-byte vectors per thread of a
// 512-thread block (f32: 16384 columns; f16/bf16: 32768).
int64_t row_kernel_max_cols(Dtype dtype);

cudaError_t launch_rmsnorm(const RowArgs& args, cudaStream_t stream);
cudaError_t launch_softmax(const RowArgs& args, cudaStream_t stream);
cudaError_t launch_swiglu(const SwigluArgs& args, cudaStream_t stream);
cudaError_t launch_rope(const RopeArgs& args, cudaStream_t stream);
// head_dim up to attention_max_dim(), a multiple of a 16-byte vector; rows 16-byte aligned.
int64_t attention_max_dim();
size_t attention_workspace_bytes(const AttentionArgs& args);
cudaError_t launch_attention(const AttentionArgs& args, cudaStream_t stream);
// The tensor-core attention (FlashAttention-2 style, mma.sync): f16 and bf16, head_dim 64 or
// 128, rows 16-byte aligned, batch and kv_heads up to 65535; no workspace.
bool attention_sm80_supports_dim(int64_t dim);
cudaError_t launch_attention_sm80(const AttentionArgs& args, cudaStream_t stream);

// The MLP block for decode sizes (rows up to mlp_max_rows()): the norm, the gate/up projections
// with the activation, and the down projection with the residual, three kernels on the stream,
// each weight row read once by one warp; n and h in f32 in the workspace.
int64_t mlp_max_rows();
size_t mlp_workspace_bytes(const MlpArgs& args);
cudaError_t launch_mlp(const MlpArgs& args, cudaStream_t stream);
// The same block in one launch (after a memset of its workspace): a persistent grid over chunks
// of the intermediates, h in shared memory, the down projection's partial sums added into an
// f32 accumulator in the workspace, which the last block to finish adds to x into y.
size_t mlp_persistent_workspace_bytes(const MlpArgs& args);
cudaError_t launch_mlp_persistent(const MlpArgs& args, cudaStream_t stream);

// The attention block's input for decode sizes (rows up to qkv_max_rows()) in one launch, no
// workspace: each block takes a group of pairs of one output head, computes their projections
// for every token row (n formed on the fly, the rows' scales computed by each block) into
// shared memory, turns q's and k's pairs there and writes y once.
int64_t qkv_max_rows();
cudaError_t launch_qkv(const QkvArgs& args, cudaStream_t stream);

// Softmax with a cluster of 8 blocks per row (sm_90a), for rows up to 8 times wider.
int64_t cluster_row_max_cols(Dtype dtype);
bool softmax_cluster_fits();  // can a cluster of 8 such blocks be resident on this GPU?
cudaError_t launch_softmax_cluster(const RowArgs& args, cudaStream_t stream);

// Decode GEMM (m <= 16, B stored [n, k]): split-K over the weights, partial sums in the
// workspace, reduced in a fixed order (deterministic).
size_t splitk_workspace_bytes(const GemmArgs& args);
cudaError_t launch_gemm_splitk(const GemmArgs& args, cudaStream_t stream);

// mma.sync tensor-core GEMM for sm_80 and up (f16/bf16, A [m,k], B [n,k]).
cudaError_t launch_gemm_sm80(const GemmArgs& args, cudaStream_t stream);

// wgmma + TMA GEMM for sm_90a (f16/bf16, A [m,k], B [n,k]) with 128 x block_n tiles
// (block_n 128 or 256); tensor maps made on the host.
cudaError_t launch_gemm_sm90(const GemmArgs& args, int block_n, cudaStream_t stream);

}  // namespace arbiter::cuda
