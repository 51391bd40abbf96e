#include "python_errors.hpp"

#include "operand.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

namespace arbiter::python {
namespace {

// The class named `name` in arbiter.errors (imported on first use; the package imports it
// before the extension, so this never runs Python code of its own).
nb::object error_class(const char* name) { return nb::module_::import_("arbiter.errors").attr(name); }

const char* class_for(arb_status status) {
  switch (status) {
    case ARB_ERR_INVALID_ARGUMENT: return "InvalidArgumentError";
    case ARB_ERR_UNSUPPORTED: return "UnsupportedError";
    case ARB_ERR_CONFIG: return "ConfigError";
    case ARB_ERR_PLUGIN: return "PluginError";
    case ARB_ERR_KERNEL: return "KernelError";
    case ARB_ERR_OUT_OF_MEMORY: return "OutOfMemoryError";
    case ARB_ERR_VERSION: return "VersionError";
    case ARB_ERR_TABLE: return "TableError";
    default: return "Error";
  }
}

[[noreturn]] void raise(nb::object cls, nb::object args) {
  PyErr_SetObject(cls.ptr(), args.ptr());
  throw nb::python_error();
}

}  // namespace

void raise_error(arb_status status, const std::string& message) {
  raise(error_class(class_for(status)), nb::make_tuple(static_cast<int>(status), message));
}

void raise_status(arb_status status) { raise_error(status, arb_last_error()); }

std::string dtype_name(DLDataType dtype) {
  std::string name;
  switch (dtype.code) {
    case kDLInt: name = "int"; break;
    case kDLUInt: name = "uint"; break;
    case kDLFloat: name = "float"; break;
    case kDLBfloat: name = "bfloat"; break;
    case kDLComplex: name = "complex"; break;
    default: name = "type" + std::to_string(dtype.code) + "_";
  }
  name += std::to_string(dtype.bits);
  if (dtype.lanes != 1) name += "x" + std::to_string(dtype.lanes);
  return name;
}

void raise_dtype_error(const char* operand, DLDataType dtype) {
  raise(error_class("DTypeError"),
        nb::make_tuple(static_cast<int>(ARB_ERR_INVALID_ARGUMENT),
                       std::string(operand) + " has dtype " + dtype_name(dtype) +
                           ": arbiter's operations take float32, float16 and bfloat16"));
}

void raise_dtype_error(const std::string& message) {
  raise(error_class("DTypeError"), nb::make_tuple(static_cast<int>(ARB_ERR_INVALID_ARGUMENT), message));
}

void needs_copy(const char* name) { raise(error_class("_NeedsCopy"), nb::make_tuple(name)); }

}  // namespace arbiter::python
