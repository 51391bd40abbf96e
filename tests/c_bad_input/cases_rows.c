/* arb_rmsnorm and arb_softmax. The valid calls: rmsnorm of x[3,5] with residual[3,5] and
 * weight[5] into y[3,5]; softmax of x[3,5] into y[3,5]; f32, compact, a region each. */
#include "breakers.h"

#include <math.h>
#include <string.h>

#define INVAL ARB_ERR_INVALID_ARGUMENT
#define ANY EXPECT_ANY_ERROR
#define RMS(name_, expect_, brk_, which_, v1_, v2_, v3_)                                                            \
  {                                                                                                                 \
    .name = "rmsnorm: " name_, .op = CASE_RMSNORM, .expect = (expect_), .brk = (brk_), .which = (which_),          \
    .v1 = (v1_), .v2 = (v2_), .v3 = (v3_)                                                                           \
  }
#define RMS_OK(name_, brk_, which_, v1_, v2_, v3_)                                                                 \
  {                                                                                                                \
    .name = "rmsnorm ok: " name_, .op = CASE_RMSNORM, .expect = ARB_OK, .brk = (brk_), .which = (which_),       \
    .v1 = (v1_), .v2 = (v2_), .v3 = (v3_), .check = check_rmsnorm                                                  \
  }
#define SMX(name_, expect_, brk_, which_, v1_, v2_, v3_)                                                            \
  {                                                                                                                 \
    .name = "softmax: " name_, .op = CASE_SOFTMAX, .expect = (expect_), .brk = (brk_), .which = (which_),          \
    .v1 = (v1_), .v2 = (v2_), .v3 = (v3_)                                                                           \
  }
#define SMX_OK(name_, brk_, which_, v1_, v2_, v3_)                                                                 \
  {                                                                                                                \
    .name = "softmax ok: " name_, .op = CASE_SOFTMAX, .expect = ARB_OK, .brk = (brk_), .which = (which_),       \
    .v1 = (v1_), .v2 = (v2_), .v3 = (v3_), .check = check_softmax                                                  \
  }

/* x, y (and the residual for rmsnorm) all get one shape: `which` dimensions [v1, v2, v3]
 * (the last `which` of them); the weight follows the last dimension when it is >= 1. */
static void rows_shape_all(fx* f, const bad_case* c) {
  const int64_t dims[3] = {c->v1, c->v2, c->v3};
  const int32_t ndim = (int32_t)c->which;
  const int64_t* shape = dims + (3 - ndim);
  fx_reshape(f, RX, ndim, shape, NULL);
  fx_reshape(f, RY, ndim, shape, NULL);
  if (f->op == CASE_RMSNORM) {
    fx_reshape(f, RRES, ndim, shape, NULL);
    if (ndim > 0 && shape[ndim - 1] >= 1) fx_reshape(f, RW, 1, (int64_t[]){shape[ndim - 1]}, NULL);
  }
}

/* x, y and the residual: v1 dimensions, leading 1s then [3, 5]. */
static void rows_leading_ones(fx* f, const bad_case* c) {
  const int regions[3] = {RX, RY, RRES};
  for (int i = 0; i < (f->op == CASE_RMSNORM ? 3 : 2); ++i) {
    bad_case one = *c;
    one.which = regions[i];
    brk_leading_ones(f, &one);
  }
}

static void rms_no_residual(fx* f, const bad_case* c) {
  (void)c;
  f->r.residual = NULL;
}

/* Without a residual x is only read: the weight may be x's own first row. */
static void rms_weight_in_x(fx* f, const bad_case* c) {
  (void)c;
  f->r.residual = NULL;
  f->t[RW].data = fx_region(f, RX);
}

static void rows_padded(fx* f, const bad_case* c) {
  (void)c;
  fx_reshape(f, RX, 2, (int64_t[]){3, 5}, (int64_t[]){8, 1});
  fx_reshape(f, RY, 2, (int64_t[]){3, 5}, (int64_t[]){7, 1});
  if (f->op == CASE_RMSNORM) {
    fx_reshape(f, RRES, 2, (int64_t[]){3, 5}, (int64_t[]){6, 1});
    fx_reshape(f, RW, 1, (int64_t[]){5}, (int64_t[]){1});
  }
}

static void rms_eps(fx* f, const bad_case* c) { f->r.eps = c->v1 == 0 ? 0.0f : c->v1 == 1 ? NAN : c->v1 == 2 ? -1.0f : -INFINITY; }

static void rms_reserved(fx* f, const bad_case* c) {
  f->r.reserved = (int32_t)c->v1;
  if (c->v2 != 0) f->r.struct_size = (size_t)c->v2;
}

/* Leading dimensions that do not collapse into one row stride: [3, 2, 5] with strides
 * {20, 6, 1} for x (y and the residual compact [3, 2, 5]). */
static void rows_not_collapsible(fx* f, const bad_case* c) {
  (void)c;
  fx_reshape(f, RX, 3, (int64_t[]){3, 2, 5}, (int64_t[]){20, 6, 1});
  fx_reshape(f, RY, 3, (int64_t[]){3, 2, 5}, NULL);
  if (f->op == CASE_RMSNORM) fx_reshape(f, RRES, 3, (int64_t[]){3, 2, 5}, NULL);
}

static void rms_residual_is_x(fx* f, const bad_case* c) {
  (void)c;
  f->r.residual = &f->t[RX]; /* x += x, written in place over its own input */
}

static void rms_y_is_x(fx* f, const bad_case* c) {
  (void)c;
  f->r.y = &f->t[RX];
}

static void smx_y_is_x(fx* f, const bad_case* c) {
  (void)c;
  f->s.y = &f->t[RX];
}

const bad_case row_cases[] = {
    /* ---- rmsnorm: positive controls ---- */
    RMS_OK("with a residual (x += residual written back): the base of every case", NULL, 0, 0, 0, 0),
    RMS_OK("without a residual", rms_no_residual, 0, 0, 0, 0),
    RMS_OK("no residual, the weight is x's first row (inputs may share memory)", rms_weight_in_x, 0, 0, 0, 0),
    RMS_OK("3-D [3, 1, 5]", rows_shape_all, 3, 3, 1, 5),
    RMS_OK("padded row strides (x 8, residual 6, y 7)", rows_padded, 0, 0, 0, 0),
    RMS_OK("f16", brk_dtype_all, 0, kDLFloat, 16, 1),
    RMS_OK("bf16", brk_dtype_all, 0, kDLBfloat, 16, 1),
    RMS_OK("eps = 0", rms_eps, 0, 0, 0, 0),
    RMS_OK("struct_size = SIZE_MAX (a newer minor's struct)", brk_huge_struct_size, 0, 0, 0, 0),
    RMS_OK("reserved = 7 beyond struct_size = ARB_RMSNORM_ARGS_STRUCT_SIZE is not read", rms_reserved, 0, 7,
           ARB_RMSNORM_ARGS_STRUCT_SIZE, 0),

    /* ---- rmsnorm: bad input ---- */
    RMS("context NULL", INVAL, brk_ctx_null, 0, 0, 0, 0),
    RMS("args NULL", INVAL, brk_args_null, 0, 0, 0, 0),
    RMS("x NULL", INVAL, brk_slot_null, RX, 0, 0, 0),
    RMS("weight NULL", INVAL, brk_slot_null, RW, 0, 0, 0),
    RMS("y NULL", INVAL, brk_slot_null, RY, 0, 0, 0),
    RMS("x.data NULL", INVAL, brk_data_null, RX, 0, 0, 0),
    RMS("residual.data NULL", INVAL, brk_data_null, RRES, 0, 0, 0),
    RMS("weight.data NULL", INVAL, brk_data_null, RW, 0, 0, 0),
    RMS("y.data NULL", INVAL, brk_data_null, RY, 0, 0, 0),
    RMS("x.shape NULL", INVAL, brk_shape_null, RX, 0, 0, 0),
    RMS("residual.shape NULL", INVAL, brk_shape_null, RRES, 0, 0, 0),
    RMS("weight.shape NULL", INVAL, brk_shape_null, RW, 0, 0, 0),
    RMS("struct_size 0", INVAL, brk_struct_size, 0, 0, 0, 0),
    RMS("struct_size ARB_RMSNORM_ARGS_STRUCT_SIZE - 1", INVAL, brk_struct_size, 0, ARB_RMSNORM_ARGS_STRUCT_SIZE - 1,
        0, 0),
    RMS("x int8", INVAL, brk_dtype, RX, kDLInt, 8, 1),
    RMS("weight float64", INVAL, brk_dtype, RW, kDLFloat, 64, 1),
    RMS("y f16, x f32", INVAL, brk_dtype, RY, kDLFloat, 16, 1),
    RMS("residual bf16, x f32", INVAL, brk_dtype, RRES, kDLBfloat, 16, 1),
    RMS("weight f32 with 2 lanes", INVAL, brk_dtype, RW, kDLFloat, 32, 2),
    RMS("x, y, residual 0-D", INVAL, rows_shape_all, 0, 0, 0, 0),
    RMS("x ndim -1", INVAL, brk_ndim, RX, -1, 0, 0),
    RMS("x, y, residual 17-D [1, ..., 1, 3, 5]", ANY, rows_leading_ones, 0, 17, 0, 0),
    RMS("weight 2-D [1, 5]", INVAL, brk_shape2, RW, 1, 5, 0),
    RMS("weight [4] (x has 5 columns)", INVAL, brk_shape1, RW, 4, 0, 0),
    RMS("weight [6]", INVAL, brk_shape1, RW, 6, 0, 0),
    RMS("y [5, 3]", INVAL, brk_shape2, RY, 5, 3, 0),
    RMS("y [3, 4]", INVAL, brk_shape2, RY, 3, 4, 0),
    RMS("residual [3, 4]", INVAL, brk_shape2, RRES, 3, 4, 0),
    RMS("residual [2, 5]", INVAL, brk_shape2, RRES, 2, 5, 0),
    RMS("x, y, residual [0, 5]", INVAL, rows_shape_all, 2, 0, 0, 5),
    RMS("x, y, residual [3, 0] (weight [5])", INVAL, rows_shape_all, 2, 0, 3, 0),
    RMS("x, y, residual, weight with cols = INT64_MAX", INVAL, rows_shape_all, 2, 0, 3, INT64_MAX),
    RMS("x, y, residual [2^40, 2^40, 5]: rows overflow", INVAL, rows_shape_all, 3, INT64_C(1) << 40,
        INT64_C(1) << 40, 5),
    RMS("x row stride INT64_MAX", INVAL, brk_strides2, RX, INT64_MAX, 1, 0),
    RMS("x row stride 4 < 5 columns", INVAL, brk_strides2, RX, 4, 1, 0),
    RMS("y last stride 0", INVAL, brk_strides2, RY, 5, 0, 0),
    RMS("x leading dimensions that do not collapse into rows", INVAL, rows_not_collapsible, 0, 0, 0, 0),
    RMS("x data + 2 bytes", INVAL, brk_misalign, RX, 2, 0, 0),
    RMS("weight byte_offset 1", INVAL, brk_byte_offset, RW, 1, 0, 0),
    RMS("y byte_offset wraps the address", INVAL, brk_byte_offset, RY, -4, 0, 0),
    RMS("residual data + byte_offset wraps to exactly 0", INVAL, brk_wrap_to_zero, RRES, 0, 0, 0),
    RMS("weight on cuda:0", INVAL, brk_device, RW, kDLCUDA, 0, 0),
    RMS("residual on cpu:1", INVAL, brk_device, RRES, kDLCPU, 1, 0),
    RMS("all operands device type 99", ANY, brk_device, ALL_TENSORS, 99, 0, 0),
    RMS("eps NaN", ANY, rms_eps, 0, 1, 0, 0),
    RMS("eps -1", ANY, rms_eps, 0, 2, 0, 0),
    RMS("eps -inf", ANY, rms_eps, 0, 3, 0, 0),
    RMS("reserved 1", ANY, rms_reserved, 0, 1, 0, 0),
    RMS("cpu tensors with a non-NULL stream", ANY, brk_stream, 0, 0x1000, 0, 0),
    {.name = "rmsnorm: y is x", .op = CASE_RMSNORM, .expect = INVAL, .brk = rms_y_is_x},
    RMS("y one row into x", INVAL, brk_data_in, RY, RX, 5, 0),
    RMS("y over the weight", INVAL, brk_data_in, RY, RW, 0, 0),
    RMS("weight inside y's last row", INVAL, brk_data_in, RW, RY, 10, 0),
    RMS("y over the residual", INVAL, brk_data_in, RY, RRES, 0, 0),
    {.name = "rmsnorm: residual is x (x is written)", .op = CASE_RMSNORM, .expect = INVAL, .brk = rms_residual_is_x},
    RMS("residual three elements into x", INVAL, brk_data_in, RRES, RX, 3, 0),
    RMS("weight inside x with a residual (x is written)", INVAL, brk_data_in, RW, RX, 5, 0),

    /* ---- softmax: positive controls ---- */
    SMX_OK("f32 [3, 5]: the base of every case", NULL, 0, 0, 0, 0),
    SMX_OK("1-D [5]", rows_shape_all, 1, 0, 0, 5),
    SMX_OK("3-D [3, 1, 5]", rows_shape_all, 3, 3, 1, 5),
    SMX_OK("padded row strides (x 8, y 7)", rows_padded, 0, 0, 0, 0),
    SMX_OK("f16", brk_dtype_all, 0, kDLFloat, 16, 1),
    SMX_OK("bf16", brk_dtype_all, 0, kDLBfloat, 16, 1),
    SMX_OK("struct_size = SIZE_MAX (a newer minor's struct)", brk_huge_struct_size, 0, 0, 0, 0),

    /* ---- softmax: bad input ---- */
    SMX("context NULL", INVAL, brk_ctx_null, 0, 0, 0, 0),
    SMX("args NULL", INVAL, brk_args_null, 0, 0, 0, 0),
    SMX("x NULL", INVAL, brk_slot_null, RX, 0, 0, 0),
    SMX("y NULL", INVAL, brk_slot_null, RY, 0, 0, 0),
    SMX("x.data NULL", INVAL, brk_data_null, RX, 0, 0, 0),
    SMX("y.data NULL", INVAL, brk_data_null, RY, 0, 0, 0),
    SMX("x.shape NULL", INVAL, brk_shape_null, RX, 0, 0, 0),
    SMX("y.shape NULL", INVAL, brk_shape_null, RY, 0, 0, 0),
    SMX("struct_size 0", INVAL, brk_struct_size, 0, 0, 0, 0),
    SMX("struct_size 8", INVAL, brk_struct_size, 0, 8, 0, 0),
    SMX("struct_size ARB_SOFTMAX_ARGS_STRUCT_SIZE - 1", INVAL, brk_struct_size, 0, ARB_SOFTMAX_ARGS_STRUCT_SIZE - 1,
        0, 0),
    SMX("x float64", INVAL, brk_dtype, RX, kDLFloat, 64, 1),
    SMX("x uint16", INVAL, brk_dtype, RX, kDLUInt, 16, 1),
    SMX("y bf16, x f32", INVAL, brk_dtype, RY, kDLBfloat, 16, 1),
    SMX("x f32 with 2 lanes", INVAL, brk_dtype, RX, kDLFloat, 32, 2),
    SMX("x and y 0-D", INVAL, rows_shape_all, 0, 0, 0, 0),
    SMX("x ndim -1", INVAL, brk_ndim, RX, -1, 0, 0),
    SMX("x ndim INT32_MAX", INVAL, brk_ndim, RX, INT32_MAX, 0, 0),
    SMX("x and y 17-D [1, ..., 1, 3, 5]", ANY, rows_leading_ones, 0, 17, 0, 0),
    SMX("y [5, 3]", INVAL, brk_shape2, RY, 5, 3, 0),
    SMX("y [3, 6]", INVAL, brk_shape2, RY, 3, 6, 0),
    SMX("x and y [3, 0]", INVAL, rows_shape_all, 2, 0, 3, 0),
    SMX("x and y [-1, 5]", INVAL, rows_shape_all, 2, 0, -1, 5),
    SMX("x and y [INT64_MAX, 5]", INVAL, rows_shape_all, 2, 0, INT64_MAX, 5),
    SMX("x and y [2^40, 2^40, 5]: rows overflow", INVAL, rows_shape_all, 3, INT64_C(1) << 40, INT64_C(1) << 40, 5),
    SMX("x row stride -5", INVAL, brk_strides2, RX, -5, 1, 0),
    SMX("x last stride 0", INVAL, brk_strides2, RX, 5, 0, 0),
    SMX("y row stride 2^62", INVAL, brk_strides2, RY, INT64_C(1) << 62, 1, 0),
    SMX("x leading dimensions that do not collapse into rows", INVAL, rows_not_collapsible, 0, 0, 0, 0),
    SMX("y data + 2 bytes", INVAL, brk_misalign, RY, 2, 0, 0),
    SMX("x byte_offset UINT64_MAX", INVAL, brk_byte_offset, RX, -1, 0, 0),
    SMX("x on cuda:0, y on the cpu", INVAL, brk_device, RX, kDLCUDA, 0, 0),
    SMX("y on cpu:1", INVAL, brk_device, RY, kDLCPU, 1, 0),
    SMX("x and y device type 99", ANY, brk_device, ALL_TENSORS, 99, 0, 0),
    SMX("cpu tensors with a non-NULL stream", ANY, brk_stream, 0, 0x1000, 0, 0),
    {.name = "softmax: y is x", .op = CASE_SOFTMAX, .expect = INVAL, .brk = smx_y_is_x},
    SMX("y one row into x", INVAL, brk_data_in, RY, RX, 5, 0),
    SMX("y one element into x", INVAL, brk_data_in, RY, RX, 1, 0),
    SMX("x starts in y's last row", INVAL, brk_data_in, RX, RY, 12, 0),
};
const size_t row_case_count = sizeof row_cases / sizeof row_cases[0];
