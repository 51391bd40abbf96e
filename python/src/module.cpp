// arbiter._arbiter: the extension module. A context object over arb_context and one method per
// C ABI entry point; tensors come in through DLPack (nanobind's ndarray takes anything with
// __dlpack__, and NumPy arrays), are described to the library as they lie in memory, and the
// GIL is released for every call into the library. The Python layer (arbiter/context.py) adds
// defaults, output allocation in the caller's framework and copies of views the ABI cannot take.
#include "operand.hpp"
#include "python_errors.hpp"
#include "reports.hpp"

#include <arbiter/arbiter.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <tuple>
#include <string>

namespace nb = nanobind;
using namespace nb::literals;

namespace arbiter::python {
namespace {

using Input = std::optional<nb::ndarray<nb::ro>>;
using Output = nb::ndarray<>;

// A report written by one of the explain calls (arb_explain's buffer protocol: ask for the size,
// then fill). `write(buffer, capacity, &length)` makes the call.
template <typename Write>
std::string explain_text(Write write) {
  size_t length = 0;
  arb_status status = write(nullptr, 0, &length);
  if (status != ARB_OK && status != ARB_ERR_BUFFER_TOO_SMALL) raise_status(status);
  std::string text(length, '\0');
  status = write(text.data(), text.size(), &length);
  if (status != ARB_OK) raise_status(status);
  text.resize(length > 0 ? length - 1 : 0);  // without the NUL
  return text;
}

std::string explain_call(arb_context context, int32_t op, const void* args) {
  return explain_text([&](char* buffer, size_t capacity, size_t* length) {
    return arb_explain(context, op, args, buffer, capacity, length);
  });
}

class Context {
 public:
  Context(std::optional<std::string> config_path, std::optional<std::string> config_toml) {
    arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
    if (config_path) options.config_path = config_path->c_str();
    if (config_toml) options.config_toml = config_toml->c_str();
    arb_status status;
    {
      nb::gil_scoped_release release;  // plugin loading and probes take milliseconds
      status = arb_context_create(&options, &context_);
    }
    if (status != ARB_OK) raise_status(status);
  }
  ~Context() { close(); }

  void close() {
    if (context_ == nullptr) return;
    nb::gil_scoped_release release;  // waits for outstanding device work
    arb_context_destroy(context_);
    context_ = nullptr;
  }

  arb_context handle() const {
    if (context_ == nullptr) raise_error(ARB_ERR_INVALID_ARGUMENT, "this arbiter context is closed");
    return context_;
  }

  // Each operation takes `bf16`, a mask of the operands (bit i: the i-th, in argument order) that
  // are NumPy bfloat16 arrays passed as uint16 views, to be read as bfloat16.
  //
  // D = act(alpha op(A) op(B) + beta C + bias). Transposed views of A and B become trans_a /
  // trans_b; other views the ABI cannot express raise _NeedsCopy. With `explain`, returns the
  // report instead of running.
  std::optional<std::string> gemm(const nb::ndarray<nb::ro>& a, const nb::ndarray<nb::ro>& b, const Input& c,
                                  const Input& bias, const Output& d, int32_t activation, float alpha, float beta,
                                  uintptr_t stream, uint32_t bf16, bool explain) {
    const arb_context context = handle();
    Operand oa, ob, oc, obias, od;
    make_operand(a, "a", bf16 & 1, oa);
    make_operand(b, "b", bf16 & 2, ob);
    if (c) make_operand(*c, "c", bf16 & 4, oc);
    if (bias) make_operand(*bias, "bias", bf16 & 8, obias);
    make_operand(d, "out", bf16 & 16, od);
    arb_gemm_args args = ARB_GEMM_ARGS_INIT;
    for (auto [operand, flag, name] : {std::tuple{&oa, &args.trans_a, "a"}, std::tuple{&ob, &args.trans_b, "b"}}) {
      switch (matrix_layout(*operand)) {
        case Layout::as_is: break;
        case Layout::transposed: transpose(*operand); *flag = 1; break;
        case Layout::needs_copy: needs_copy(name);
      }
    }
    if (c && matrix_layout(oc) != Layout::as_is) needs_copy("c");
    if (bias && rows_layout(obias) != Layout::as_is) needs_copy("bias");
    args.a = oa.get();
    args.b = ob.get();
    args.c = oc.get();
    args.bias = obias.get();
    args.d = od.get();
    args.activation = activation;
    args.alpha = alpha;
    args.beta = beta;
    if (explain) return explain_call(context, ARB_OP_GEMM, &args);
    call([&] { return arb_gemm(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // y = x / sqrt(mean(x^2) + eps) * weight; with a residual, x += residual first (in place).
  std::optional<std::string> rmsnorm(const nb::ndarray<nb::ro>& x, const Input& residual, const nb::ndarray<nb::ro>& weight,
                                     const Output& y, float eps, uintptr_t stream, uint32_t bf16, bool explain) {
    const arb_context context = handle();
    Operand ox, oresidual, oweight, oy;
    make_operand(x, "x", bf16 & 1, ox);
    if (residual) make_operand(*residual, "residual", bf16 & 2, oresidual);
    make_operand(weight, "weight", bf16 & 4, oweight);
    make_operand(y, "out", bf16 & 8, oy);
    if (rows_layout(ox) != Layout::as_is) needs_copy("x");
    if (residual && rows_layout(oresidual) != Layout::as_is) needs_copy("residual");
    if (rows_layout(oweight) != Layout::as_is) needs_copy("weight");
    arb_rmsnorm_args args = ARB_RMSNORM_ARGS_INIT;
    args.x = ox.get();
    args.residual = oresidual.get();
    args.weight = oweight.get();
    args.y = oy.get();
    args.eps = eps;
    if (explain) return explain_call(context, ARB_OP_RMSNORM, &args);
    call([&] { return arb_rmsnorm(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  std::optional<std::string> softmax(const nb::ndarray<nb::ro>& x, const Output& y, uintptr_t stream, uint32_t bf16,
                                     bool explain) {
    const arb_context context = handle();
    Operand ox, oy;
    make_operand(x, "x", bf16 & 1, ox);
    make_operand(y, "out", bf16 & 2, oy);
    if (rows_layout(ox) != Layout::as_is) needs_copy("x");
    arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
    args.x = ox.get();
    args.y = oy.get();
    if (explain) return explain_call(context, ARB_OP_SOFTMAX, &args);
    call([&] { return arb_softmax(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  std::string explain_problem(const std::string& problem) {
    const arb_context context = handle();
    return explain_text([&](char* buffer, size_t capacity, size_t* length) {
      return arb_explain_problem(context, problem.c_str(), buffer, capacity, length);
    });
  }

  nb::list plugins() { return plugin_list(handle()); }

  std::string verify(const std::string& problem, const std::optional<std::string>& kernel, bool full) {
    return verify_report(handle(), problem, kernel, full);
  }

  std::string tune(const std::optional<std::vector<std::string>>& problems, const std::optional<std::string>& suite,
                   const std::optional<std::string>& table, nb::object progress) {
    return tune_report(handle(), problems, suite, table, std::move(progress));
  }

 private:
  // Runs an operation without the GIL: other Python threads go on while a kernel runs.
  template <typename Call>
  void call(Call&& run) {
    arb_status status;
    {
      nb::gil_scoped_release release;
      status = run();
    }
    if (status != ARB_OK) raise_status(status);
  }

  arb_context context_ = nullptr;
};

}  // namespace
}  // namespace arbiter::python

NB_MODULE(_arbiter, m) {
  using arbiter::python::Context;
  m.doc() = "arbiter's C ABI for Python (use the arbiter package, not this module)";
  m.def("abi_version", &arb_abi_version);
  m.def("library_version", [] { return std::string(arb_library_version()); });
  m.attr("ABI_VERSION_MAJOR") = ARB_ABI_VERSION_MAJOR;
  m.attr("ABI_VERSION_MINOR") = ARB_ABI_VERSION_MINOR;

  nb::class_<Context>(m, "_Context")
      .def(nb::init<std::optional<std::string>, std::optional<std::string>>(), "config_path"_a.none(),
           "config_toml"_a.none())
      .def("close", &Context::close)
      .def("gemm", &Context::gemm, "a"_a, "b"_a, "c"_a.none(), "bias"_a.none(), "d"_a, "activation"_a, "alpha"_a,
           "beta"_a, "stream"_a, "bf16"_a, "explain"_a)
      .def("rmsnorm", &Context::rmsnorm, "x"_a, "residual"_a.none(), "weight"_a, "y"_a, "eps"_a, "stream"_a, "bf16"_a,
           "explain"_a)
      .def("softmax", &Context::softmax, "x"_a, "y"_a, "stream"_a, "bf16"_a, "explain"_a)
      .def("explain_problem", &Context::explain_problem, "problem"_a)
      .def("plugins", &Context::plugins)
      .def("verify", &Context::verify, "problem"_a, "kernel"_a.none(), "full"_a)
      .def("tune", &Context::tune, "problems"_a.none(), "suite"_a.none(), "table"_a.none(), "progress"_a.none());
}
