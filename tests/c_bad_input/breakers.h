/* Breakers shared by the op tables: each turns the valid fixture into one bad call, with
 * the case's `which` (a region) and v1..v3 as parameters. */
#ifndef ARBITER_C_BAD_INPUT_BREAKERS_H
#define ARBITER_C_BAD_INPUT_BREAKERS_H

#include "c_bad_input.h"

/* Every tensor of the call (for `which`): the device cases change all operands. */
#define ALL_TENSORS (-1)

void brk_ctx_null(fx* f, const bad_case* c);
void brk_args_null(fx* f, const bad_case* c);
void brk_slot_null(fx* f, const bad_case* c);      /* args field `which` = NULL */
void brk_data_null(fx* f, const bad_case* c);      /* tensor `which`.data = NULL */
void brk_shape_null(fx* f, const bad_case* c);     /* tensor `which`.shape = NULL */
void brk_struct_size(fx* f, const bad_case* c);    /* args.struct_size = (size_t)v1 */
void brk_huge_struct_size(fx* f, const bad_case* c); /* args copied to an exact-size heap block, struct_size = SIZE_MAX */
void brk_dtype(fx* f, const bad_case* c);          /* tensor `which`.dtype = {v1, v2, v3} */
void brk_dtype_all(fx* f, const bad_case* c);      /* every tensor {v1, v2, v3}, data refilled */
void brk_ndim(fx* f, const bad_case* c);           /* tensor `which`.ndim = v1, shape array left as it is */
void brk_leading_ones(fx* f, const bad_case* c);   /* v1 dimensions: leading 1s, then the tensor's own shape */
void brk_shape1(fx* f, const bad_case* c);         /* tensor `which` 1-D [v1] */
void brk_shape2(fx* f, const bad_case* c);         /* tensor `which` 2-D [v1, v2] */
void brk_strides2(fx* f, const bad_case* c);       /* tensor `which` (2-D): strides {v1, v2} */
void brk_byte_offset(fx* f, const bad_case* c);    /* tensor `which`.byte_offset = (uint64_t)v1 */
void brk_wrap_to_zero(fx* f, const bad_case* c);   /* byte_offset so that data + byte_offset wraps to 0 */
void brk_misalign(fx* f, const bad_case* c);       /* tensor `which`.data += v1 bytes */
void brk_device(fx* f, const bad_case* c);         /* tensor `which` (or ALL_TENSORS): device type v1, id v2 */
void brk_stream(fx* f, const bad_case* c);         /* stream = (void*)v1 */
void brk_data_in(fx* f, const bad_case* c);        /* tensor `which`.data = region v1's start + v2 elements */

#endif
