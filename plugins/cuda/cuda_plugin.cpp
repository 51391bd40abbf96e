// The cuda plugin: kernels written by hand for NVIDIA GPUs, built by nvcc for sm_90a and
// sm_80 (plugins/cuda/kernels/). Each kernel states its limits in supports() and competes
// per shape under the gate, the tuner and the table like every other kernel; bench/NOTES.md
// holds what each is measured against. Kernels:
//   rmsnorm_vec16       RMSNorm (+ fused residual), a row per block in registers, 16-byte accesses
//   softmax_vec16       softmax, the same layout
//   softmax_cluster8    softmax of rows up to 8x wider (vocabularies): 8 blocks a row, sm_90a clusters
//   swiglu_vec16        silu(gate) * up, a grid striding over 16-byte vectors
//   mlp_fused           the Llama MLP block at decode sizes: norm, gate/up with the activation,
//                       down with the residual; a warp a weight row, n and h f32 in the workspace
//   mlp_persistent      the same block in one launch: a persistent grid over chunks of the
//                       intermediates, h in shared memory, down's partial sums added atomically
//   qkv_fused           the attention block's input at decode sizes in one launch: rmsnorm, the
//                       fused QKV projection (a warp a rope pair's two weight rows, n on the fly)
//                       and rope on q and k in shared memory, y written once
//   rope_vec16          rotary embedding in place: 16-byte vectors of pairs (a pair a thread where
//                       the dim or alignment does not allow), each cos and sin reused over heads
//   attention_splitkv   attention split over the keys (flash-decoding): chunks of 128-key tiles
//                       a block each, online softmax, then one block a row combines the chunks
//   attention_mma_sm80  attention on the tensor cores (FlashAttention-2 style: mma.sync, ldmatrix,
//                       cp.async), 64 rows of (token, GQA head) a block, f16/bf16, head_dim 64/128
//   gemm_decode_splitk  decode GEMM (m <= 16, B stored [n, k]), split-K with a deterministic reduction
//   gemm_wgmma_sm90     Hopper GEMM: TMA, an mbarrier pipeline, warp-specialised wgmma, persistent grid
//   gemm_wgmma_sm90_n256  the same with 128 x 256 tiles (m64n256k16; setmaxnreg 40 / 232)
//   gemm_mma_sm80       tensor-core GEMM (mma.sync, cp.async, ldmatrix) for sm_80 and up
#include <arbiter/plugin.hpp>

#include "cuda_plugin_support.hpp"
#include "kernel_args.hpp"

#include <cuda_runtime.h>

#include <string>

namespace {

using arbiter::cuda::Dtype;
using arbiter::cuda::GemmArgs;
using arbiter::cuda::RowArgs;
using arbiter::plugin::check_cuda;
using arbiter::plugin::Error;
using arbiter::plugin::Launch;
using arbiter::plugin::Why;

// The device the plugin was loaded for (device 0, as the runtime's CUDA device).
struct DeviceInfo {
  int major = 0, minor = 0, sm_count = 0;
  std::string name;
  bool clusters_of_8 = false;  // a cluster of 8 softmax_cluster8 blocks can be resident
};
DeviceInfo device;

size_t element_bytes(int32_t dtype) { return dtype == ARB_DTYPE_F32 ? 4 : 2; }

// What every kernel here needs: a CUDA tensor of a dtype it was built for.
bool device_limits(const arb_problem& p, Why& why) {
  if (p.device_type != kDLCUDA) return why.no("CUDA tensors only");
  if (p.device_id != 0) return why.no("device 0 only");
  if (p.dtype != ARB_DTYPE_F32 && p.dtype != ARB_DTYPE_F16 && p.dtype != ARB_DTYPE_BF16) return why.no("f32, f16, bf16");
  return true;
}

// ... and, all but rope_vec16, 16-byte aligned rows (problem.alignment is the alignment class
// of every address and stride).
bool common_limits(const arb_problem& p, Why& why) {
  if (!device_limits(p, why)) return false;
  if (p.alignment < 16) return why.no("rows and addresses must be 16-byte aligned (align >= 16)");
  return true;
}

// Is `count` (cols, or k) a whole number of 16-byte vectors of the dtype?
bool whole_vectors(const arb_problem& p, int64_t count, const char* name, Why& why) {
  const int64_t per_vector = 16 / static_cast<int64_t>(element_bytes(p.dtype));
  if (count % per_vector == 0) return true;
  return why.no("%s must be a multiple of %lld (16 bytes)", name, static_cast<long long>(per_vector));
}

// The row kernels: rows of whole 16-byte vectors, at most max_cols wide (what fits the
// registers of the blocks one row gets), at most max_rows of them (the grid's limit).
bool row_limits(const arb_problem& p, Why& why, int64_t max_cols, const char* fit, int64_t max_rows) {
  if (!common_limits(p, why) || !whole_vectors(p, p.cols, "cols", why)) return false;
  if (p.cols > max_cols) return why.no("cols above %lld (the row must fit %s)", static_cast<long long>(max_cols), fit);
  if (p.rows > max_rows) return why.no("more than %lld rows", static_cast<long long>(max_rows));
  return true;
}

bool one_block_row_limits(const arb_problem& p, Why& why) {
  return row_limits(p, why, arbiter::cuda::row_kernel_max_cols(static_cast<Dtype>(p.dtype)), "one block's registers",
                    0x7fffffff);
}

RowArgs row_args(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  RowArgs a;
  a.x = o.x;
  a.residual = o.residual;
  a.weight = o.weight;
  a.y = o.y;
  a.rows = p.rows;
  a.cols = p.cols;
  a.ld_x = p.ld_x;
  a.ld_residual = p.ld_residual;
  a.ld_y = p.ld_y;
  a.eps = o.eps;
  a.has_residual = p.has_residual;
  a.dtype = static_cast<Dtype>(p.dtype);
  return a;
}

GemmArgs gemm_args(const arb_problem& p, const arb_operands* o, void* workspace, size_t workspace_bytes) {
  GemmArgs g;
  if (o != nullptr) {
    g.a = o->a;
    g.b = o->b;
    g.c = o->c;
    g.bias = o->bias;
    g.d = o->d;
    g.alpha = o->alpha;
    g.beta = o->beta;
  }
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.lda = p.lda;
  g.ldb = p.ldb;
  g.ldc = p.ldc;
  g.ldd = p.ldd;
  g.trans_a = p.trans_a;
  g.trans_b = p.trans_b;
  g.activation = p.activation;
  g.has_c = p.has_c;
  g.has_bias = p.has_bias;
  g.dtype = static_cast<Dtype>(p.dtype);
  g.workspace = workspace;
  g.workspace_bytes = workspace_bytes;
  g.sm_count = device.sm_count;
  return g;
}

// The attention launcher's arguments from a problem (and a call's operands and workspace).
arbiter::cuda::AttentionArgs attention_args(const arb_problem& p, const arb_operands* o, void* workspace,
                                            size_t workspace_bytes) {
  arbiter::cuda::AttentionArgs a;
  if (o != nullptr) {
    a.q = o->q;
    a.k = o->k;
    a.v = o->v;
    a.o = o->o;
    a.scale = o->alpha;
  }
  a.batch = p.batch;
  a.q_len = p.q_len;
  a.kv_len = p.kv_len;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.dim = p.cols;
  const int64_t strides[4][3] = {{p.ld_q_batch, p.ld_q_token, p.ld_q_head},
                                 {p.ld_k_batch, p.ld_k_token, p.ld_k_head},
                                 {p.ld_v_batch, p.ld_v_token, p.ld_v_head},
                                 {p.ld_o_batch, p.ld_o_token, p.ld_o_head}};
  for (int i = 0; i < 3; ++i) {
    a.ld_q[i] = strides[0][i];
    a.ld_k[i] = strides[1][i];
    a.ld_v[i] = strides[2][i];
    a.ld_o[i] = strides[3][i];
  }
  a.causal = p.causal;
  a.dtype = static_cast<Dtype>(p.dtype);
  a.sm_count = device.sm_count;
  a.workspace = workspace;
  a.workspace_bytes = workspace_bytes;
  return a;
}

// Both MLP-block kernels' limits: decode sizes.
bool mlp_supported(const arb_problem& p, Why& why) {
  if (!device_limits(p, why)) return false;
  if (p.rows > arbiter::cuda::mlp_max_rows())
    return why.no("rows above %lld (decode sizes; the chain's GEMMs serve more)",
                  static_cast<long long>(arbiter::cuda::mlp_max_rows()));
  if (p.cols + p.inter > (int64_t{1} << 40)) return why.no("hidden + inter above 2^40");
  return true;
}

// The MLP launcher's arguments from a problem (and a call's operands and workspace).
arbiter::cuda::MlpArgs mlp_args(const arb_problem& p, const arb_operands* o, void* workspace) {
  arbiter::cuda::MlpArgs a;
  if (o != nullptr) {
    a.x = o->x;
    a.weight = o->weight;
    a.gate = o->gate;
    a.up = o->up;
    a.down = o->down;
    a.y = o->y;
    a.eps = o->eps;
  }
  a.rows = p.rows;
  a.hidden = p.cols;
  a.inter = p.inter;
  a.ld_x = p.ld_x;
  a.ld_y = p.ld_y;
  a.ld_gate = p.ld_gate;
  a.ld_up = p.ld_up;
  a.ld_down = p.ld_down;
  a.dtype = static_cast<Dtype>(p.dtype);
  a.sm_count = device.sm_count;
  a.workspace = workspace;
  return a;
}

// The fused qkv kernel's limits: decode sizes, and vector indices that fit an int.
bool qkv_supported(const arb_problem& p, Why& why) {
  if (!device_limits(p, why)) return false;
  if (p.rows > arbiter::cuda::qkv_max_rows())
    return why.no("rows above %lld (decode sizes; the chain's GEMM serves more)",
                  static_cast<long long>(arbiter::cuda::qkv_max_rows()));
  if (p.cols > 0x7fffffff) return why.no("hidden above 2^31 - 1");
  return true;
}

// The qkv launcher's arguments from a call.
arbiter::cuda::QkvArgs qkv_args(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  arbiter::cuda::QkvArgs a;
  a.x = o.x;
  a.weight = o.weight;
  a.w = o.b;
  a.positions = static_cast<const int32_t*>(o.positions);
  a.y = o.y;
  a.rows = p.rows;
  a.hidden = p.cols;
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim;
  a.ld_x = p.ld_x;
  a.ld_w = p.ld_w;
  a.ld_y = p.ld_y;
  a.eps = o.eps;
  a.theta = p.rope_theta;
  a.interleaved = p.rope_layout == ARB_ROPE_INTERLEAVED;
  a.dtype = static_cast<Dtype>(p.dtype);
  a.sm_count = device.sm_count;
  return a;
}

bool decode_limits(const arb_problem& p, Why& why) {
  if (!common_limits(p, why)) return false;
  if (p.m > 16) return why.no("m above 16 (decode shapes)");
  if (p.trans_a != 0 || p.trans_b != 1) return why.no("A [m, k] and B [n, k] only (ta=0 tb=1)");
  return whole_vectors(p, p.k, "k", why);
}

// The tensor-core GEMMs: f16/bf16, A [m, k] and B [n, k] (the layout of LLM weights).
bool tensor_core_limits(const arb_problem& p, Why& why) {
  if (!common_limits(p, why)) return false;
  if (p.dtype != ARB_DTYPE_F16 && p.dtype != ARB_DTYPE_BF16) return why.no("f16 and bf16 only");
  if (p.trans_a != 0 || p.trans_b != 1) return why.no("A [m, k] and B [n, k] only (ta=0 tb=1)");
  if (!whole_vectors(p, p.k, "k", why)) return false;
  if ((p.m + 127) / 128 > 65535) return why.no("m above 65535 x 128");
  return true;
}

arbiter::plugin::Plugin make() {
  const cudaDeviceProp prop = arbiter::plugin::require_cuda_device();
  // The fatbinary holds sm_90a and sm_80 code and no PTX: Hopper sm_90 and Ampere/Ada
  // (sm_8x) run it, other GPUs cannot.
  if (!(prop.major == 9 && prop.minor == 0) && prop.major != 8)
    throw Error(ARB_ERR_UNSUPPORTED, "built for sm_90a and sm_80 only; this GPU is sm_" + std::to_string(prop.major) +
                                         std::to_string(prop.minor));
  device = {prop.major, prop.minor, prop.multiProcessorCount, prop.name, false};
  device.clusters_of_8 = prop.major == 9 && arbiter::cuda::softmax_cluster_fits();

  arbiter::plugin::Plugin plugin("cuda", "0.1.0");
  plugin.provenance(ARB_PROVENANCE_HAND_TUNED)
      .priority(60)
      .runtime_version(
#if defined(ARBITER_EMULATOR_RUNTIME)
          "arbiter SIMT emulator (the CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "." +
          std::to_string(CUDART_VERSION % 1000 / 10) + " API), emulated sm_" + std::to_string(prop.major) +
          std::to_string(prop.minor))
#else
          "CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
          ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor))
#endif
      .description("hand-written CUDA kernels for sm_90a and sm_80: RMSNorm and softmax in registers with 16-byte "
                   "accesses, SwiGLU, rotary embeddings, split-KV and tensor-core attention, a split-K decode GEMM, a wgmma + TMA "
                   "GEMM for Hopper, an mma.sync GEMM");

  plugin.kernel(arbiter::plugin::Kernel("rmsnorm_vec16", ARB_OP_RMSNORM, kDLCUDA)
                    .supports(one_block_row_limits)
                    .launch([](const Launch& l) {
                      check_cuda(arbiter::cuda::launch_rmsnorm(row_args(l), static_cast<cudaStream_t>(l.stream)),
                            "rmsnorm_vec16");
                    }));
  plugin.kernel(arbiter::plugin::Kernel("softmax_vec16", ARB_OP_SOFTMAX, kDLCUDA)
                    .supports(one_block_row_limits)
                    .launch([](const Launch& l) {
                      check_cuda(arbiter::cuda::launch_softmax(row_args(l), static_cast<cudaStream_t>(l.stream)),
                            "softmax_vec16");
                    }));
  plugin.kernel(arbiter::plugin::Kernel("softmax_cluster8", ARB_OP_SOFTMAX, kDLCUDA)
                    .supports([](const arb_problem& p, Why& why) {
                      if (device.major != 9) return why.no("Hopper (sm_90a) only: thread-block clusters");
                      if (!device.clusters_of_8) return why.no("a cluster of 8 blocks does not fit this GPU (MPS, MIG?)");
                      if (p.cols < 4096) return why.no("cols below 4096 (one block per row is enough)");
                      return row_limits(p, why, arbiter::cuda::cluster_row_max_cols(static_cast<Dtype>(p.dtype)),
                                        "8 blocks' registers", 0x7fffffff / 8);
                    })
                    .launch([](const Launch& l) {
                      check_cuda(arbiter::cuda::launch_softmax_cluster(row_args(l), static_cast<cudaStream_t>(l.stream)),
                            "softmax_cluster8");
                    }));
  plugin.kernel(arbiter::plugin::Kernel("swiglu_vec16", ARB_OP_SWIGLU, kDLCUDA)
                    .supports([](const arb_problem& p, Why& why) {
                      return common_limits(p, why) && whole_vectors(p, p.cols, "cols", why);
                    })
                    .launch([](const Launch& l) {
                      arbiter::cuda::SwigluArgs a;
                      a.gate = l.operands.gate;
                      a.up = l.operands.up;
                      a.y = l.operands.y;
                      a.rows = l.problem.rows;
                      a.cols = l.problem.cols;
                      a.ld_gate = l.problem.ld_gate;
                      a.ld_up = l.problem.ld_up;
                      a.ld_y = l.problem.ld_y;
                      a.dtype = static_cast<Dtype>(l.problem.dtype);
                      check_cuda(arbiter::cuda::launch_swiglu(a, static_cast<cudaStream_t>(l.stream)), "swiglu_vec16");
                    }));
  // Any even dim, strides and alignment: 16-byte vectors where they allow, a pair at a time
  // elsewhere (the launcher looks at the addresses and strides it is given).
  plugin.kernel(arbiter::plugin::Kernel("mlp_fused", ARB_OP_MLP, kDLCUDA)
                    .supports(mlp_supported)
                    .workspace([](const arb_problem& p) { return arbiter::cuda::mlp_workspace_bytes(mlp_args(p, nullptr, nullptr)); })
                    .launch([](const Launch& l) {
                      check_cuda(arbiter::cuda::launch_mlp(mlp_args(l.problem, &l.operands, l.workspace),
                                                           static_cast<cudaStream_t>(l.stream)),
                                 "mlp_fused");
                    }));
  // The same limits in one launch (after a memset of its accumulator).
  plugin.kernel(arbiter::plugin::Kernel("mlp_persistent", ARB_OP_MLP, kDLCUDA)
                    .supports(mlp_supported)
                    .workspace([](const arb_problem& p) {
                      return arbiter::cuda::mlp_persistent_workspace_bytes(mlp_args(p, nullptr, nullptr));
                    })
                    .launch([](const Launch& l) {
                      check_cuda(arbiter::cuda::launch_mlp_persistent(mlp_args(l.problem, &l.operands, l.workspace),
                                                                      static_cast<cudaStream_t>(l.stream)),
                                 "mlp_persistent");
                    }));
  // Any hidden, even head_dim, strides and alignment: 16-byte vectors where the rows of x, W and
  // the norm weight are whole vectors (the launcher looks), element by element elsewhere.
  plugin.kernel(arbiter::plugin::Kernel("qkv_fused", ARB_OP_QKV, kDLCUDA)
                    .supports(qkv_supported)
                    .launch([](const Launch& l) {
                      check_cuda(arbiter::cuda::launch_qkv(qkv_args(l), static_cast<cudaStream_t>(l.stream)), "qkv_fused");
                    }));
  plugin.kernel(arbiter::plugin::Kernel("rope_vec16", ARB_OP_ROPE, kDLCUDA)
                    .supports([](const arb_problem& p, Why& why) {
                      if (!device_limits(p, why)) return false;
                      if (p.cols > 0x7fffffff) return why.no("dim above 2^31 - 1");
                      return true;
                    })
                    .launch([](const Launch& l) {
                      const arb_problem& p = l.problem;
                      const arbiter::cuda::RopeArgs a{.x = l.operands.x,
                                                      .positions = static_cast<const int32_t*>(l.operands.positions),
                                                      .tokens = p.rows,
                                                      .heads = p.heads,
                                                      .dim = p.cols,
                                                      .ld_token = p.ld_x,
                                                      .ld_head = p.ld_head,
                                                      .theta = p.rope_theta,
                                                      .interleaved = p.rope_layout == ARB_ROPE_INTERLEAVED,
                                                      .dtype = static_cast<Dtype>(p.dtype),
                                                      .sm_count = device.sm_count};
                      check_cuda(arbiter::cuda::launch_rope(a, static_cast<cudaStream_t>(l.stream)), "rope_vec16");
                    }));
  plugin.kernel(arbiter::plugin::Kernel("attention_splitkv", ARB_OP_ATTENTION, kDLCUDA)
                    .supports([](const arb_problem& p, Why& why) {
                      if (!common_limits(p, why)) return false;
                      const int64_t vector = p.dtype == ARB_DTYPE_F32 ? 4 : 8;
                      if (p.cols > arbiter::cuda::attention_max_dim() || p.cols % vector != 0)
                        return why.no("head_dim a multiple of %lld up to %lld", static_cast<long long>(vector),
                                      static_cast<long long>(arbiter::cuda::attention_max_dim()));
                      if (p.batch * p.q_len * p.heads > 0x7fffffff) return why.no("more than 2^31 - 1 query rows");
                      return true;
                    })
                    .workspace([](const arb_problem& p) {
                      return arbiter::cuda::attention_workspace_bytes(attention_args(p, nullptr, nullptr, 0));
                    })
                    .launch([](const Launch& l) {
                      const arbiter::cuda::AttentionArgs a =
                          attention_args(l.problem, &l.operands, l.workspace, l.workspace_bytes);
                      check_cuda(arbiter::cuda::launch_attention(a, static_cast<cudaStream_t>(l.stream)),
                                 "attention_splitkv");
                    }));
  // Below attention_splitkv where nothing was tuned: at decode (a few rows a K/V head) it runs
  // one block per K/V head over the whole cache; the tuner races the two per shape.
  plugin.kernel(arbiter::plugin::Kernel("attention_mma_sm80", ARB_OP_ATTENTION, kDLCUDA)
                    .priority(-1)
                    .supports([](const arb_problem& p, Why& why) {
                      if (!common_limits(p, why)) return false;
                      if (p.dtype != ARB_DTYPE_F16 && p.dtype != ARB_DTYPE_BF16) return why.no("f16 and bf16 only");
                      if (!arbiter::cuda::attention_sm80_supports_dim(p.cols)) return why.no("head_dim 64 or 128");
                      if (p.batch > 65535 || p.kv_heads > 65535) return why.no("batch or kv_heads above 65535");
                      if (p.q_len > 0x7fffffff / (p.heads / p.kv_heads)) return why.no("more than 2^31 - 1 rows a K/V head");
                      return true;
                    })
                    .launch([](const Launch& l) {
                      const arbiter::cuda::AttentionArgs a = attention_args(l.problem, &l.operands, nullptr, 0);
                      check_cuda(arbiter::cuda::launch_attention_sm80(a, static_cast<cudaStream_t>(l.stream)),
                                 "attention_mma_sm80");
                    }));
  plugin.kernel(arbiter::plugin::Kernel("gemm_decode_splitk", ARB_OP_GEMM, kDLCUDA)
                    .supports(decode_limits)
                    .workspace([](const arb_problem& p) {
                      return arbiter::cuda::splitk_workspace_bytes(gemm_args(p, nullptr, nullptr, 0));
                    })
                    .launch([](const Launch& l) {
                      const GemmArgs g = gemm_args(l.problem, &l.operands, l.workspace, l.workspace_bytes);
                      check_cuda(arbiter::cuda::launch_gemm_splitk(g, static_cast<cudaStream_t>(l.stream)),
                            "gemm_decode_splitk");
                    }));
  // Two tile widths of the Hopper GEMM: the tuner picks per shape.
  for (const int block_n : {128, 256}) {
    plugin.kernel(arbiter::plugin::Kernel(block_n == 128 ? "gemm_wgmma_sm90" : "gemm_wgmma_sm90_n256", ARB_OP_GEMM,
                                          kDLCUDA)
                      .supports([](const arb_problem& p, Why& why) {
                        if (device.major != 9) return why.no("Hopper (sm_90a) only");
                        if (!tensor_core_limits(p, why)) return false;
                        if (p.m > 0x7fffffff || p.n > 0x7fffffff || p.k > 0x7fffffff)
                          return why.no("sizes above 2^31 - 1");
                        return true;
                      })
                      .launch([block_n](const Launch& l) {
                        const GemmArgs g = gemm_args(l.problem, &l.operands, l.workspace, l.workspace_bytes);
                        check_cuda(arbiter::cuda::launch_gemm_sm90(g, block_n, static_cast<cudaStream_t>(l.stream)),
                              block_n == 128 ? "gemm_wgmma_sm90" : "gemm_wgmma_sm90_n256");
                      }));
  }
  plugin.kernel(arbiter::plugin::Kernel("gemm_mma_sm80", ARB_OP_GEMM, kDLCUDA)
                    .supports(tensor_core_limits)
                    .launch([](const Launch& l) {
                      const GemmArgs g = gemm_args(l.problem, &l.operands, l.workspace, l.workspace_bytes);
                      check_cuda(arbiter::cuda::launch_gemm_sm80(g, static_cast<cudaStream_t>(l.stream)), "gemm_mma_sm80");
                    }));
  return plugin;
}

}  // namespace

ARBITER_PLUGIN(make())
