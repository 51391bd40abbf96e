#include "breakers.h"

#include <stdlib.h>
#include <string.h>

void brk_ctx_null(fx* f, const bad_case* c) {
  (void)c;
  f->ctx = NULL;
}

void brk_args_null(fx* f, const bad_case* c) {
  (void)c;
  f->args = NULL;
}

void brk_slot_null(fx* f, const bad_case* c) { *fx_slot(f, c->which) = NULL; }

void brk_data_null(fx* f, const bad_case* c) { f->t[c->which].data = NULL; }

void brk_shape_null(fx* f, const bad_case* c) { f->t[c->which].shape = NULL; }

static size_t* struct_size_of(fx* f) {
  switch (f->op) {
    case CASE_GEMM: return &f->g.struct_size;
    case CASE_RMSNORM: return &f->r.struct_size;
    default: return &f->s.struct_size;
  }
}

void brk_struct_size(fx* f, const bad_case* c) { *struct_size_of(f) = (size_t)c->v1; }

void brk_huge_struct_size(fx* f, const bad_case* c) {
  (void)c;
  const size_t size = f->op == CASE_GEMM ? sizeof f->g : f->op == CASE_RMSNORM ? sizeof f->r : sizeof f->s;
  *struct_size_of(f) = SIZE_MAX;
  /* A heap block of exactly sizeof: a read past the fields this library knows is an ASan error. */
  void* copy = malloc(size);
  if (copy == NULL) abort();
  memcpy(copy, f->args, size);
  f->owned[f->owned_count++] = copy;
  f->args = copy;
}

void brk_dtype(fx* f, const bad_case* c) {
  DLDataType dtype = {(uint8_t)c->v1, (uint8_t)c->v2, (uint16_t)c->v3};
  f->t[c->which].dtype = dtype;
}

void brk_dtype_all(fx* f, const bad_case* c) {
  DLDataType dtype = {(uint8_t)c->v1, (uint8_t)c->v2, (uint16_t)c->v3};
  fx_set_dtype_all(f, dtype);
}

void brk_ndim(fx* f, const bad_case* c) { f->t[c->which].ndim = (int32_t)c->v1; }

void brk_leading_ones(fx* f, const bad_case* c) {
  const DLTensor* t = &f->t[c->which];
  int64_t shape[64];
  const int32_t ndim = (int32_t)c->v1;
  for (int32_t i = 0; i < ndim; ++i) shape[i] = 1;
  for (int32_t i = 0; i < t->ndim; ++i) shape[ndim - t->ndim + i] = t->shape[i];
  fx_reshape(f, c->which, ndim, shape, NULL);
}

void brk_shape1(fx* f, const bad_case* c) { fx_reshape(f, c->which, 1, (int64_t[]){c->v1}, NULL); }

void brk_shape2(fx* f, const bad_case* c) { fx_reshape(f, c->which, 2, (int64_t[]){c->v1, c->v2}, NULL); }

void brk_strides2(fx* f, const bad_case* c) {
  const DLTensor* t = &f->t[c->which];
  fx_reshape(f, c->which, 2, (int64_t[]){t->shape[0], t->shape[1]}, (int64_t[]){c->v1, c->v2});
}

void brk_byte_offset(fx* f, const bad_case* c) { f->t[c->which].byte_offset = (uint64_t)c->v1; }

void brk_wrap_to_zero(fx* f, const bad_case* c) {
  DLTensor* t = &f->t[c->which];
  t->byte_offset = (uint64_t)0 - (uint64_t)(uintptr_t)t->data;
}

void brk_misalign(fx* f, const bad_case* c) {
  DLTensor* t = &f->t[c->which];
  t->data = (unsigned char*)t->data + c->v1;
}

static void set_device(DLTensor* t, int64_t type, int64_t id) {
  const int32_t raw = (int32_t)type; /* DLDeviceType is an enum: store the int as it is */
  memcpy(&t->device.device_type, &raw, sizeof raw);
  t->device.device_id = (int32_t)id;
}

void brk_device(fx* f, const bad_case* c) {
  if (c->which != ALL_TENSORS) {
    set_device(&f->t[c->which], c->v1, c->v2);
    return;
  }
  for (int region = 0; region < NREG; ++region) set_device(&f->t[region], c->v1, c->v2);
}

void brk_stream(fx* f, const bad_case* c) { f->stream = (void*)(intptr_t)c->v1; }

void brk_data_in(fx* f, const bad_case* c) {
  f->t[c->which].data = fx_region(f, (int)c->v1) + c->v2 * (int64_t)(f->t[c->which].dtype.bits / 8u);
}
