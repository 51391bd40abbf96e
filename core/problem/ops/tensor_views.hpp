// The C API's tensors as the ops read them: each DLTensor checked (present, data, dtype,
// device, sizes) and viewed as rows x cols with a row stride. Throws Failure naming the
// argument (ARB_ERR_INVALID_ARGUMENT, or ARB_ERR_UNSUPPORTED for what arbiter cannot run).
#pragma once

#include <arbiter/arbiter.h>
#include <arbiter/plugin.h>

#include "problem/op.hpp"
#include "problem/operand_fields.hpp"
#include "problem/problem.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace arbiter {

[[noreturn]] void invalid_argument(const std::string& what);

// An args struct must at least hold the fields of ABI 1.0 (its ARB_*_STRUCT_SIZE).
template <typename Args>
void check_args(const Args* args, const char* function, size_t minimum);

// A checked view of one DLTensor as rows x cols with a row stride. `bytes` is the memory it
// spans, from data to just past its last element (checked not to overflow or wrap).
struct Matrix {
  const char* name;
  void* data;
  int64_t rows, cols, ld;
  uint64_t bytes = 0;
};

// Throws unless `output` and `input` occupy disjoint memory ("d overlaps a in memory").
void check_disjoint(const Matrix& output, const Matrix& input);

// Present: not NULL, with data, and a shape when it has dimensions.
void check_present(const DLTensor* t, const char* name);
// A byte offset that does not wrap the address around, and an address aligned for `element`.
void check_address(const DLTensor* t, const char* name, size_t element);

// Common checks: present, has data, a valid dtype equal to the problem's (the first
// operand sets the problem's dtype and device, when p.dtype is ARB_DTYPE_INVALID), same device,
// a byte offset that does not wrap the address, an address aligned for the dtype.
void check_tensor(const DLTensor* t, const char* name, arb_problem& p);

// The tensor's data with its byte offset applied.
char* data_of(const DLTensor* t);

// Views a tensor of ndim >= 1 as rows x cols: the last dimension must be contiguous and
// the leading ones must collapse into a single row stride.
Matrix as_rows(const DLTensor* t, const char* name);

// A 2-D operand of the given shape.
Matrix as_matrix(const DLTensor* t, const char* name, int64_t rows, int64_t cols);

// Throws unless `t` has exactly the shape of `like`.
[[noreturn]] void not_same_shape(const char* name, const char* like_name);
inline void check_same_shape(const DLTensor* t, const char* name, const DLTensor* like, const char* like_name) {
  bool same = t->ndim == like->ndim;
  for (int i = 0; same && i < t->ndim; ++i) same = t->shape[i] == like->shape[i];
  if (!same) [[unlikely]] not_same_shape(name, like_name);
}

// A 1-D contiguous vector of `size` elements (bias, weight). `size_format` says the size in
// the message, with {} for the number ("n = {}"); it is formatted only on failure.
Matrix as_vector(const DLTensor* t, const char* name, int64_t size, const char* size_format);

inline uint64_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The call's alignment class: every operand address (absent ones are null) and row stride.
inline int32_t call_alignment(const Call& call) {
  uint64_t addresses = 0;
  for (const OperandField& field : kOperandFields) addresses |= address(operand_field(call.operands, field));
  return alignment_class({addresses, static_cast<uint64_t>(stride_alignment(call.problem))});
}

// The message for check_args, out of the way of the call.
[[noreturn]] void bad_args(const size_t* struct_size, const char* function, size_t minimum);

template <typename Args>
inline void check_args(const Args* args, const char* function, size_t minimum) {
  if (args == nullptr || args->struct_size < minimum) [[unlikely]]
    bad_args(args ? &args->struct_size : nullptr, function, minimum);
}

}  // namespace arbiter
