// arb_status -> Python exceptions of arbiter.errors (arbiter.Error and its subclasses, several of
// them also ValueError, TypeError, MemoryError... where Python has a matching built-in).
#pragma once

#include <arbiter/arbiter.h>

#include <string>

namespace arbiter::python {

// Raises the exception class for `status` with `message` (a nanobind python_error).
[[noreturn]] void raise_error(arb_status status, const std::string& message);
// The same with the message of the failed C call: arb_last_error() of this thread.
[[noreturn]] void raise_status(arb_status status);
// A dtype the library has no kernels for: arbiter.DTypeError (a TypeError).
[[noreturn]] void raise_dtype_error(const char* operand, DLDataType dtype);
// arbiter.DTypeError with `message` (a dtype other than the one required).
[[noreturn]] void raise_dtype_error(const std::string& message);
// "float32", "bfloat16", "uint16"...
std::string dtype_name(DLDataType dtype);
// Raises arbiter.errors._NeedsCopy(name): a view the C ABI cannot express; the Python layer
// copies that operand and calls again.
[[noreturn]] void needs_copy(const char* name);

}  // namespace arbiter::python
