/* Hostile input to every function of the application C ABI (issue 12): every case is one
 * row of a table, and every bad call must return an error status with a message, write
 * nothing, and not crash. Positive controls (valid calls) prove that the setups are valid,
 * so that each bad case fails for the reason it claims. Plain C11. */
#ifndef ARBITER_C_BAD_INPUT_H
#define ARBITER_C_BAD_INPUT_H

#include <arbiter/arbiter.h>

#include <stddef.h>
#include <stdint.h>

/* What a case expects: ARB_OK (a positive control), an exact arb_status, or any error. */
#define EXPECT_ANY_ERROR (-1)
/* A case whose function returns no status (arb_status_string): only its checks count. */
#define EXPECT_CHECKS (-2)
#define NO_STATUS (-1000)

/* Which op a table case calls; CASE_CUSTOM runs the case's own function. */
enum case_op { CASE_CUSTOM = 0, CASE_GEMM = 1, CASE_RMSNORM = 2, CASE_SOFTMAX = 3 };

/* Buffers in the arena, one region each, guard bytes between them. A tensor's slot in its
 * args struct is named by the same value (RA: gemm_args.a, RX: rmsnorm/softmax x, ...). */
enum region { RA, RB, RC, RBIAS, RD, RX, RRES, RW, RY, NREG };

#define REGION_BYTES 1024u /* room for any operand of the fixtures, padded strides included */
#define GUARD_BYTES 64u

/* One call's world: a context, the args struct, tensors over one arena of real memory. */
typedef struct fx {
  int op;              /* enum case_op */
  arb_context ctx;     /* passed to the call (a case may set it NULL) */
  void* stream;        /* passed to the call */
  const void* args;    /* passed to the call: &g, &r or &s unless a case changes it */
  DLDataType dtype;     /* the element type the inputs are filled in */
  unsigned char* arena;
  unsigned char* before; /* the arena as it was just before the call under test */
  size_t arena_bytes;
  DLTensor t[NREG];
  arb_gemm_args g;
  arb_rmsnorm_args r;
  arb_softmax_args s;
  void* owned[64]; /* shape and stride arrays, each malloc'd at its exact size (ASan sees over-reads) */
  int owned_count;
} fx;

struct bad_case;
typedef void (*breaker)(fx* f, const struct bad_case* c);

/* What a custom case saw: the status of the call under test and arb_last_error() right
 * after it, and the first extra check that failed ("" if none). */
typedef struct outcome {
  int status;
  char message[2048];
  char failed[512];
} outcome;
typedef void (*custom_case)(const struct bad_case* c, outcome* out);

typedef struct bad_case {
  const char* name;
  int op;              /* enum case_op */
  int expect;          /* ARB_OK, an arb_status, EXPECT_ANY_ERROR or EXPECT_CHECKS */
  breaker brk;         /* op cases: turns the valid fixture into this case (NULL: unchanged) */
  custom_case custom;  /* CASE_CUSTOM */
  int which;           /* a region / slot, or a case-specific selector */
  int64_t v1, v2, v3;  /* case parameters */
  const char* text;    /* a case's text: TOML, a problem, a path */
  /* Positive controls of op cases: checks the results after an ARB_OK call; returns 0 or
   * writes why into `why`. */
  int (*check)(const fx* f, const struct bad_case* c, char* why, size_t why_size);
} bad_case;

/* ---- the fixture (fixture.c) ---------------------------------------------------------- */
extern arb_context g_ctx;     /* the default context (embedded configuration) */
extern char g_tmpdir[512];    /* a temporary folder of this run */

void fx_init(fx* f, int op);  /* a valid call of `op` in f32 */
void fx_free(fx* f);
unsigned char* fx_region(fx* f, int region);
/* Sets a tensor: data, dtype, shape and strides (copied into exact-size arrays; strides
 * NULL for compact). */
void fx_tensor(fx* f, int region, void* data, DLDataType dtype, int32_t ndim, const int64_t* shape,
               const int64_t* strides);
/* Replaces a tensor's shape (and strides, NULL for compact), keeping its data and dtype. */
void fx_reshape(fx* f, int region, int32_t ndim, const int64_t* shape, const int64_t* strides);
const DLTensor** fx_slot(fx* f, int region); /* the args field naming this region's tensor */
void fx_set_dtype_all(fx* f, DLDataType dtype); /* every tensor, data refilled for the type */
void fx_fill(fx* f); /* inputs with their values, outputs and guards with sentinels */
arb_status fx_call(fx* f);

extern const DLDataType DT_F32, DT_F16, DT_BF16;

/* Reference checks for positive controls (fixture.c). */
int check_gemm(const fx* f, const bad_case* c, char* why, size_t n);
int check_rmsnorm(const fx* f, const bad_case* c, char* why, size_t n);
int check_softmax(const fx* f, const bad_case* c, char* why, size_t n);

/* Outcome helpers for custom cases. */
void took(outcome* out, int status); /* records status and arb_last_error() */
void failed_check(outcome* out, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- the case tables ---------------------------------------------------------------- */
extern const bad_case gemm_cases[];
extern const size_t gemm_case_count;
extern const bad_case row_cases[]; /* rmsnorm and softmax */
extern const size_t row_case_count;
extern const bad_case context_cases[]; /* context creation, configuration, tuning tables */
extern const size_t context_case_count;
extern const bad_case misc_cases[]; /* explain, introspection, status strings */
extern const size_t misc_case_count;

#endif
