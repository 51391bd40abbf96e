/* arbiter: types shared by the application ABI (arbiter.h) and the plugin ABI (plugin.h).
 *
 * Everything here is plain C. Enumerations name values; what crosses the boundary from a
 * caller is an int32_t (a struct field or parameter), so that its size never depends on the
 * compiler and an out-of-range value is an error to report, not undefined behaviour. New
 * values are only ever appended. (Functions return arb_status, which they produce.)
 *
 * Versioned structs (docs/abi-rules.md, rule 2), in the discipline of OpenXLA's PJRT C API:
 *  - every struct starts with size_t struct_size, set by its producer to sizeof as it was
 *    compiled, and only grows at the end;
 *  - beside every struct, ARB_<NAME>_STRUCT_SIZE = ARB_STRUCT_SIZE(type, last field of 1.0)
 *    is the size of its version 1.0, the least a producer must provide: libarbiter refuses
 *    a shorter struct_size. It never changes when fields are appended (set struct_size to
 *    sizeof, not to this constant);
 *  - a field without a note is part of version 1.0 and is covered by that constant;
 *  - a field that lies beyond the constant carries a note: `optional, since 1.0` for the
 *    optional fields 1.0 already had, and `since 1.N` for every field appended in minor N
 *    from now on (the next one: a comment `since 1.1`). Read such a field only where
 *    ARB_HAS_FIELD says the producer's struct has it. Functions and enumeration values
 *    added after 1.0 carry the same `since 1.N` note. */
#ifndef ARBITER_TYPES_H
#define ARBITER_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The size of `type` up to and including `field`: offsetof(type, field) + sizeof(field).
 * With the last field of version 1.0 it gives the ARB_*_STRUCT_SIZE constants. */
#define ARB_STRUCT_SIZE(type, field) (offsetof(type, field) + sizeof(((const type*)0)->field))

/* True when a versioned struct, as its producer sized it, contains `field`. Use it before
 * reading any field beyond the struct's ARB_*_STRUCT_SIZE (a field noted `optional` or
 * `since 1.N`). */
#define ARB_HAS_FIELD(type, ptr, field) ((ptr)->struct_size >= ARB_STRUCT_SIZE(type, field))

/* Status codes returned by every function of both ABIs. 0 is success. */
typedef enum arb_status {
  ARB_OK = 0,
  ARB_ERR_INVALID_ARGUMENT = 1, /* null pointer, wrong dtype, mismatched shapes, bad strides */
  ARB_ERR_UNSUPPORTED = 2,      /* valid request, but no enabled kernel supports it */
  ARB_ERR_CONFIG = 3,           /* configuration could not be read or is invalid */
  ARB_ERR_PLUGIN = 4,           /* a plugin could not be loaded or misbehaved */
  ARB_ERR_KERNEL = 5,           /* a kernel reported a failure while running */
  ARB_ERR_OUT_OF_MEMORY = 6,
  ARB_ERR_VERSION = 7,          /* ABI version mismatch */
  ARB_ERR_BUFFER_TOO_SMALL = 8, /* caller's output buffer is too small; the size needed is reported */
  ARB_ERR_INTERNAL = 9,
  ARB_ERR_TABLE = 10            /* the tuning table could not be read, written or used */
} arb_status;

/* Element types. Every floating-point operand of one call has the same type (rope's positions
 * are int32); math is done in f32 or wider. */
typedef enum arb_dtype {
  ARB_DTYPE_INVALID = 0,
  ARB_DTYPE_F32 = 1,
  ARB_DTYPE_F16 = 2,
  ARB_DTYPE_BF16 = 3
} arb_dtype;

typedef enum arb_op {
  ARB_OP_INVALID = 0,
  ARB_OP_GEMM = 1,
  ARB_OP_RMSNORM = 2,
  ARB_OP_SOFTMAX = 3,
  ARB_OP_SWIGLU = 4, /* since 1.4 of the application ABI, 1.1 of the plugin ABI */
  ARB_OP_ROPE = 5,   /* since 1.5 of the application ABI, 1.2 of the plugin ABI */
  ARB_OP_ATTENTION = 6, /* since 1.6 of the application ABI, 1.3 of the plugin ABI */
  ARB_OP_MLP = 7,       /* since 1.7 of the application ABI, 1.4 of the plugin ABI */
  ARB_OP_QKV = 8        /* since 1.8 of the application ABI, 1.5 of the plugin ABI */
} arb_op;

/* since 1.5 (application ABI), 1.2 (plugin ABI): which elements of a head rope rotates
 * together. SPLIT_HALF pairs element i with element i + head_dim / 2 (Hugging Face's
 * rotate_half, GPT-NeoX); INTERLEAVED pairs elements 2i and 2i + 1 (Meta's Llama
 * reference, GPT-J). */
typedef enum arb_rope_layout {
  ARB_ROPE_SPLIT_HALF = 0,
  ARB_ROPE_INTERLEAVED = 1
} arb_rope_layout;

/* GEMM epilogue activation, applied after the bias. */
typedef enum arb_activation {
  ARB_ACT_NONE = 0,
  ARB_ACT_RELU = 1,
  ARB_ACT_GELU_TANH = 2, /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
  ARB_ACT_GELU_ERF = 3,  /* 0.5x(1 + erf(x / sqrt(2))) */
  ARB_ACT_SILU = 4       /* x * sigmoid(x) */
} arb_activation;

/* Where a kernel comes from; shown to users and used by the verification gate. */
typedef enum arb_provenance {
  ARB_PROVENANCE_UNSPECIFIED = 0, /* for a kernel: same as its plugin */
  ARB_PROVENANCE_REFERENCE = 1,
  ARB_PROVENANCE_VENDOR = 2,
  ARB_PROVENANCE_HAND_TUNED = 3,
  ARB_PROVENANCE_AI_GENERATED = 4
} arb_provenance;

/* Kernel flags: a bit set, arb_kernel.flags (plugin.h) and arb_kernel_info.flags
 * (arbiter.h). Bits are only ever appended. */
#define ARB_KERNEL_FLAG_NONDETERMINISTIC 0x1u /* reruns may differ in the last bits */
/* f32 problems computed with TF32 tensor-core math (10-bit mantissa products): a declared
 * loss of precision. Such a kernel is admitted only with verify.allow_tf32, and verified
 * against a TF32 tolerance. */
#define ARB_KERNEL_FLAG_TF32 0x2u

typedef enum arb_log_level {
  ARB_LOG_TRACE = 0,
  ARB_LOG_DEBUG = 1,
  ARB_LOG_INFO = 2,
  ARB_LOG_WARN = 3,
  ARB_LOG_ERROR = 4,
  ARB_LOG_OFF = 5
} arb_log_level;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ARBITER_TYPES_H */
