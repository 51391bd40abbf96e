/* arbiter: the plugin C ABI.
 *
 * A plugin is a shared library that exports exactly one symbol, arbiter_plugin_entry. The
 * host calls it with its ABI version and a table of host services; the plugin answers with
 * a descriptor listing its kernels, or with an error that says why not. Plugins never link
 * libarbiter. Rules (docs/abi-rules.md):
 *  - versions are major.minor: equal major is required; across minors each side uses only
 *    what the older one knows, which `struct_size` tells;
 *  - every struct starts with struct_size and only grows at the end; optional function
 *    pointers may be NULL; ARB_<NAME>_STRUCT_SIZE beside each struct is the size of its
 *    version 1.0, fields beyond it are noted `optional, since 1.0` or `since 1.N`
 *    (types.h);
 *  - no C++ exception, allocator or STL type crosses the boundary: a status plus a message
 *    written into the caller's buffer;
 *  - the caller allocates; strings and descriptors returned by a plugin stay valid while it
 *    is loaded; workspace is sized by the kernel and allocated by the host;
 *  - launch is reentrant and thread-safe; supports() is cheap and side-effect free. */
#ifndef ARBITER_PLUGIN_H
#define ARBITER_PLUGIN_H

#include <arbiter/types.h>

#if defined(_WIN32)
#define ARB_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ARB_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ARB_PLUGIN_ABI_MAJOR 1
#define ARB_PLUGIN_ABI_MINOR 5
#define ARB_PLUGIN_ENTRY_SYMBOL "arbiter_plugin_entry"

/* A problem: everything a kernel may look at to decide whether and how it runs, and
 * nothing that changes from call to call (no data pointers, no scalars). Fields that do
 * not belong to `op` are zero. The host builds it zero-filled, so it has no padding. */
typedef struct arb_problem {
  size_t struct_size;
  int32_t op;          /* arb_op */
  int32_t dtype;       /* arb_dtype of every floating-point operand (rope's positions: int32) */
  int32_t device_type; /* DLDeviceType: kDLCPU or kDLCUDA */
  int32_t device_id;
  int32_t alignment;   /* largest power of two (<= 256) dividing every operand address and
                          row stride in bytes */
  int32_t flags;       /* reserved, 0 */

  /* gemm: D[m,n] = act(alpha * op(A)[m,k] * op(B)[k,n] + beta * C[m,n] + bias[n]);
   * row-major; lda is the row stride of A as stored ([m,k], or [k,m] when trans_a). */
  int64_t m, n, k;
  int64_t batch; /* 1; reserved for batched gemm */
  int64_t lda, ldb, ldc, ldd;
  int32_t trans_a, trans_b;
  int32_t activation; /* arb_activation */
  int32_t has_c;      /* beta != 0: C is read */
  int32_t has_bias;
  int32_t c_is_d;     /* C and D are the same memory (in-place accumulate) */

  /* rmsnorm, softmax: rows x cols, reduced along cols; ld_* are row strides in elements */
  int64_t rows, cols;
  int64_t ld_x, ld_y, ld_residual;
  int32_t has_residual; /* rmsnorm: x += residual first, written back to x */
  int32_t reserved;

  /* since 1.1: swiglu: y[rows, cols] = silu(gate) * up (rows, cols and ld_y above); the row
   * strides of gate and up. A fused gate/up GEMM's [rows, 2 cols] output has
   * ld_gate = ld_up = its row stride, up cols elements past gate. */
  int64_t ld_gate, ld_up;

  /* since 1.2: rope, in place on x [rows = tokens, heads, cols = head_dim]: ld_x (above) is
   * the token stride, ld_head the head stride, both in elements; each head's pairs (layout:
   * arb_rope_layout) turn by position * rope_theta^(-2i / head_dim), i the pair's index, for
   * positions (an int32 per token) in [0, max_position). */
  int64_t heads;
  int64_t ld_head;
  int64_t max_position;
  double rope_theta;
  int32_t rope_layout;
  int32_t reserved_rope;

  /* since 1.3: attention, per batch b and query head h, O = softmax(scale * Q K^T) V with
   * Q [batch, q_len, heads, head_dim], K and V [batch, kv_len, kv_heads, head_dim], O like Q;
   * batch, heads and cols (= head_dim) are the fields above. Query head h reads key/value
   * head h / (heads / kv_heads) (grouped-query attention). Strides are in elements, one per
   * dimension (the last is contiguous); a dimension of size 1 has stride 0. With causal, query
   * i sees key j only when j <= i + kv_len - q_len (the mask aligned to the end of the keys,
   * so that decode is q_len = 1 against a cache); kv_len >= q_len. The scale is operands.alpha. */
  int64_t q_len, kv_len, kv_heads;
  int64_t ld_q_batch, ld_q_token, ld_q_head;
  int64_t ld_k_batch, ld_k_token, ld_k_head;
  int64_t ld_v_batch, ld_v_token, ld_v_head;
  int64_t ld_o_batch, ld_o_token, ld_o_head;
  int32_t causal;
  int32_t reserved_attention;

  /* since 1.4: mlp, the MLP block of a Llama decoder layer over rows x cols (hidden):
   * y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * weight (eps: operands.eps), with
   * ld_x, ld_y (above) the row strides of x and y; the weights [inter, cols] (gate, up) and
   * [cols, inter] (down) as torch.nn.Linear stores them, with row strides ld_gate, ld_up
   * (above) and ld_down. */
  int64_t inter;
  int64_t ld_down;

  /* since 1.5: qkv, the attention block's input over rows x cols (hidden): n = rmsnorm(x) *
   * weight (eps: operands.eps), y = n W^T with W [(heads + 2 kv_heads) head_dim, cols] as
   * torch.nn.Linear stores the fused QKV projection (operands.b, row stride ld_w), then rope
   * (rope_theta, rope_layout, max_position above; operands.positions, one per row) on y's
   * first heads + kv_heads heads, q's and k's, in place; y [rows, heads + 2 kv_heads, head_dim]
   * with the heads side by side and the row stride ld_y. heads and kv_heads are the fields
   * above, ld_x x's row stride. */
  int64_t head_dim;
  int64_t ld_w;
} arb_problem;
#define ARB_PROBLEM_STRUCT_SIZE ARB_STRUCT_SIZE(arb_problem, reserved)

/* The data of one call. Pointers already include DLTensor byte offsets. */
typedef struct arb_operands {
  size_t struct_size;
  const void* a; /* gemm */
  const void* b;         /* gemm; since 1.5 also qkv's projection weight W */
  const void* c;
  const void* bias;
  void* d;
  void* x;              /* rmsnorm (in/out when has_residual), softmax (in), mlp and qkv (in) */
  const void* residual; /* rmsnorm */
  const void* weight;   /* rmsnorm; mlp's and qkv's norm weight */
  void* y;              /* rmsnorm, softmax, mlp, qkv */
  float alpha;          /* gemm; attention's scale */
  float beta;           /* gemm */
  float eps;            /* rmsnorm, mlp, qkv */
  float reserved;
  const void* gate;     /* since 1.1: swiglu; since 1.4 also mlp's gate weight */
  const void* up;       /* since 1.1: swiglu; since 1.4 also mlp's up weight */
  const void* positions; /* since 1.2: rope, int32 [tokens]; rope's x is `x` above; since 1.5 also qkv's */
  const void* q;         /* since 1.3: attention (its scale is alpha above) */
  const void* k;
  const void* v;
  void* o;
  const void* down;      /* since 1.4: mlp (with x, weight, gate, up, y and eps above) */
} arb_operands;
#define ARB_OPERANDS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_operands, reserved)

/* Kernel flags (arb_kernel.flags): ARB_KERNEL_FLAG_NONDETERMINISTIC, ARB_KERNEL_FLAG_TF32,
 * defined in types.h, which arbiter.h shares. */

/* Returns 1 if the kernel can run `problem`, else 0 and (if why != NULL) a reason. */
typedef int32_t (*arb_supports_fn)(void* kernel_ctx, const arb_problem* problem, char* why,
                                   size_t why_capacity);
typedef arb_status (*arb_workspace_size_fn)(void* kernel_ctx, const arb_problem* problem,
                                            size_t* bytes);
/* Runs the kernel on `stream` (NULL on CPU). Never allocates what the workspace provides;
 * on failure writes a message into err. */
typedef arb_status (*arb_launch_fn)(void* kernel_ctx, const arb_problem* problem,
                                    const arb_operands* operands, void* workspace,
                                    size_t workspace_bytes, void* stream, char* err,
                                    size_t err_capacity);

typedef struct arb_kernel {
  size_t struct_size;
  const char* name;    /* stable within the plugin; [A-Za-z0-9_.:=,-] */
  int32_t op;          /* arb_op */
  int32_t device_type; /* DLDeviceType */
  int32_t provenance;  /* arb_provenance; UNSPECIFIED means the plugin's */
  int32_t priority;    /* orders the kernels of one plugin; higher first */
  uint32_t flags;      /* ARB_KERNEL_FLAG_* */
  int32_t reserved;
  void* ctx;           /* passed back to the functions below */
  arb_supports_fn supports;             /* required */
  arb_workspace_size_fn workspace_size; /* optional: NULL means no workspace */
  arb_launch_fn launch;                 /* required */
} arb_kernel;
#define ARB_KERNEL_STRUCT_SIZE ARB_STRUCT_SIZE(arb_kernel, launch)

typedef struct arb_plugin_descriptor {
  size_t struct_size;
  uint32_t abi_major; /* the plugin ABI the plugin was built against */
  uint32_t abi_minor;
  const char* name;     /* [a-z0-9_-], unique among loaded plugins */
  const char* version;  /* semantic version */
  const char* build_id; /* a hash of what was compiled */
  int32_t provenance;   /* arb_provenance */
  int32_t priority;     /* default priority among plugins; config may override */
  const arb_kernel* const* kernels;
  size_t kernel_count;
  /* optional from here on: a shorter struct_size leaves them out */
  const char* description;           /* optional, since 1.0 */
  void* plugin_ctx;                  /* optional, since 1.0 */
  void (*release)(void* plugin_ctx); /* optional, since 1.0; called once per successful
                                        entry call, at unload */
  /* The version of the library the plugin wraps (cuBLASLt, OpenBLAS...), or NULL. Part of
   * every tuning-table entry's validators: a new vendor library invalidates its entries. */
  const char* runtime_version;       /* optional, since 1.0 */
} arb_plugin_descriptor;
#define ARB_PLUGIN_DESCRIPTOR_STRUCT_SIZE ARB_STRUCT_SIZE(arb_plugin_descriptor, kernel_count)
/* The former names of the two minimum sizes the host enforces, kept for plugins. */
#define ARB_PLUGIN_DESCRIPTOR_MIN_SIZE ARB_PLUGIN_DESCRIPTOR_STRUCT_SIZE
#define ARB_KERNEL_MIN_SIZE ARB_KERNEL_STRUCT_SIZE

/* Services the host offers. Valid for the whole life of the process. */
typedef struct arb_host_api {
  size_t struct_size;
  uint32_t abi_major; /* the plugin ABI the host implements */
  uint32_t abi_minor;
  const char* host_version;
  void* host_ctx;
  void (*log)(void* host_ctx, int32_t level, const char* plugin, const char* message);
} arb_host_api;
#define ARB_HOST_API_STRUCT_SIZE ARB_STRUCT_SIZE(arb_host_api, log)

/* The one exported symbol. May be called more than once (once per context). On success
 * *descriptor points to a descriptor valid until its release() (or the unload).
 * ARB_ERR_UNSUPPORTED with a reason in err means "nothing to offer on this host" (a CUDA
 * plugin without a GPU): an expected state, listed with the reason and logged as info. Any
 * other failure is logged as a warning. */
typedef arb_status (*arb_plugin_entry_fn)(const arb_host_api* host,
                                          const arb_plugin_descriptor** descriptor, char* err,
                                          size_t err_capacity);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ARBITER_PLUGIN_H */
