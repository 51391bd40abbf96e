/* arb_gemm. The valid call: A[4,5] . B[5,6] * 1 + 0.5 * C[4,6] + bias[6] -> D[4,6], f32,
 * compact, every operand in its own region of the arena. */
#include "breakers.h"

#include <math.h>
#include <string.h>

#define INVAL ARB_ERR_INVALID_ARGUMENT
#define ANY EXPECT_ANY_ERROR
#define GEMM(name_, expect_, brk_, which_, v1_, v2_, v3_)                                                          \
  {                                                                                                                \
    .name = "gemm: " name_, .op = CASE_GEMM, .expect = (expect_), .brk = (brk_), .which = (which_), .v1 = (v1_), \
    .v2 = (v2_), .v3 = (v3_)                                                                                       \
  }
#define GEMM_OK(name_, brk_) \
  { .name = "gemm ok: " name_, .op = CASE_GEMM, .expect = ARB_OK, .brk = (brk_), .check = check_gemm }

/* ---- positive controls ------------------------------------------------------------ */

static void ok_plain_relu(fx* f, const bad_case* c) {
  (void)c;
  f->g.c = NULL;
  f->g.bias = NULL;
  f->g.beta = 0.0f;
  f->g.activation = ARB_ACT_RELU;
}

/* C is exactly D (beta = 1): the one alias the header allows. D holds C's values first. */
static void ok_c_is_d(fx* f, const bad_case* c) {
  memcpy(fx_region(f, RD), fx_region(f, RC), REGION_BYTES);
  f->g.beta = 1.0f;
  f->g.c = c->which ? &f->t[RC] : &f->t[RD];
  if (c->which) { /* a second descriptor of the same memory, same layout */
    f->t[RC] = f->t[RD];
  }
}

static void ok_transposed(fx* f, const bad_case* c) {
  (void)c;
  fx_reshape(f, RA, 2, (int64_t[]){5, 4}, NULL); /* op(A) = A^T is [4, 5] */
  fx_reshape(f, RB, 2, (int64_t[]){6, 5}, NULL); /* op(B) = B^T is [5, 6] */
  f->g.trans_a = 1;
  f->g.trans_b = 1;
  f->g.activation = ARB_ACT_GELU_ERF;
}

static void ok_padded(fx* f, const bad_case* c) {
  (void)c;
  fx_reshape(f, RA, 2, (int64_t[]){4, 5}, (int64_t[]){8, 1});
  fx_reshape(f, RB, 2, (int64_t[]){5, 6}, (int64_t[]){9, 1});
  fx_reshape(f, RC, 2, (int64_t[]){4, 6}, (int64_t[]){10, 1});
  fx_reshape(f, RD, 2, (int64_t[]){4, 6}, (int64_t[]){7, 1});
  fx_reshape(f, RBIAS, 1, (int64_t[]){6}, (int64_t[]){1});
  f->g.activation = ARB_ACT_SILU;
}

static void ok_negative_zero_beta(fx* f, const bad_case* c) {
  (void)c;
  f->g.beta = -0.0f; /* == 0: C is not read, so it may be NULL */
  f->g.c = NULL;
}

/* ---- overlapping operands -------------------------------------------------------- */

static void alias_c_shifted(fx* f, const bad_case* c) {
  (void)c;
  f->t[RC].data = (float*)fx_region(f, RD) + 1; /* C starts one element into D */
}

static void alias_c_other_stride(fx* f, const bad_case* c) {
  (void)c;
  f->t[RC].data = fx_region(f, RD); /* same first element as D, another row stride */
  fx_reshape(f, RC, 2, (int64_t[]){4, 6}, (int64_t[]){7, 1});
}

static void alias_d_via_byte_offset(fx* f, const bad_case* c) {
  (void)c;
  f->t[RD].data = fx_region(f, RA); /* D's data at A, moved by byte_offset into A's third row */
  f->t[RD].byte_offset = 10 * sizeof(float);
}

static void alias_a_starts_in_d(fx* f, const bad_case* c) {
  (void)c;
  f->t[RA].data = (float*)fx_region(f, RD) + 20; /* A starts in D's last row */
}

static void aliasing_reads_nan_beta(fx* f, const bad_case* c) {
  f->g.beta = c->v1 ? INFINITY : NAN; /* != 0: C is read, and it is NULL */
  f->g.c = NULL;
}

static void near_top(fx* f, const bad_case* c) {
  f->t[c->which].data = (void*)(UINTPTR_MAX - 15); /* aligned, and nothing there */
}

static void gemm_field(fx* f, const bad_case* c) {
  switch (c->which) {
    case 0: f->g.trans_a = (int32_t)c->v1; break;
    case 1: f->g.trans_b = (int32_t)c->v1; break;
    case 2: f->g.activation = (int32_t)c->v1; break;
    default: f->g.reserved = (int32_t)c->v1; break;
  }
}

/* Sizes whose products overflow: each operand consistent with the others, so only the
 * size is wrong. v1: which size (0: m, 1: n, 2: k), v2: its value. */
static void huge_size(fx* f, const bad_case* c) {
  const int64_t m = c->v1 == 0 ? c->v2 : 4, n = c->v1 == 1 ? c->v2 : 6, k = c->v1 == 2 ? c->v2 : 5;
  fx_reshape(f, RA, 2, (int64_t[]){m, k}, NULL);
  fx_reshape(f, RB, 2, (int64_t[]){k, n}, NULL);
  fx_reshape(f, RC, 2, (int64_t[]){m, n}, NULL);
  fx_reshape(f, RD, 2, (int64_t[]){m, n}, NULL);
  fx_reshape(f, RBIAS, 1, (int64_t[]){n}, NULL);
}

static void transposed_a_only_flag(fx* f, const bad_case* c) {
  (void)c;
  f->g.trans_a = 1; /* A is still stored [4, 5]: op(A) = [5, 4], so k = 4 against B's 5 */
}

static void f16_misaligned(fx* f, const bad_case* c) {
  (void)c;
  fx_set_dtype_all(f, DT_F16);
  f->t[RA].data = (unsigned char*)f->t[RA].data + 1;
}

static void mixed_f16_bf16(fx* f, const bad_case* c) {
  (void)c;
  fx_set_dtype_all(f, DT_F16);
  f->t[RB].dtype = DT_BF16;
}

const bad_case gemm_cases[] = {
    /* positive controls: the setups below are valid without their break */
    GEMM_OK("f32 with C (beta 0.5) and bias: the base of every case", NULL),
    GEMM_OK("no C, no bias, relu", ok_plain_relu),
    {.name = "gemm ok: C is exactly D, beta = 1 (the allowed alias)", .op = CASE_GEMM, .expect = ARB_OK,
     .brk = ok_c_is_d, .which = 0, .check = check_gemm},
    {.name = "gemm ok: C and D two descriptors of the same memory and layout", .op = CASE_GEMM, .expect = ARB_OK,
     .brk = ok_c_is_d, .which = 1, .check = check_gemm},
    GEMM_OK("trans_a and trans_b, gelu_erf", ok_transposed),
    GEMM_OK("padded row strides (lda 8, ldb 9, ldc 10, ldd 7), silu", ok_padded),
    {.name = "gemm ok: f16", .op = CASE_GEMM, .expect = ARB_OK, .brk = brk_dtype_all, .v1 = kDLFloat, .v2 = 16,
     .v3 = 1, .check = check_gemm},
    {.name = "gemm ok: bf16", .op = CASE_GEMM, .expect = ARB_OK, .brk = brk_dtype_all, .v1 = kDLBfloat, .v2 = 16,
     .v3 = 1, .check = check_gemm},
    GEMM_OK("struct_size = SIZE_MAX (a newer minor's struct): only known fields read", brk_huge_struct_size),
    GEMM_OK("beta = -0.0 with C NULL (C is read only when beta != 0)", ok_negative_zero_beta),

    /* null pointers */
    GEMM("context NULL", INVAL, brk_ctx_null, 0, 0, 0, 0),
    GEMM("args NULL", INVAL, brk_args_null, 0, 0, 0, 0),
    GEMM("a NULL", INVAL, brk_slot_null, RA, 0, 0, 0),
    GEMM("b NULL", INVAL, brk_slot_null, RB, 0, 0, 0),
    GEMM("d NULL", INVAL, brk_slot_null, RD, 0, 0, 0),
    GEMM("c NULL with beta = 0.5", INVAL, brk_slot_null, RC, 0, 0, 0),
    GEMM("a.data NULL", INVAL, brk_data_null, RA, 0, 0, 0),
    GEMM("b.data NULL", INVAL, brk_data_null, RB, 0, 0, 0),
    GEMM("c.data NULL", INVAL, brk_data_null, RC, 0, 0, 0),
    GEMM("bias.data NULL", INVAL, brk_data_null, RBIAS, 0, 0, 0),
    GEMM("d.data NULL", INVAL, brk_data_null, RD, 0, 0, 0),
    GEMM("a.shape NULL", INVAL, brk_shape_null, RA, 0, 0, 0),
    GEMM("d.shape NULL", INVAL, brk_shape_null, RD, 0, 0, 0),
    GEMM("bias.shape NULL", INVAL, brk_shape_null, RBIAS, 0, 0, 0),
    {.name = "gemm: beta = NaN (!= 0, so C is read) with C NULL", .op = CASE_GEMM, .expect = INVAL,
     .brk = aliasing_reads_nan_beta, .v1 = 0},
    {.name = "gemm: beta = +inf with C NULL", .op = CASE_GEMM, .expect = INVAL, .brk = aliasing_reads_nan_beta,
     .v1 = 1},

    /* struct_size */
    GEMM("struct_size 0", INVAL, brk_struct_size, 0, 0, 0, 0),
    GEMM("struct_size 8 (only struct_size itself)", INVAL, brk_struct_size, 0, 8, 0, 0),
    GEMM("struct_size ARB_GEMM_ARGS_STRUCT_SIZE - 1", INVAL, brk_struct_size, 0, ARB_GEMM_ARGS_STRUCT_SIZE - 1, 0, 0),

    /* dtypes */
    GEMM("a int32", INVAL, brk_dtype, RA, kDLInt, 32, 1),
    GEMM("a uint8", INVAL, brk_dtype, RA, kDLUInt, 8, 1),
    GEMM("a float64", INVAL, brk_dtype, RA, kDLFloat, 64, 1),
    GEMM("a float8", INVAL, brk_dtype, RA, kDLFloat, 8, 1),
    GEMM("a bfloat with 32 bits", INVAL, brk_dtype, RA, kDLBfloat, 32, 1),
    GEMM("a complex64", INVAL, brk_dtype, RA, kDLComplex, 64, 1),
    GEMM("a float with 0 bits", INVAL, brk_dtype, RA, kDLFloat, 0, 1),
    GEMM("a float with 17 bits", INVAL, brk_dtype, RA, kDLFloat, 17, 1),
    GEMM("a f32 with 4 lanes", INVAL, brk_dtype, RA, kDLFloat, 32, 4),
    GEMM("a f32 with 0 lanes", INVAL, brk_dtype, RA, kDLFloat, 32, 0),
    GEMM("a f32 with 65535 lanes", INVAL, brk_dtype, RA, kDLFloat, 32, 65535),
    GEMM("d type code 255", INVAL, brk_dtype, RD, 255, 32, 1),
    GEMM("b f16, a f32", INVAL, brk_dtype, RB, kDLFloat, 16, 1),
    GEMM("d bf16, a f32", INVAL, brk_dtype, RD, kDLBfloat, 16, 1),
    GEMM("c f16, a f32", INVAL, brk_dtype, RC, kDLFloat, 16, 1),
    GEMM("bias bf16, a f32", INVAL, brk_dtype, RBIAS, kDLBfloat, 16, 1),
    {.name = "gemm: all f16 but b bf16", .op = CASE_GEMM, .expect = INVAL, .brk = mixed_f16_bf16},

    /* ndim */
    GEMM("a ndim -1", INVAL, brk_ndim, RA, -1, 0, 0),
    GEMM("a ndim 0", INVAL, brk_ndim, RA, 0, 0, 0),
    GEMM("a ndim INT32_MIN", INVAL, brk_ndim, RA, INT32_MIN, 0, 0),
    GEMM("a ndim INT32_MAX (shape has 2 elements)", INVAL, brk_ndim, RA, INT32_MAX, 0, 0),
    GEMM("a 1-D [20]", INVAL, brk_shape1, RA, 20, 0, 0),
    GEMM("a 3-D [1, 4, 5] (batched: 2-D only today)", ANY, brk_leading_ones, RA, 3, 0, 0),
    GEMM("a 17-D [1, ..., 1, 4, 5]", ANY, brk_leading_ones, RA, 17, 0, 0),
    GEMM("d 1-D [24]", INVAL, brk_shape1, RD, 24, 0, 0),
    GEMM("bias 2-D [1, 6]", INVAL, brk_shape2, RBIAS, 1, 6, 0),
    GEMM("bias 0-D", INVAL, brk_ndim, RBIAS, 0, 0, 0),

    /* shapes */
    GEMM("a [0, 5] (m = 0)", INVAL, brk_shape2, RA, 0, 5, 0),
    GEMM("a [-1, 5]", INVAL, brk_shape2, RA, -1, 5, 0),
    GEMM("a [4, INT64_MIN]", INVAL, brk_shape2, RA, 4, INT64_MIN, 0),
    GEMM("b [5, 0] (n = 0)", INVAL, brk_shape2, RB, 5, 0, 0),
    GEMM("b [4, 6]: k mismatch (A has k = 5)", INVAL, brk_shape2, RB, 4, 6, 0),
    GEMM("d [6, 4]: transposed output", INVAL, brk_shape2, RD, 6, 4, 0),
    GEMM("d [4, 7]", INVAL, brk_shape2, RD, 4, 7, 0),
    GEMM("c [4, 5]", INVAL, brk_shape2, RC, 4, 5, 0),
    GEMM("bias [5] (n = 6)", INVAL, brk_shape1, RBIAS, 5, 0, 0),
    GEMM("bias [7] (n = 6)", INVAL, brk_shape1, RBIAS, 7, 0, 0),
    {.name = "gemm: trans_a = 1 on A stored [4, 5]: k = 4 against B's 5", .op = CASE_GEMM, .expect = INVAL,
     .brk = transposed_a_only_flag},
    GEMM("m = INT64_MAX (every operand consistent)", INVAL, huge_size, 0, 0, INT64_MAX, 0),
    GEMM("m = 2^61: m * k * 4 bytes overflows", INVAL, huge_size, 0, 0, INT64_C(1) << 61, 0),
    GEMM("n = 2^62: n * 4 bytes overflows", INVAL, huge_size, 0, 1, INT64_C(1) << 62, 0),
    GEMM("k = 2^61", INVAL, huge_size, 0, 2, INT64_C(1) << 61, 0),

    /* strides */
    GEMM("a row stride INT64_MAX", INVAL, brk_strides2, RA, INT64_MAX, 1, 0),
    GEMM("a row stride INT64_MIN", INVAL, brk_strides2, RA, INT64_MIN, 1, 0),
    GEMM("a row stride -5", INVAL, brk_strides2, RA, -5, 1, 0),
    GEMM("a row stride 4 < row length 5 (rows overlap)", INVAL, brk_strides2, RA, 4, 1, 0),
    GEMM("a last stride 0", INVAL, brk_strides2, RA, 5, 0, 0),
    GEMM("a last stride 2", INVAL, brk_strides2, RA, 10, 2, 0),
    GEMM("a last stride -1", INVAL, brk_strides2, RA, 5, -1, 0),
    GEMM("d column-major strides {1, 4}", INVAL, brk_strides2, RD, 1, 4, 0),
    GEMM("d row stride 2^61: rows * stride * 4 bytes overflows", INVAL, brk_strides2, RD, INT64_C(1) << 61, 1, 0),

    /* addresses */
    GEMM("a byte_offset UINT64_MAX", INVAL, brk_byte_offset, RA, -1, 0, 0),
    GEMM("a byte_offset wraps the address (UINT64_MAX - 8)", INVAL, brk_byte_offset, RA, -9, 0, 0),
    GEMM("d data + byte_offset wraps to exactly 0", INVAL, brk_wrap_to_zero, RD, 0, 0, 0),
    GEMM("d byte_offset 2 (f32 misaligned)", INVAL, brk_byte_offset, RD, 2, 0, 0),
    {.name = "gemm: a 16 bytes below the top of the address space: its 80 bytes wrap", .op = CASE_GEMM,
     .expect = INVAL, .brk = near_top, .which = RA},
    GEMM("a data + 1 byte (f32 misaligned)", INVAL, brk_misalign, RA, 1, 0, 0),
    GEMM("b data + 2 bytes", INVAL, brk_misalign, RB, 2, 0, 0),
    GEMM("c data + 3 bytes", INVAL, brk_misalign, RC, 3, 0, 0),
    GEMM("bias byte_offset 1", INVAL, brk_byte_offset, RBIAS, 1, 0, 0),
    {.name = "gemm: f16, a at an odd address", .op = CASE_GEMM, .expect = INVAL, .brk = f16_misaligned},

    /* devices */
    GEMM("a on cuda:0, the others on the cpu", INVAL, brk_device, RA, kDLCUDA, 0, 0),
    GEMM("d on cuda:0", INVAL, brk_device, RD, kDLCUDA, 0, 0),
    GEMM("c on cuda:0", INVAL, brk_device, RC, kDLCUDA, 0, 0),
    GEMM("bias on cpu:1, the others cpu:0", INVAL, brk_device, RBIAS, kDLCPU, 1, 0),
    GEMM("b device type 99 (no such DLDeviceType)", INVAL, brk_device, RB, 99, 0, 0),
    GEMM("a device id INT32_MAX, the others 0", INVAL, brk_device, RA, kDLCPU, INT32_MAX, 0),
    GEMM("all operands device type 99", ANY, brk_device, ALL_TENSORS, 99, 0, 0),
    GEMM("all operands device type -1", ANY, brk_device, ALL_TENSORS, -1, 0, 0),
    GEMM("all operands device type INT32_MIN", ANY, brk_device, ALL_TENSORS, INT32_MIN, 0, 0),
    GEMM("all operands kDLCUDAHost (pinned host memory is not a cpu tensor)", ANY, brk_device, ALL_TENSORS,
         kDLCUDAHost, 0, 0),
    GEMM("all operands cpu with device id -1", ANY, brk_device, ALL_TENSORS, kDLCPU, -1, 0),
    GEMM("all operands cpu with device id INT32_MIN", ANY, brk_device, ALL_TENSORS, kDLCPU, INT32_MIN, 0),
    GEMM("cpu tensors with a non-NULL stream (documented: NULL for cpu)", ANY, brk_stream, 0, 0x1000, 0, 0),

    /* enum and reserved fields */
    GEMM("trans_a 2", ANY, gemm_field, 0, 2, 0, 0),
    GEMM("trans_a -1", ANY, gemm_field, 0, -1, 0, 0),
    GEMM("trans_b INT32_MIN", ANY, gemm_field, 1, INT32_MIN, 0, 0),
    GEMM("activation -1", ANY, gemm_field, 2, -1, 0, 0),
    GEMM("activation ARB_ACT_SILU + 1", ANY, gemm_field, 2, ARB_ACT_SILU + 1, 0, 0),
    GEMM("activation INT32_MAX", ANY, gemm_field, 2, INT32_MAX, 0, 0),
    GEMM("reserved 1", ANY, gemm_field, 3, 1, 0, 0),
    GEMM("reserved INT32_MIN", ANY, gemm_field, 3, INT32_MIN, 0, 0),

    /* an output sharing memory with an input (C = D exactly is the positive control above) */
    GEMM("D on A's memory", INVAL, brk_data_in, RD, RA, 0, 0),
    GEMM("D on B's memory", INVAL, brk_data_in, RD, RB, 0, 0),
    GEMM("D starts inside A (A's third row)", INVAL, brk_data_in, RD, RA, 10, 0),
    GEMM("D starts inside B's last row", INVAL, brk_data_in, RD, RB, 26, 0),
    {.name = "gemm: A starts inside D's last row", .op = CASE_GEMM, .expect = INVAL, .brk = alias_a_starts_in_d},
    {.name = "gemm: D over A through byte_offset", .op = CASE_GEMM, .expect = INVAL, .brk = alias_d_via_byte_offset},
    GEMM("bias inside D's last row", INVAL, brk_data_in, RBIAS, RD, 18, 0),
    GEMM("bias straddles the end of D", INVAL, brk_data_in, RBIAS, RD, 22, 0),
    {.name = "gemm: C starts one element into D", .op = CASE_GEMM, .expect = INVAL, .brk = alias_c_shifted},
    {.name = "gemm: C at D's address with another row stride", .op = CASE_GEMM, .expect = INVAL,
     .brk = alias_c_other_stride},
};
const size_t gemm_case_count = sizeof gemm_cases / sizeof gemm_cases[0];
