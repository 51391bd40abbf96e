// One tensor argument of an operation, as the C ABI takes it: a DLTensor over the caller's
// memory (no copy), with the layout checks the library would make, done first so that a view it
// cannot express is reported as "copy this operand" rather than as an error.
#pragma once

#include <arbiter/arbiter.h>
#include <nanobind/ndarray.h>

#include <cstdint>

namespace arbiter::python {

namespace nb = nanobind;

inline constexpr int kMaxDims = 16;  // the library's limit

// The view an operand is passed as, or why it must be copied.
enum class Layout { as_is, transposed, needs_copy };

struct Operand {
  DLTensor tensor{};
  int64_t shape[kMaxDims]{};
  int64_t strides[kMaxDims]{};
  bool present = false;

  const DLTensor* get() const { return present ? &tensor : nullptr; }
};

// Fills `operand` from `array` (shape and strides copied, so a view can be rewritten). With
// `bf16_from_u16`, 16-bit unsigned data is taken as bfloat16 (NumPy's ml_dtypes.bfloat16
// arrays reach us as uint16 views: NumPy's DLPack export has no bfloat16). Raises
// arbiter.DTypeError for an element type the library has no kernels for.
void make_operand(const nb::ndarray<nb::ro>& array, const char* name, bool bf16_from_u16, Operand& operand);
// An output: the same, from a writable array.
inline void make_operand(const nb::ndarray<>& array, const char* name, bool bf16_from_u16, Operand& operand) {
  make_operand(nb::ndarray<nb::ro>(array), name, bf16_from_u16, operand);
}
// An operand of int32 indices (rope's positions): the same, but only int32 is taken; any other
// dtype (int64 above all, PyTorch's and NumPy's default) is an arbiter.DTypeError that says to
// convert it. Nothing is converted here: a device tensor would be copied behind the caller's back.
void make_index_operand(const nb::ndarray<nb::ro>& array, const char* name, Operand& operand);

// Rows of a row operation ([..., n]: unit last stride, leading dimensions that collapse into one
// row stride of at least n), or a matrix as stored (as_is) or as the transpose of what is stored
// (transposed: rows and columns swapped, so trans_* flips). Size-1 dimensions are free.
Layout rows_layout(const Operand& operand);
Layout matrix_layout(const Operand& operand);
// Compact row-major (C order; the strides of size-1 dimensions are free).
bool is_compact(const Operand& operand);
// Rewrites a 2-D operand as its transpose (shape and strides swapped).
void transpose(Operand& operand);

}  // namespace arbiter::python
