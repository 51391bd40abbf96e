#include "problem/ops/tensor_views.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>

#include <cstdint>
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

// Bytes per element of a tensor whose dtype dtype_of accepted.
size_t element_bytes(const DLTensor& t) { return t.dtype.bits / 8u; }

// More dimensions than any operand has a use for (the DLPack field is an int32).
constexpr int32_t kMaxDimensions = 16;

}  // namespace

// Common checks: present, has data, valid dtype equal to `dtype` (if set), same device.
void check_present(const DLTensor* t, const char* name) {
  if (t == nullptr) invalid_argument(fmt::format("{} is NULL", name));
  if (t->data == nullptr) invalid_argument(fmt::format("{}.data is NULL", name));
  if (t->ndim > 0 && t->shape == nullptr) invalid_argument(fmt::format("{}.shape is NULL", name));
}

void check_address(const DLTensor* t, const char* name, size_t element) {
  if (t->byte_offset > UINTPTR_MAX - address(t->data))
    invalid_argument(fmt::format("{}: byte_offset {} wraps the address around", name, t->byte_offset));
  if (const uint64_t misaligned = address(data_of(t)) % element; misaligned != 0)
    invalid_argument(fmt::format("{}: the address (data + byte_offset) is not aligned for its dtype (address % {} = {})",
                                 name, element, misaligned));
}

void check_tensor(const DLTensor* t, const char* name, arb_problem& p) {
  check_present(t, name);
  const arb_dtype dtype = dtype_of(*t, name);
  const int32_t device_type = device_type_of(*t);
  if (p.dtype == ARB_DTYPE_INVALID) {
    p.dtype = dtype;
    p.device_type = device_type;
    p.device_id = t->device.device_id;
    if (p.device_type != kDLCPU && p.device_type != kDLCUDA)
      fail(ARB_ERR_UNSUPPORTED, fmt::format("{}: device type {} is not supported (cpu or cuda)", name, p.device_type));
    if (p.device_id < 0 || (p.device_type == kDLCPU && p.device_id != 0))
      invalid_argument(fmt::format("{}: device_id {} on {} (DLPack: 0 for the CPU, a device ordinal for CUDA)", name,
                                   p.device_id, device_name(p.device_type)));
  } else {
    if (dtype != p.dtype)
      invalid_argument(fmt::format("{} has dtype {}, but the first operand has {}", name, dtype_name(dtype), dtype_name(p.dtype)));
    if (device_type != p.device_type || t->device.device_id != p.device_id)
      invalid_argument(fmt::format("{} is on {}:{}, but the first operand is on {}:{}", name, device_name(device_type),
                          t->device.device_id, device_name(p.device_type), p.device_id));
  }
  if (t->ndim < 0 || t->ndim > kMaxDimensions)
    invalid_argument(fmt::format("{}: ndim = {}; arbiter takes 0 to {} dimensions", name, t->ndim, kMaxDimensions));
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 1) invalid_argument(fmt::format("{}: dimension {} has size {}; sizes must be >= 1", name, i, t->shape[i]));
  check_address(t, name, element_bytes(*t));
}

void check_disjoint(const Matrix& output, const Matrix& input) {
  const uint64_t out = address(output.data), in = address(input.data);
  if (out < in + input.bytes && in < out + output.bytes) [[unlikely]]
    invalid_argument(fmt::format("{} overlaps {} in memory: an output must not share memory with an input", output.name,
                                 input.name));
}

char* data_of(const DLTensor* t) { return static_cast<char*>(t->data) + t->byte_offset; }

// The memory rows x cols with row stride ld span: ((rows - 1) * ld + cols) elements, checked
// against overflow and against wrapping the address around.
uint64_t span_bytes(const DLTensor* t, const char* name, const Matrix& m) {
  int64_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(m.rows - 1, m.ld, &elements) || __builtin_add_overflow(elements, m.cols, &elements) ||
      __builtin_mul_overflow(elements, static_cast<int64_t>(element_bytes(*t)), &bytes) ||
      static_cast<uint64_t>(bytes) > UINTPTR_MAX - address(m.data))
    invalid_argument(fmt::format("{}: its sizes and strides span more memory than an address can reach", name));
  return static_cast<uint64_t>(bytes);
}

// Views a tensor of ndim >= 1 as rows x cols: the last dimension must be contiguous and
// the leading ones must collapse into a single row stride.
Matrix as_rows(const DLTensor* t, const char* name) {
  if (t->ndim < 1) invalid_argument(fmt::format("{} must have at least one dimension", name));
  const int last = t->ndim - 1;
  Matrix m{name, data_of(t), 1, t->shape[last], t->shape[last]};
  for (int i = 0; i < last; ++i)
    if (__builtin_mul_overflow(m.rows, t->shape[i], &m.rows))
      invalid_argument(fmt::format("{}: the product of its sizes overflows", name));
  if (t->strides == nullptr) {
    m.bytes = span_bytes(t, name, m);
    return m;
  }
  if (t->shape[last] > 1 && t->strides[last] != 1)
    invalid_argument(fmt::format("{}: the last dimension must be contiguous (stride 1, got {})", name, t->strides[last]));
  // Walk the leading dimensions inwards: each must step over the one inside it exactly.
  int64_t row_stride = 0;
  int64_t inner_extent = 0;  // elements spanned by one step of the next-inner leading dim
  for (int i = last - 1; i >= 0; --i) {
    if (t->shape[i] == 1) continue;  // size-1 dimensions have no meaningful stride
    if (row_stride == 0) {
      row_stride = t->strides[i];
      if (row_stride < m.cols)
        invalid_argument(fmt::format("{}: row stride {} is below the row length {}", name, row_stride, m.cols));
      if (__builtin_mul_overflow(row_stride, t->shape[i], &inner_extent))
        invalid_argument(fmt::format("{}: its sizes and strides span more memory than an address can reach", name));
    } else {
      if (t->strides[i] != inner_extent)
        invalid_argument(fmt::format("{}: dimensions 0..{} do not collapse into rows (stride {} of dimension {}, expected {})",
                            name, last - 1, t->strides[i], i, inner_extent));
      if (__builtin_mul_overflow(inner_extent, t->shape[i], &inner_extent))
        invalid_argument(fmt::format("{}: its sizes and strides span more memory than an address can reach", name));
    }
  }
  if (row_stride != 0) m.ld = row_stride;
  m.bytes = span_bytes(t, name, m);
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

Matrix as_vector(const DLTensor* t, const char* name, int64_t size, const char* size_format) {
  if (t->ndim != 1 || t->shape[0] != size)
    invalid_argument(fmt::format("{} must be 1-D of size {}", name, fmt::format(fmt::runtime(size_format), size)));
  if (t->strides != nullptr && size > 1 && t->strides[0] != 1)
    invalid_argument(fmt::format("{} must be contiguous (stride 1)", name));
  Matrix v{name, data_of(t), 1, size, size};
  v.bytes = span_bytes(t, name, v);
  return v;
}

}  // namespace arbiter
