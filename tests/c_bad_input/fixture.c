/* The fixture: valid calls of gemm, rmsnorm and softmax over one arena of real memory, and
 * fp64 reference checks of their results for the positive controls. */
#include "c_bad_input.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const DLDataType DT_F32 = {kDLFloat, 32, 1};
const DLDataType DT_F16 = {kDLFloat, 16, 1};
const DLDataType DT_BF16 = {kDLBfloat, 16, 1};

#define SENTINEL_OUTPUT 0xA5u
#define SENTINEL_GUARD 0x5Au

static int is_output_region(int region) { return region == RD || region == RY; }

unsigned char* fx_region(fx* f, int region) {
  return f->arena + GUARD_BYTES + (size_t)region * (REGION_BYTES + GUARD_BYTES);
}

static void* owned_copy(fx* f, const int64_t* values, int32_t count) {
  if (values == NULL) return NULL;
  if (f->owned_count == (int)(sizeof f->owned / sizeof f->owned[0])) {
    fprintf(stderr, "fixture: too many shape arrays\n");
    abort();
  }
  /* Exactly `count` elements (at least one byte for malloc): reading past them is an ASan error. */
  int64_t* copy = malloc(count > 0 ? (size_t)count * sizeof *copy : 1);
  if (copy == NULL) abort();
  if (count > 0) memcpy(copy, values, (size_t)count * sizeof *copy);
  f->owned[f->owned_count++] = copy;
  return copy;
}

void fx_tensor(fx* f, int region, void* data, DLDataType dtype, int32_t ndim, const int64_t* shape,
               const int64_t* strides) {
  DLTensor* t = &f->t[region];
  memset(t, 0, sizeof *t);
  t->data = data;
  t->device.device_type = kDLCPU;
  t->device.device_id = 0;
  t->ndim = ndim;
  t->dtype = dtype;
  t->shape = owned_copy(f, shape, ndim);
  t->strides = owned_copy(f, strides, ndim);
  t->byte_offset = 0;
}

void fx_reshape(fx* f, int region, int32_t ndim, const int64_t* shape, const int64_t* strides) {
  DLTensor* t = &f->t[region];
  t->ndim = ndim;
  t->shape = owned_copy(f, shape, ndim);
  t->strides = owned_copy(f, strides, ndim);
}

const DLTensor** fx_slot(fx* f, int region) {
  switch (region) {
    case RA: return &f->g.a;
    case RB: return &f->g.b;
    case RC: return &f->g.c;
    case RBIAS: return &f->g.bias;
    case RD: return &f->g.d;
    case RX: return f->op == CASE_SOFTMAX ? &f->s.x : &f->r.x;
    case RRES: return &f->r.residual;
    case RW: return &f->r.weight;
    case RY: return f->op == CASE_SOFTMAX ? &f->s.y : &f->r.y;
    default: abort();
  }
}

/* ---- element conversions -------------------------------------------------------------- */

static uint16_t f32_to_f16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int32_t exponent = (int32_t)((bits >> 23) & 0xFFu) - 127 + 15;
  uint32_t mantissa = bits & 0x7FFFFFu;
  if (((bits >> 23) & 0xFFu) == 0) return (uint16_t)sign; /* zero (inputs are never subnormal) */
  if (exponent >= 31) return (uint16_t)(sign | 0x7C00u);
  if (exponent <= 0) { /* subnormal half */
    if (exponent < -10) return (uint16_t)sign;
    mantissa |= 0x800000u;
    const uint32_t shift = (uint32_t)(14 - exponent);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return (uint16_t)half;
}

static float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  float magnitude;
  if (exponent == 0)
    magnitude = ldexpf((float)mantissa, -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = ldexpf((float)(mantissa | 0x400u), (int)exponent - 25);
  return sign ? -magnitude : magnitude;
}

static uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u); /* round to nearest even (inputs are exact anyway) */
  return (uint16_t)(bits >> 16);
}

static float bf16_to_f32(uint16_t b) {
  const uint32_t bits = (uint32_t)b << 16;
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static size_t element_size(DLDataType dtype) { return dtype.bits / 8u; }

static void store(unsigned char* at, DLDataType dtype, float value) {
  if (dtype.bits == 32) {
    memcpy(at, &value, sizeof value);
  } else {
    const uint16_t h = dtype.code == kDLBfloat ? f32_to_bf16(value) : f32_to_f16(value);
    memcpy(at, &h, sizeof h);
  }
}

static double load(const unsigned char* at, DLDataType dtype) {
  if (dtype.bits == 32) {
    float value;
    memcpy(&value, at, sizeof value);
    return value;
  }
  uint16_t h;
  memcpy(&h, at, sizeof h);
  return dtype.code == kDLBfloat ? bf16_to_f32(h) : f16_to_f32(h);
}

/* Input values: multiples of 1/8 in [-5/8, 5/8], exact in every dtype. */
static float input_value(int region, size_t i) {
  return (float)((int)((i * 7u + (size_t)region * 3u) % 11u) - 5) * 0.125f;
}

void fx_fill(fx* f) {
  memset(f->arena, SENTINEL_GUARD, f->arena_bytes);
  const size_t element = element_size(f->dtype);
  for (int region = 0; region < NREG; ++region) {
    unsigned char* base = fx_region(f, region);
    if (is_output_region(region)) {
      memset(base, SENTINEL_OUTPUT, REGION_BYTES);
      continue;
    }
    for (size_t i = 0; i < REGION_BYTES / element; ++i) store(base + i * element, f->dtype, input_value(region, i));
  }
}

static void init_gemm(fx* f, DLDataType dt) {
  fx_tensor(f, RA, fx_region(f, RA), dt, 2, (int64_t[]){4, 5}, NULL);
  fx_tensor(f, RB, fx_region(f, RB), dt, 2, (int64_t[]){5, 6}, NULL);
  fx_tensor(f, RC, fx_region(f, RC), dt, 2, (int64_t[]){4, 6}, NULL);
  fx_tensor(f, RBIAS, fx_region(f, RBIAS), dt, 1, (int64_t[]){6}, NULL);
  fx_tensor(f, RD, fx_region(f, RD), dt, 2, (int64_t[]){4, 6}, NULL);
  arb_gemm_args g = ARB_GEMM_ARGS_INIT;
  g.a = &f->t[RA];
  g.b = &f->t[RB];
  g.c = &f->t[RC];
  g.bias = &f->t[RBIAS];
  g.d = &f->t[RD];
  g.beta = 0.5f;
  f->g = g;
  f->args = &f->g;
}

static void init_rows(fx* f, DLDataType dt) {
  fx_tensor(f, RX, fx_region(f, RX), dt, 2, (int64_t[]){3, 5}, NULL);
  fx_tensor(f, RY, fx_region(f, RY), dt, 2, (int64_t[]){3, 5}, NULL);
  if (f->op == CASE_RMSNORM) {
    fx_tensor(f, RRES, fx_region(f, RRES), dt, 2, (int64_t[]){3, 5}, NULL);
    fx_tensor(f, RW, fx_region(f, RW), dt, 1, (int64_t[]){5}, NULL);
    arb_rmsnorm_args r = ARB_RMSNORM_ARGS_INIT;
    r.x = &f->t[RX];
    r.residual = &f->t[RRES];
    r.weight = &f->t[RW];
    r.y = &f->t[RY];
    f->r = r;
    f->args = &f->r;
  } else {
    arb_softmax_args s = ARB_SOFTMAX_ARGS_INIT;
    s.x = &f->t[RX];
    s.y = &f->t[RY];
    f->s = s;
    f->args = &f->s;
  }
}

void fx_init(fx* f, int op) {
  memset(f, 0, sizeof *f);
  f->op = op;
  f->ctx = g_ctx;
  f->stream = NULL;
  f->dtype = DT_F32;
  f->arena_bytes = GUARD_BYTES + (size_t)NREG * (REGION_BYTES + GUARD_BYTES);
  f->arena = aligned_alloc(64, f->arena_bytes);
  f->before = malloc(f->arena_bytes);
  if (f->arena == NULL || f->before == NULL) abort();
  fx_fill(f);
  if (op == CASE_GEMM)
    init_gemm(f, f->dtype);
  else
    init_rows(f, f->dtype);
}

void fx_set_dtype_all(fx* f, DLDataType dtype) {
  f->dtype = dtype;
  for (int region = 0; region < NREG; ++region) f->t[region].dtype = dtype;
  fx_fill(f);
}

void fx_free(fx* f) {
  for (int i = 0; i < f->owned_count; ++i) free(f->owned[i]);
  free(f->arena);
  free(f->before);
  f->arena = f->before = NULL;
  f->owned_count = 0;
}

arb_status fx_call(fx* f) {
  switch (f->op) {
    case CASE_GEMM: return arb_gemm(f->ctx, (const arb_gemm_args*)f->args, f->stream);
    case CASE_RMSNORM: return arb_rmsnorm(f->ctx, (const arb_rmsnorm_args*)f->args, f->stream);
    case CASE_SOFTMAX: return arb_softmax(f->ctx, (const arb_softmax_args*)f->args, f->stream);
    default: abort();
  }
}

/* ---- reading tensors back for the reference ---------------------------------------- */

/* A tensor seen as rows x cols with a row stride (as the library collapses it). */
typedef struct view {
  size_t offset; /* of element [0, 0] in the arena */
  int64_t rows, cols, ld;
  DLDataType dtype;
} view;

static view view_of(const fx* f, const DLTensor* t) {
  view v;
  v.offset = (size_t)((const unsigned char*)t->data + t->byte_offset - f->arena);
  v.dtype = t->dtype;
  v.cols = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
  v.rows = 1;
  v.ld = v.cols;
  for (int i = 0; i < t->ndim - 1; ++i) v.rows *= t->shape[i];
  if (t->strides != NULL)
    for (int i = t->ndim - 2; i >= 0; --i)
      if (t->shape[i] != 1) {
        v.ld = t->strides[i];
        break;
      }
  return v;
}

static size_t at(const view* v, int64_t row, int64_t col) {
  return v->offset + (size_t)(row * v->ld + col) * element_size(v->dtype);
}

static double get(const unsigned char* arena, const view* v, int64_t row, int64_t col) {
  return load(arena + at(v, row, col), v->dtype);
}

static double tolerance(DLDataType dtype, double expected) {
  const double relative = dtype.bits == 32 ? 2e-5 : dtype.code == kDLBfloat ? 2e-2 : 4e-3;
  return relative * (1.0 + fabs(expected));
}

/* Marks the bytes of a view's elements as written (allowed to change). */
static void mark(unsigned char* allowed, const view* v) {
  for (int64_t row = 0; row < v->rows; ++row)
    memset(allowed + at(v, row, 0), 1, (size_t)v->cols * element_size(v->dtype));
}

/* Every byte outside the outputs' elements is as it was before the call. */
static int untouched_elsewhere(const fx* f, const unsigned char* allowed, char* why, size_t n) {
  for (size_t i = 0; i < f->arena_bytes; ++i)
    if (!allowed[i] && f->arena[i] != f->before[i]) {
      snprintf(why, n, "byte %zu of the arena (outside every output element) was written", i);
      return 1;
    }
  return 0;
}

static double activate(int32_t activation, double x) {
  switch (activation) {
    case ARB_ACT_RELU: return x > 0 ? x : 0;
    case ARB_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case ARB_ACT_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case ARB_ACT_SILU: return x / (1 + exp(-x));
    default: return x;
  }
}

int check_gemm(const fx* f, const bad_case* c, char* why, size_t n) {
  (void)c;
  const arb_gemm_args* g = &f->g;
  const view a = view_of(f, g->a), b = view_of(f, g->b), d = view_of(f, g->d);
  const int64_t m = d.rows, cols = d.cols, k = g->trans_a ? a.rows : a.cols;
  view cv = d, bias = d;
  if (g->beta != 0.0f) cv = view_of(f, g->c);
  if (g->bias != NULL) bias = view_of(f, g->bias);
  unsigned char* allowed = calloc(f->arena_bytes, 1);
  if (allowed == NULL) abort();
  mark(allowed, &d);
  int bad = 0;
  for (int64_t i = 0; i < m && !bad; ++i)
    for (int64_t j = 0; j < cols && !bad; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = g->trans_a ? get(f->before, &a, p, i) : get(f->before, &a, i, p);
        const double y = g->trans_b ? get(f->before, &b, j, p) : get(f->before, &b, p, j);
        sum += x * y;
      }
      double expected = g->alpha * sum;
      if (g->beta != 0.0f) expected += g->beta * get(f->before, &cv, i, j);
      if (g->bias != NULL) expected += get(f->before, &bias, 0, j);
      expected = activate(g->activation, expected);
      const double got = get(f->arena, &d, i, j);
      if (!(fabs(got - expected) <= tolerance(d.dtype, expected))) {
        snprintf(why, n, "d[%lld, %lld] = %g, expected %g", (long long)i, (long long)j, got, expected);
        bad = 1;
      }
    }
  if (!bad) bad = untouched_elsewhere(f, allowed, why, n);
  free(allowed);
  return bad;
}

int check_rmsnorm(const fx* f, const bad_case* c, char* why, size_t n) {
  (void)c;
  const arb_rmsnorm_args* r = &f->r;
  const view x = view_of(f, r->x), y = view_of(f, r->y), w = view_of(f, r->weight);
  view res = x;
  if (r->residual != NULL) res = view_of(f, r->residual);
  unsigned char* allowed = calloc(f->arena_bytes, 1);
  if (allowed == NULL) abort();
  mark(allowed, &y);
  if (r->residual != NULL) mark(allowed, &x);
  int bad = 0;
  for (int64_t i = 0; i < x.rows && !bad; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < x.cols; ++j) {
      double v = get(f->before, &x, i, j) + (r->residual ? get(f->before, &res, i, j) : 0);
      sum += v * v;
    }
    const double scale = 1 / sqrt(sum / (double)x.cols + r->eps);
    for (int64_t j = 0; j < x.cols && !bad; ++j) {
      const double v = get(f->before, &x, i, j) + (r->residual ? get(f->before, &res, i, j) : 0);
      const double expected = v * scale * get(f->before, &w, 0, j);
      const double got = get(f->arena, &y, i, j);
      if (!(fabs(got - expected) <= tolerance(y.dtype, expected))) {
        snprintf(why, n, "y[%lld, %lld] = %g, expected %g", (long long)i, (long long)j, got, expected);
        bad = 1;
      }
      if (!bad && r->residual != NULL && !(fabs(get(f->arena, &x, i, j) - v) <= tolerance(x.dtype, v))) {
        snprintf(why, n, "x[%lld, %lld] = %g after x += residual, expected %g", (long long)i, (long long)j,
                 get(f->arena, &x, i, j), v);
        bad = 1;
      }
    }
  }
  if (!bad) bad = untouched_elsewhere(f, allowed, why, n);
  free(allowed);
  return bad;
}

int check_softmax(const fx* f, const bad_case* c, char* why, size_t n) {
  (void)c;
  const view x = view_of(f, f->s.x), y = view_of(f, f->s.y);
  unsigned char* allowed = calloc(f->arena_bytes, 1);
  if (allowed == NULL) abort();
  mark(allowed, &y);
  int bad = 0;
  for (int64_t i = 0; i < x.rows && !bad; ++i) {
    double top = -INFINITY, sum = 0;
    for (int64_t j = 0; j < x.cols; ++j) top = fmax(top, get(f->before, &x, i, j));
    for (int64_t j = 0; j < x.cols; ++j) sum += exp(get(f->before, &x, i, j) - top);
    for (int64_t j = 0; j < x.cols && !bad; ++j) {
      const double expected = exp(get(f->before, &x, i, j) - top) / sum;
      const double got = get(f->arena, &y, i, j);
      if (!(fabs(got - expected) <= tolerance(y.dtype, expected))) {
        snprintf(why, n, "y[%lld, %lld] = %g, expected %g", (long long)i, (long long)j, got, expected);
        bad = 1;
      }
    }
  }
  if (!bad) bad = untouched_elsewhere(f, allowed, why, n);
  free(allowed);
  return bad;
}

/* ---- outcomes of custom cases ----------------------------------------------------- */

void took(outcome* out, int status) {
  out->status = status;
  const char* message = arb_last_error();
  snprintf(out->message, sizeof out->message, "%s", message ? message : "(NULL)");
  if (message == NULL) failed_check(out, "arb_last_error() returned NULL");
}

void failed_check(outcome* out, const char* format, ...) {
  if (out->failed[0] != '\0') return; /* keep the first */
  va_list args;
  va_start(args, format);
  vsnprintf(out->failed, sizeof out->failed, format, args);
  va_end(args);
}
