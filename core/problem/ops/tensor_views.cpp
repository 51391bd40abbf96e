#include "problem/ops/tensor_views.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>

#include <cstring>

namespace arbiter {

void invalid_argument(const std::string& what) { fail(ARB_ERR_INVALID_ARGUMENT, what); }

namespace {

arb_dtype dtype_of(const DLTensor& t, const char* name) {
  if (t.dtype.lanes != 1) invalid_argument(fmt::format("{}: vector dtypes (lanes = {}) are not supported", name, t.dtype.lanes));
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32) return ARB_DTYPE_F32;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 16) return ARB_DTYPE_F16;
  if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) return ARB_DTYPE_BF16;
  invalid_argument(fmt::format("{}: unsupported dtype (code {}, {} bits); use f32, f16 or bf16", name, t.dtype.code,
                      t.dtype.bits));
}

// DLDevice.device_type is an enum the caller fills in: read it as the int it is, so that
// an unknown value is reported rather than undefined behaviour.
int32_t device_type_of(const DLTensor& t) {
  int32_t type;
  static_assert(sizeof(t.device.device_type) == sizeof type);
  std::memcpy(&type, &t.device.device_type, sizeof type);
  return type;
}

}  // namespace

// Common checks: present, has data, valid dtype equal to `dtype` (if set), same device.
void check_tensor(const DLTensor* t, const char* name, arb_problem& p) {
  if (t == nullptr) invalid_argument(fmt::format("{} is NULL", name));
  if (t->data == nullptr) invalid_argument(fmt::format("{}.data is NULL", name));
  if (t->ndim > 0 && t->shape == nullptr) invalid_argument(fmt::format("{}.shape is NULL", name));
  const arb_dtype dtype = dtype_of(*t, name);
  const int32_t device_type = device_type_of(*t);
  if (p.dtype == ARB_DTYPE_INVALID) {
    p.dtype = dtype;
    p.device_type = device_type;
    p.device_id = t->device.device_id;
    if (p.device_type != kDLCPU && p.device_type != kDLCUDA)
      fail(ARB_ERR_UNSUPPORTED, fmt::format("{}: device type {} is not supported (cpu or cuda)", name, p.device_type));
  } else {
    if (dtype != p.dtype)
      invalid_argument(fmt::format("{} has dtype {}, but the first operand has {}", name, dtype_name(dtype), dtype_name(p.dtype)));
    if (device_type != p.device_type || t->device.device_id != p.device_id)
      invalid_argument(fmt::format("{} is on {}:{}, but the first operand is on {}:{}", name, device_name(device_type),
                          t->device.device_id, device_name(p.device_type), p.device_id));
  }
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 1) invalid_argument(fmt::format("{}: dimension {} has size {}; sizes must be >= 1", name, i, t->shape[i]));
}

char* data_of(const DLTensor* t) { return static_cast<char*>(t->data) + t->byte_offset; }

// Views a tensor of ndim >= 1 as rows x cols: the last dimension must be contiguous and
// the leading ones must collapse into a single row stride.
Matrix as_rows(const DLTensor* t, const char* name) {
  if (t->ndim < 1) invalid_argument(fmt::format("{} must have at least one dimension", name));
  const int last = t->ndim - 1;
  Matrix m{name, data_of(t), 1, t->shape[last], t->shape[last]};
  for (int i = 0; i < last; ++i) m.rows *= t->shape[i];
  if (t->strides == nullptr) return m;
  if (t->shape[last] > 1 && t->strides[last] != 1)
    invalid_argument(fmt::format("{}: the last dimension must be contiguous (stride 1, got {})", name, t->strides[last]));
  // Walk the leading dimensions inwards: each must step over the one inside it exactly.
  int64_t row_stride = 0;
  int64_t inner_extent = 0;  // elements spanned by one step of the next-inner leading dim
  for (int i = last - 1; i >= 0; --i) {
    if (t->shape[i] == 1) continue;  // size-1 dimensions have no meaningful stride
    if (row_stride == 0) {
      row_stride = t->strides[i];
      inner_extent = row_stride * t->shape[i];
      if (row_stride < m.cols)
        invalid_argument(fmt::format("{}: row stride {} is below the row length {}", name, row_stride, m.cols));
    } else {
      if (t->strides[i] != inner_extent)
        invalid_argument(fmt::format("{}: dimensions 0..{} do not collapse into rows (stride {} of dimension {}, expected {})",
                            name, last - 1, t->strides[i], i, inner_extent));
      inner_extent *= t->shape[i];
    }
  }
  if (row_stride != 0) m.ld = row_stride;
  return m;
}

// A 2-D operand of the given shape.
Matrix as_matrix(const DLTensor* t, const char* name, int64_t rows, int64_t cols) {
  if (t->ndim == 3) fail(ARB_ERR_UNSUPPORTED, fmt::format("{}: batched gemm (3-D tensors) is not supported yet", name));
  if (t->ndim != 2) invalid_argument(fmt::format("{} must be 2-D, got {} dimensions", name, t->ndim));
  if (t->shape[0] != rows || t->shape[1] != cols)
    invalid_argument(fmt::format("{} must be [{}, {}], got [{}, {}]", name, rows, cols, t->shape[0], t->shape[1]));
  return as_rows(t, name);
}

void not_same_shape(const char* name, const char* like_name) {
  invalid_argument(fmt::format("{} must have the shape of {}", name, like_name));
}

void bad_args(const size_t* struct_size, const char* function, size_t minimum) {
  if (struct_size == nullptr) invalid_argument(fmt::format("{}: args is NULL", function));
  invalid_argument(fmt::format("{}: args.struct_size = {} is below the minimum {} (set it to sizeof)", function,
                               *struct_size, minimum));
}

void check_vector(const DLTensor* t, const char* name, int64_t size, const char* size_format) {
  if (t->ndim != 1 || t->shape[0] != size)
    invalid_argument(fmt::format("{} must be 1-D of size {}", name, fmt::format(fmt::runtime(size_format), size)));
  if (t->strides != nullptr && size > 1 && t->strides[0] != 1)
    invalid_argument(fmt::format("{} must be contiguous (stride 1)", name));
}

}  // namespace arbiter
