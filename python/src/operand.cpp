#include "operand.hpp"

#include "python_errors.hpp"

#include <string>
#include <utility>

namespace arbiter::python {

namespace {

DLDataType dtype_of(const nb::ndarray<nb::ro>& array) {
  return DLDataType{static_cast<uint8_t>(array.dtype().code), static_cast<uint8_t>(array.dtype().bits),
                    static_cast<uint16_t>(array.dtype().lanes)};
}

// `operand` over `array`'s memory, with `dtype` (checked by the caller).
void fill_operand(const nb::ndarray<nb::ro>& array, const char* name, DLDataType dtype, Operand& operand) {
  const int ndim = static_cast<int>(array.ndim());
  if (ndim > kMaxDims)
    raise_error(ARB_ERR_INVALID_ARGUMENT, std::string(name) + " has " + std::to_string(ndim) + " dimensions (at most 16)");
  for (int i = 0; i < ndim; ++i) {
    operand.shape[i] = array.shape_ptr()[i];
    // nanobind fills strides (in elements) for every import; compact if ever absent.
    operand.strides[i] = array.stride_ptr() ? array.stride_ptr()[i] : 0;
  }
  if (!array.stride_ptr())
    for (int i = ndim - 1, step = 1; i >= 0; step *= static_cast<int>(operand.shape[i]), --i) operand.strides[i] = step;
  operand.tensor.data = array.data_handle();
  operand.tensor.byte_offset = array.byte_offset();
  operand.tensor.device = DLDevice{static_cast<DLDeviceType>(array.device_type()), array.device_id()};
  operand.tensor.ndim = ndim;
  operand.tensor.dtype = dtype;
  operand.tensor.shape = operand.shape;
  operand.tensor.strides = operand.strides;
  operand.present = true;
}

}  // namespace

void make_operand(const nb::ndarray<nb::ro>& array, const char* name, bool bf16_from_u16, Operand& operand) {
  DLDataType dtype = dtype_of(array);
  if (bf16_from_u16 && dtype.code == kDLUInt && dtype.bits == 16) dtype.code = kDLBfloat;
  const bool supported = dtype.lanes == 1 && ((dtype.code == kDLFloat && (dtype.bits == 32 || dtype.bits == 16)) ||
                                              (dtype.code == kDLBfloat && dtype.bits == 16));
  if (!supported) raise_dtype_error(name, dtype);
  fill_operand(array, name, dtype, operand);
}

void make_index_operand(const nb::ndarray<nb::ro>& array, const char* name, Operand& operand) {
  const DLDataType dtype = dtype_of(array);
  if (dtype.code != kDLInt || dtype.bits != 32 || dtype.lanes != 1)
    raise_dtype_error(std::string(name) + " has dtype " + dtype_name(dtype) + ", but " + name +
                      " must be int32: convert them first (NumPy: .astype(np.int32); PyTorch: .to(torch.int32)); "
                      "arbiter does not convert them itself");
  fill_operand(array, name, dtype, operand);
}

Layout rows_layout(const Operand& operand) {
  const int ndim = operand.tensor.ndim;
  if (ndim == 0) return Layout::as_is;  // the library names what is wrong with a scalar
  const int64_t cols = operand.shape[ndim - 1];
  if (cols > 1 && operand.strides[ndim - 1] != 1) return Layout::needs_copy;
  int64_t expected = 0;  // the stride the next leading dimension must have; 0 until a row stride is seen
  for (int i = ndim - 2; i >= 0; --i) {
    if (operand.shape[i] == 1) continue;
    if (expected == 0) {
      if (operand.strides[i] < cols) return Layout::needs_copy;
      expected = operand.strides[i];
    } else if (operand.strides[i] != expected) {
      return Layout::needs_copy;
    }
    if (__builtin_mul_overflow(expected, operand.shape[i], &expected)) return Layout::as_is;  // the library reports it
  }
  return Layout::as_is;
}

Layout matrix_layout(const Operand& operand) {
  if (operand.tensor.ndim != 2) return Layout::as_is;  // the library names the wrong rank
  const int64_t rows = operand.shape[0], cols = operand.shape[1];
  const int64_t row_stride = operand.strides[0], col_stride = operand.strides[1];
  const bool row_major = (cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= cols);
  if (row_major) return Layout::as_is;
  const bool column_major = (rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= rows);
  return column_major ? Layout::transposed : Layout::needs_copy;
}

bool is_compact(const Operand& operand) {
  int64_t step = 1;
  for (int i = operand.tensor.ndim - 1; i >= 0; --i) {
    if (operand.shape[i] != 1 && operand.strides[i] != step) return false;
    step *= operand.shape[i];
  }
  return true;
}

void transpose(Operand& operand) {
  std::swap(operand.shape[0], operand.shape[1]);
  std::swap(operand.strides[0], operand.strides[1]);
}

}  // namespace arbiter::python
