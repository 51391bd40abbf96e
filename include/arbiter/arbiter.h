/* arbiter: the application C ABI.
 *
 * A program creates a context (which loads the plugins and reads the configuration), then
 * calls operations on DLPack tensors. For every problem the context picks a kernel from the
 * loaded plugins (config override, then tuning table, then the on-miss policy) and runs it.
 *
 * ABI rules: every struct starts with `struct_size` (set it to sizeof), structs only ever
 * grow at the end, and the library reads only the fields the caller's struct_size covers.
 * Use the ARB_*_INIT macros to get zeroed structs with defaults. ARB_<NAME>_STRUCT_SIZE
 * beside each struct is the size of its version 1.0, the least struct_size the library
 * accepts; fields beyond it are noted `optional, since 1.0` or `since 1.N`, functions added
 * after 1.0 `since 1.N` (types.h, docs/abi-rules.md).
 *
 * Errors: every function returns an arb_status; arb_last_error() then holds a message
 * for the calling thread. No function aborts or throws. */
#ifndef ARBITER_ARBITER_H
#define ARBITER_ARBITER_H

#include <arbiter/types.h>

#if defined(_WIN32)
#define ARB_API __declspec(dllexport)
#else
#define ARB_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Application ABI version. Equal major is required; a newer minor library serves older
 * applications. Compare ARB_ABI_VERSION_MAJOR against arb_abi_version() >> 16 at start-up. */
#define ARB_ABI_VERSION_MAJOR 1
#define ARB_ABI_VERSION_MINOR 8
#define ARB_MAKE_VERSION(major, minor) ((uint32_t)(((uint32_t)(major) << 16) | (uint32_t)(minor)))

ARB_API uint32_t arb_abi_version(void);           /* ARB_MAKE_VERSION(major, minor) */
ARB_API const char* arb_library_version(void);    /* semantic version, e.g. "0.1.0" */
ARB_API const char* arb_status_string(int32_t status); /* an arb_status */
/* since 1.1: an arb_provenance as the CLI prints it: "unspecified", "reference", "vendor",
 * "hand_tuned", "ai_generated"; "unknown" for any other value. Never NULL; static storage. */
ARB_API const char* arb_provenance_string(int32_t provenance);
/* Message of the last failed call on this thread; "" after a success. Valid until the next
 * arbiter call on the same thread. */
ARB_API const char* arb_last_error(void);

/* ---- context ----------------------------------------------------------------------- */

typedef struct arb_context_s* arb_context;

typedef struct arb_context_options {
  size_t struct_size;
  const char* config_path; /* a TOML file, or NULL */
  const char* config_toml; /* TOML text, or NULL. Set at most one; neither: embedded default */
} arb_context_options;
#define ARB_CONTEXT_OPTIONS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_context_options, config_toml)
#define ARB_CONTEXT_OPTIONS_INIT {sizeof(arb_context_options), NULL, NULL}

/* options may be NULL (embedded default configuration). On failure *context is NULL. */
ARB_API arb_status arb_context_create(const arb_context_options* options, arb_context* context);
/* Unloads the context's plugins. NULL is accepted and ignored. */
ARB_API arb_status arb_context_destroy(arb_context context);

/* ---- operations ----------------------------------------------------------------------
 * Tensors are borrowed for the call. All operands share one dtype (f32, f16 or bf16) and
 * one device (device_id 0 on the CPU, as DLPack has it); math is done in f32 or wider. Matrices are row-major: the last dimension
 * has stride 1 (or strides == NULL for compact tensors), the row stride may be padded.
 * Every address (data + byte_offset) is aligned for the dtype, and sizes times strides
 * times the element size fit the address space; an output shares no memory with an input
 * (gemm's C may be exactly D): anything else is ARB_ERR_INVALID_ARGUMENT, before any
 * memory is touched. Reserved fields are 0.
 * `stream` is the caller's stream for device tensors (a cudaStream_t); NULL for CPU (a
 * non-NULL stream with CPU tensors is ARB_ERR_INVALID_ARGUMENT). */

/* D[m,n] = act(alpha * op(A) * op(B) + beta * C + bias)
 * op(A) is [m,k]: A is stored [m,k], or [k,m] when trans_a. op(B) is [k,n]: B is stored
 * [k,n], or [n,k] when trans_b. C is [m,n], read only when beta != 0, and may be the same
 * tensor as D. bias is [n], added to every row. A leading batch dimension is reserved for a
 * later minor version: today 2-D tensors only. */
typedef struct arb_gemm_args {
  size_t struct_size;
  const DLTensor* a;
  const DLTensor* b;
  const DLTensor* c;    /* optional */
  const DLTensor* bias; /* optional */
  const DLTensor* d;    /* output */
  int32_t trans_a;
  int32_t trans_b;
  int32_t activation; /* arb_activation */
  int32_t reserved;   /* 0 */
  float alpha;
  float beta;
} arb_gemm_args;
#define ARB_GEMM_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_gemm_args, beta)
/* Start from the INIT macro: a zero-filled struct has alpha = 0, which is valid and scales
 * A*B away (bindings without macros: docs/abi-rules.md, "Binding authors"). */
#define ARB_GEMM_ARGS_INIT {sizeof(arb_gemm_args), NULL, NULL, NULL, NULL, NULL, 0, 0, ARB_ACT_NONE, 0, 1.0f, 0.0f}

/* y = x / sqrt(mean(x^2) + eps) * weight over the last dimension.
 * With a residual, x is first updated in place: x += residual, and the sum is normalised.
 * x, residual and y have one shape [..., n] (leading dimensions collapse into rows);
 * weight is [n]. y must not overlap x, residual or weight; with a residual, x (written)
 * must not overlap residual or weight. */
typedef struct arb_rmsnorm_args {
  size_t struct_size;
  const DLTensor* x;
  const DLTensor* residual; /* optional */
  const DLTensor* weight;
  const DLTensor* y;
  float eps;
  int32_t reserved; /* 0 */
} arb_rmsnorm_args;
#define ARB_RMSNORM_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_rmsnorm_args, eps)
#define ARB_RMSNORM_ARGS_INIT {sizeof(arb_rmsnorm_args), NULL, NULL, NULL, NULL, 1e-6f, 0}

/* y = softmax(x) over the last dimension, numerically stable, f32 math for every dtype. */
typedef struct arb_softmax_args {
  size_t struct_size;
  const DLTensor* x;
  const DLTensor* y;
} arb_softmax_args;
#define ARB_SOFTMAX_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_softmax_args, y)
#define ARB_SOFTMAX_ARGS_INIT {sizeof(arb_softmax_args), NULL, NULL}

/* since 1.4: y = silu(gate) * up elementwise, silu(g) = g / (1 + e^-g), f32 math for every
 * dtype: the activation of a Llama MLP block. gate, up and y have one shape [..., n] (leading
 * dimensions collapse into rows). With up NULL, gate is the [..., 2n] output of one fused
 * gate/up GEMM: its first n columns are the gate, its last n the up projection. y must not
 * overlap gate or up. (The whole struct; ARB_SWIGLU_ARGS_STRUCT_SIZE is this first version.) */
typedef struct arb_swiglu_args {
  size_t struct_size;
  const DLTensor* gate;
  const DLTensor* up; /* optional: NULL when gate holds both halves */
  const DLTensor* y;
} arb_swiglu_args;
#define ARB_SWIGLU_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_swiglu_args, y)
#define ARB_SWIGLU_ARGS_INIT {sizeof(arb_swiglu_args), NULL, NULL, NULL}

ARB_API arb_status arb_gemm(arb_context context, const arb_gemm_args* args, void* stream);
ARB_API arb_status arb_rmsnorm(arb_context context, const arb_rmsnorm_args* args, void* stream);
ARB_API arb_status arb_softmax(arb_context context, const arb_softmax_args* args, void* stream);
/* since 1.5: rotary position embedding, in place: x [..., heads, head_dim] (the leading
 * dimensions are the tokens and collapse into one token stride; a head stride of its own, so
 * that the Q or K columns of a fused QKV output rotate where they are) turns each pair of a
 * head (layout: arb_rope_layout) by the angle position * theta^(-2i / head_dim), i the pair's
 * index, with cos and sin in f32 or wider. positions is int32 with x's leading shape (one per
 * token), contiguous, every value in [0, max_position): kernels may tabulate the angles up
 * to max_position. arb_rope on CPU tensors checks the values (ARB_ERR_INVALID_ARGUMENT);
 * device memory and plan runs are not read by the host, so there a position outside the
 * range is the caller's error, as an out-of-range embedding index is. head_dim is even. positions must not
 * overlap x. (The whole struct; ARB_ROPE_ARGS_STRUCT_SIZE is this first version.) */
typedef struct arb_rope_args {
  size_t struct_size;
  const DLTensor* x;         /* read and written */
  const DLTensor* positions; /* int32 */
  double theta;              /* the base: 10000 (Llama 2), 500000 (Llama 3); > 1 */
  int64_t max_position;      /* >= 1, <= 2^24 (positions exact in f32) */
  int32_t layout;            /* arb_rope_layout */
  int32_t reserved;          /* 0 */
} arb_rope_args;
#define ARB_ROPE_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_rope_args, reserved)
#define ARB_ROPE_ARGS_INIT {sizeof(arb_rope_args), NULL, NULL, 500000.0, 8192, ARB_ROPE_SPLIT_HALF, 0}

/* since 1.4 */
ARB_API arb_status arb_swiglu(arb_context context, const arb_swiglu_args* args, void* stream);
/* since 1.5 */
ARB_API arb_status arb_rope(arb_context context, const arb_rope_args* args, void* stream);

/* since 1.6: scaled dot-product attention. q [batch, q_len, heads, head_dim], k and v
 * [batch, kv_len, kv_heads, head_dim], o like q; one dtype (f32, f16, bf16), one device; any
 * strides but the last dimension's (contiguous). heads is a multiple of kv_heads (grouped-query
 * attention: query head h reads key/value head h / (heads / kv_heads)). Per batch and head,
 * o = softmax(scale * q k^T) v, the softmax over the keys, in f32 or wider. With causal, query
 * i sees key j only when j <= i + kv_len - q_len: the mask is aligned to the end of the keys,
 * so decode (q_len = 1 against a cache of kv_len) sees every key; kv_len >= q_len. o must not
 * overlap q, k or v, nor itself (two of its elements at one address); q, k and v may overlap
 * one another (the Q, K and V columns of one fused QKV projection). head_dim <= 512.
 * (The whole struct; ARB_ATTENTION_ARGS_STRUCT_SIZE is this first version.) */
typedef struct arb_attention_args {
  size_t struct_size;
  const DLTensor* q;
  const DLTensor* k;
  const DLTensor* v;
  const DLTensor* o; /* written */
  float scale;       /* 0: 1 / sqrt(head_dim); otherwise finite */
  int32_t causal;    /* 0 or 1 */
} arb_attention_args;
#define ARB_ATTENTION_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_attention_args, causal)
#define ARB_ATTENTION_ARGS_INIT {sizeof(arb_attention_args), NULL, NULL, NULL, NULL, 0.0f, 0}

ARB_API arb_status arb_attention(arb_context context, const arb_attention_args* args, void* stream);

/* since 1.7: the MLP block of a Llama decoder layer, a composite op:
 *   n = rmsnorm(x) * norm_weight        (over hidden, with eps)
 *   y = x + down(silu(gate(n)) * up(n))
 * x and y [..., hidden] (leading dimensions collapse into rows); the weights as torch.nn.Linear
 * stores them: gate and up [inter, hidden], down [hidden, inter], each row-major with a row
 * stride of its own. With up NULL, gate is the fused [2 inter, hidden] gate/up projection: its
 * first inter rows the gate, its last inter rows up. One dtype (f32, f16, bf16), one device. A
 * kernel may round the intermediates (n, the projections, the activation) to the dtype, as the
 * chain of single ops does. y must not overlap any input. Kernels compete with the chain of the
 * single ops (rmsnorm, gemm, swiglu, gemm), each dispatched as its own call would be.
 * (The whole struct; ARB_MLP_ARGS_STRUCT_SIZE is this first version.) */
typedef struct arb_mlp_args {
  size_t struct_size;
  const DLTensor* x;
  const DLTensor* norm_weight; /* [hidden] */
  const DLTensor* gate;        /* [inter, hidden], or [2 inter, hidden] with up NULL */
  const DLTensor* up;          /* [inter, hidden]; optional */
  const DLTensor* down;        /* [hidden, inter] */
  const DLTensor* y;           /* written */
  float eps;                   /* rmsnorm's; finite, >= 0 */
  int32_t reserved;            /* 0 */
} arb_mlp_args;
#define ARB_MLP_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_mlp_args, reserved)
#define ARB_MLP_ARGS_INIT {sizeof(arb_mlp_args), NULL, NULL, NULL, NULL, NULL, NULL, 1e-5f, 0}

/* since 1.7 */
ARB_API arb_status arb_mlp(arb_context context, const arb_mlp_args* args, void* stream);

/* since 1.8: the input of a Llama attention block, a composite op:
 *   n = rmsnorm(x) * norm_weight                     (over hidden, with eps)
 *   y = n W^T                                        (the fused QKV projection)
 *   rope on y's q and k heads, in place              (positions, theta, layout as arb_rope)
 * x [..., hidden] (leading dimensions collapse into rows); weight W [(heads + 2 kv_heads)
 * head_dim, hidden] as torch.nn.Linear stores a fused QKV projection (its rows: q's heads, then
 * k's, then v's), row-major with a row stride of its own; y [..., heads + 2 kv_heads, head_dim],
 * x's leading shape, the heads side by side (head stride head_dim), so that q, k and v are
 * views of it (y[..., :heads, :], then kv_heads each). positions: int32 with x's leading shape,
 * contiguous, each in [0, max_position). One dtype (f32, f16, bf16), one device; head_dim
 * even. A kernel may round n and the projection to the dtype, as the chain of single ops does.
 * y must not overlap any input. Kernels compete with the chain (rmsnorm, gemm, rope on q, rope
 * on k), each step dispatched as its own call would be.
 * (The whole struct; ARB_QKV_ARGS_STRUCT_SIZE is this first version.) */
typedef struct arb_qkv_args {
  size_t struct_size;
  const DLTensor* x;
  const DLTensor* norm_weight; /* [hidden] */
  const DLTensor* weight;      /* [(heads + 2 kv_heads) head_dim, hidden] */
  const DLTensor* positions;   /* int32, x's leading shape */
  const DLTensor* y;           /* [..., heads + 2 kv_heads, head_dim], written */
  int64_t heads;               /* q's heads, >= 1 */
  int64_t kv_heads;            /* k's and v's, >= 1 */
  double theta;                /* rope's base, > 1 */
  int64_t max_position;        /* >= 1, <= 2^24 */
  float eps;                   /* rmsnorm's; finite, >= 0 */
  int32_t layout;              /* arb_rope_layout */
} arb_qkv_args;
#define ARB_QKV_ARGS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_qkv_args, layout)
#define ARB_QKV_ARGS_INIT {sizeof(arb_qkv_args), NULL, NULL, NULL, NULL, NULL, 0, 0, 500000.0, 8192, 1e-5f, ARB_ROPE_SPLIT_HALF}

/* since 1.8 */
ARB_API arb_status arb_qkv(arb_context context, const arb_qkv_args* args, void* stream);

/* ---- explain -------------------------------------------------------------------------
 * Why a kernel is (or would be) chosen: the problem key, the rule that fired, and every
 * candidate with the reason it was refused. Writes a NUL-terminated report into buffer.
 * If buffer is NULL or capacity too small, returns ARB_ERR_BUFFER_TOO_SMALL; *length (if
 * not NULL) always receives the size needed, terminating NUL included. */

/* op is an arb_op; args points to that op's args struct (arb_gemm_args for ARB_OP_GEMM...). */
ARB_API arb_status arb_explain(arb_context context, int32_t op, const void* args, char* buffer,
                               size_t capacity, size_t* length);
/* The same for a problem written in the problem syntax (docs/problem-syntax.md), e.g.
 * "gemm bf16 m=128 n=4096 k=4096 tb=1 act=gelu". */
ARB_API arb_status arb_explain_problem(arb_context context, const char* problem, char* buffer,
                                       size_t capacity, size_t* length);

/* ---- introspection ------------------------------------------------------------------
 * Plugins seen by the context, loaded and rejected. Strings stay valid until the context
 * is destroyed. */
typedef struct arb_plugin_info {
  size_t struct_size;
  const char* name;        /* "" if the plugin was rejected before it could say */
  const char* version;
  const char* build_id;
  const char* path;
  const char* description;
  const char* status;      /* "loaded", "disabled" or "rejected" */
  const char* reason;      /* why rejected or disabled; "" when loaded */
  uint32_t abi_major;      /* the plugin's ABI version, 0.0 if unknown */
  uint32_t abi_minor;
  int32_t provenance;      /* arb_provenance */
  int32_t priority;        /* effective priority (config overrides the plugin's own) */
  size_t kernel_count;
  /* optional, since 1.0: the library the plugin wraps (e.g. "OpenBLAS 0.3.21"), or ""; written
   * only when struct_size covers it */
  const char* runtime_version;
  /* since 1.1: the SHA-256 (hex) of the plugin's file as the host read it at load, "" for the
   * oracle built into libarbiter or a file that could not be read. Part of the plugin's
   * identity for verdicts and tuning-table entries; what [[plugins.trust]] names. */
  const char* sha256;
  /* since 1.1: where the plugin was found: "built-in", "config", "ARBITER_PLUGIN_PATH",
   * "install" or "emulated" */
  const char* origin;
  /* since 1.1: an arb_plugin_trust: whether its kernels run without the verification gate */
  int32_t trust;
  int32_t reserved; /* zero */
} arb_plugin_info;
#define ARB_PLUGIN_INFO_STRUCT_SIZE ARB_STRUCT_SIZE(arb_plugin_info, kernel_count)
#define ARB_PLUGIN_INFO_INIT \
  {sizeof(arb_plugin_info), NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0, 0}

/* since 1.1: how far the host trusts a plugin's kernels. Trust is set by the operator, never
 * claimed: a plugin's declared provenance is information only. */
typedef enum arb_plugin_trust {
  ARB_PLUGIN_TRUST_NONE = 0,   /* every kernel passes the verification gate before it runs */
  ARB_PLUGIN_TRUST_ORACLE = 1, /* the reference built into libarbiter: the gate's oracle */
  ARB_PLUGIN_TRUST_CONFIG = 2, /* named by path and SHA-256 in [[plugins.trust]]: its kernels run
                                  without a verdict, except AI-generated ones */
  ARB_PLUGIN_TRUST_HOST = 3    /* since 1.7: built into libarbiter, the chains of composite ops
                                  (mlp): each runs its steps as dispatched calls, each step's
                                  kernel gated for its own problem */
} arb_plugin_trust;

typedef struct arb_kernel_info {
  size_t struct_size;
  const char* name; /* "<plugin>.<kernel>" */
  int32_t op;       /* arb_op */
  int32_t device_type; /* DLDeviceType */
  int32_t provenance;  /* arb_provenance, resolved */
  int32_t priority;
  uint32_t flags;      /* ARB_KERNEL_FLAG_* (types.h) */
  int32_t reserved;
} arb_kernel_info;
#define ARB_KERNEL_INFO_STRUCT_SIZE ARB_STRUCT_SIZE(arb_kernel_info, reserved)
#define ARB_KERNEL_INFO_INIT {sizeof(arb_kernel_info), NULL, 0, 0, 0, 0, 0, 0}

ARB_API arb_status arb_plugin_count(arb_context context, size_t* count);
ARB_API arb_status arb_plugin_get_info(arb_context context, size_t plugin_index, arb_plugin_info* info);
ARB_API arb_status arb_kernel_get_info(arb_context context, size_t plugin_index, size_t kernel_index,
                                       arb_kernel_info* info);

/* ---- verification and tuning (since 1.2) ---------------------------------------------
 * What `arbiter verify` and `arbiter tune` do, for programs and bindings: one implementation
 * serves both. Each call returns a report, JSON text whose fields docs/c-api.md lists. A
 * report is the caller's until arb_report_destroy; on failure *report is NULL. These calls
 * run kernels, verify and time them: seconds to minutes, on the calling thread. */

/* since 1.2: a report produced by arb_verify / arb_tune: JSON text owned by the library. */
typedef struct arb_report_s* arb_report;
/* since 1.2: the report's NUL-terminated UTF-8 JSON, valid until it is destroyed; "" for NULL. */
ARB_API const char* arb_report_json(arb_report report);
/* since 1.2: frees the report. NULL is accepted and ignored. */
ARB_API arb_status arb_report_destroy(arb_report report);

/* since 1.2: arb_verify_options.flags */
#define ARB_VERIFY_FULL 0x1u /* also at the problem's own size, with new seeds (CLI: verify --full) */

/* since 1.2 (the whole struct; ARB_VERIFY_OPTIONS_STRUCT_SIZE is the size of this first version) */
typedef struct arb_verify_options {
  size_t struct_size;
  const char* problem; /* problem syntax, e.g. "gemm f32 m=64 n=64 k=64" */
  const char* kernel;  /* "<plugin>.<kernel>" to verify one kernel, or NULL for every kernel of the problem's op and device */
  uint32_t flags;      /* ARB_VERIFY_* */
  int32_t reserved;    /* 0 */
} arb_verify_options;
#define ARB_VERIFY_OPTIONS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_verify_options, reserved)
#define ARB_VERIFY_OPTIONS_INIT {sizeof(arb_verify_options), NULL, NULL, 0, 0}

/* since 1.2: the verification gate's verdict for every kernel of the problem's op on its
 * device type (or the one named), computed now. A failed verdict is not an error: the call
 * returns ARB_OK and the report says "failed". Errors: a NULL argument, a short struct_size,
 * unknown flag bits or a nonzero reserved field, a problem that does not parse (the parser's
 * message) and a kernel name no loaded kernel has are ARB_ERR_INVALID_ARGUMENT. */
ARB_API arb_status arb_verify(arb_context context, const arb_verify_options* options, arb_report* report);

/* since 1.2: told before each problem (done = problems finished, problem = the next one as
 * given) and once at the end (done == total, problem = ""). A non-zero return stops tuning
 * before the next problem: the problem in progress when it was asked for finishes, the report
 * lists the problems finished and says "cancelled": true, and no further call is made. */
typedef int32_t (*arb_tune_progress_fn)(void* user_data, size_t done, size_t total, const char* problem);

/* since 1.2 (the whole struct; ARB_TUNE_OPTIONS_STRUCT_SIZE is the size of this first version) */
typedef struct arb_tune_options {
  size_t struct_size;
  const char* const* problems; /* problem-syntax strings... */
  size_t problem_count;
  const char* suite_path;      /* ...or a shape suite file (format: docs/suite-format.md); exactly one of the two */
  const char* table_path;      /* NULL: the context's own table (table.path; results take effect in its dispatch at
                                  once; without one, reported only); a path: results are written to that file (locked,
                                  merged, atomic, as the CLI does; its valid entries are the incumbents), this
                                  context's dispatch unchanged; "": results are reported, not written */
  arb_tune_progress_fn progress; /* optional */
  void* progress_user_data;
} arb_tune_options;
#define ARB_TUNE_OPTIONS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_tune_options, progress_user_data)
#define ARB_TUNE_OPTIONS_INIT {sizeof(arb_tune_options), NULL, 0, NULL, NULL, NULL, NULL}

/* since 1.2: verifies and times every problem's candidates (what `arbiter tune` does) and keeps
 * the fastest by more than the noise, each winner written as it is known. Errors: a NULL
 * argument, a short struct_size, both or neither of problems and suite_path, problem_count > 0
 * with problems NULL, or a problem that does not parse: ARB_ERR_INVALID_ARGUMENT; a suite that
 * cannot be read: ARB_ERR_CONFIG (a bad problem in it: ARB_ERR_INVALID_ARGUMENT); a table that
 * cannot be read or written, or table_path NULL and the context's table unusable: ARB_ERR_TABLE. */
ARB_API arb_status arb_tune(arb_context context, const arb_tune_options* options, arb_report* report);

/* ---- plans (since 1.3) ----------------------------------------------------------------
 * A problem bound once and run many times, as a decode loop calls the same shapes: the
 * arguments are checked, the kernel chosen (verified, as dispatch chooses) and its workspace
 * sized at arb_plan_create; arb_plan_run takes new data addresses and checks only what can
 * change: that each is present, aligned for its dtype, does not wrap, and that outputs still
 * share no memory with inputs. Addresses less aligned than the plan's (its alignment class,
 * the largest power of two up to 256 dividing its addresses and row strides) are dispatched
 * for their own class, as a call would be. Shapes, strides, dtypes, flags and the
 * scalars (alpha, beta, eps) are the plan's. A plan is used by any number of threads at once
 * and launches only, so its runs can be captured into a CUDA graph. Its kernel is chosen
 * again, at the next run, when the context forgets its choices (a kernel quarantined by a
 * shadow check). A plan must be destroyed before its context. */

/* since 1.3 */
typedef struct arb_plan_s* arb_plan;

/* since 1.3: the most data addresses a run takes. since 1.8: 8 (1.3-1.7: 5) */
#define ARB_PLAN_MAX_TENSORS 8

/* since 1.3: the data of one run. tensors[] holds each tensor's address (DLTensor data +
 * byte_offset) in the order of the op's args struct: gemm a, b, c, bias, d; rmsnorm x,
 * residual, weight, y; softmax x, y; swiglu gate, up, y (since 1.4; a fused gate/up cannot be
 * planned: plan its two halves as views); rope x, positions (since 1.5); attention q, k, v, o
 * (since 1.6); mlp x, norm_weight, gate, up, down, y (since 1.8; up NULL when the plan's gate
 * holds both halves: each run takes up from gate's address, inter rows in, as arb_mlp does).
 * A run reads tensors[0..4], and the slots past them only for an op with more tensors (mlp
 * reads tensors[5]), so a caller built against 1.3-1.7 (struct_size 48, five tensors) runs
 * the plans of every op but mlp as before, and an mlp plan refuses its struct_size
 * (ARB_ERR_INVALID_ARGUMENT). A tensor the plan does not use among those read (no bias,
 * beta = 0, no residual, the slots past the op's last) is NULL. A gemm planned in place (c
 * the same memory as d) takes c == d. ARB_PLAN_OPERANDS_STRUCT_SIZE is the first version's
 * size (five tensors); set struct_size to sizeof. */
typedef struct arb_plan_operands {
  size_t struct_size;
  void* tensors[ARB_PLAN_MAX_TENSORS]; /* tensors[5..7] since 1.8 */
} arb_plan_operands;
#define ARB_PLAN_OPERANDS_STRUCT_SIZE ARB_STRUCT_SIZE(arb_plan_operands, tensors[4])
#define ARB_PLAN_OPERANDS_INIT {sizeof(arb_plan_operands), {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL}}

/* since 1.3: op is an arb_op and args that op's args struct, checked as arb_gemm (...) checks
 * them; their tensors' addresses give the plan's alignment class. Fails as the op's call would
 * (ARB_ERR_UNSUPPORTED when no kernel can run it). On failure *plan is NULL. */
ARB_API arb_status arb_plan_create(arb_context context, int32_t op, const void* args, arb_plan* plan);
/* since 1.3: runs the plan on `operands` (see arb_plan_operands) on `stream` (NULL for CPU
 * tensors). A bad address is ARB_ERR_INVALID_ARGUMENT before any memory is touched. */
ARB_API arb_status arb_plan_run(arb_plan plan, const arb_plan_operands* operands, void* stream);
/* since 1.3: what the plan runs and why (arb_explain's report, headed by the kernel the plan
 * runs now); buffer, capacity and length as arb_explain has them. */
ARB_API arb_status arb_plan_explain(arb_plan plan, char* buffer, size_t capacity, size_t* length);
/* since 1.3: frees the plan. NULL is accepted and ignored. */
ARB_API arb_status arb_plan_destroy(arb_plan plan);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ARBITER_ARBITER_H */
