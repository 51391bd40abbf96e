// arbiter._arbiter: the extension module. A context object over arb_context and one method per
// C ABI entry point; tensors come in through DLPack (nanobind's ndarray takes anything with
// __dlpack__, and NumPy arrays), are described to the library as they lie in memory, and the
// GIL is released for every call into the library. Plans (plan.hpp) bind one call's arguments
// once. The Python layer (arbiter/context.py, plans.py) adds defaults, output allocation in the
// caller's framework and copies of views the ABI cannot take.
#include "calls.hpp"
#include "lifetime.hpp"
#include "plan.hpp"
#include "python_errors.hpp"
#include "reports.hpp"

#include <arbiter/arbiter.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>

namespace nb = nanobind;
using namespace nb::literals;

namespace arbiter::python {
namespace {

// A report written by one of the explain calls (arb_explain's buffer protocol).
template <typename Write>
std::string explain_text(Write write) {
  std::string text;
  if (arb_status status = read_report(write, text); status != ARB_OK) raise_status(status);
  return text;
}

std::string explain_call(arb_context context, int32_t op, const void* args) {
  return explain_text([&](char* buffer, size_t capacity, size_t* length) {
    return arb_explain(context, op, args, buffer, capacity, length);
  });
}

class Context {
 public:
  Context(std::optional<std::string> config_path, std::optional<std::string> config_toml)
      : state_(std::make_shared<ContextState>()) {
    arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
    if (config_path) options.config_path = config_path->c_str();
    if (config_toml) options.config_toml = config_toml->c_str();
    arb_status status;
    {
      nb::gil_scoped_release release;  // plugin loading and probes take milliseconds
      status = arb_context_create(&options, &state_->context);
    }
    if (status != ARB_OK) raise_status(status);
  }
  ~Context() {
    nb::gil_scoped_release release;
    state_->close();
  }

  // Destroys the context's open plans, then the context, once calls and runs in flight are done.
  void close() {
    refuse_close_inside_a_call();
    nb::gil_scoped_release release;  // waits for outstanding calls and device work
    state_->close();
  }

  // Each operation takes `bf16`, the mask of operands passed as uint16 views of NumPy bfloat16
  // arrays (calls.hpp).
  //
  // D = act(alpha op(A) op(B) + beta C + bias). Transposed views of A and B become trans_a /
  // trans_b; other views the ABI cannot express raise _NeedsCopy. With `explain`, returns the
  // report instead of running.
  std::optional<std::string> gemm(const nb::ndarray<nb::ro>& a, const nb::ndarray<nb::ro>& b, const Input& c,
                                  const Input& bias, const Output& d, int32_t activation, float alpha, float beta,
                                  uintptr_t stream, uint32_t bf16, bool explain) {
    CallOperands operands;
    describe_gemm(a, b, c, bias, d, bf16, operands);
    const arb_gemm_args args = gemm_args(operands, activation, alpha, beta);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_GEMM, &args);
    call([&](arb_context context) { return arb_gemm(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // y = x / sqrt(mean(x^2) + eps) * weight; with a residual, x += residual first (in place).
  std::optional<std::string> rmsnorm(const nb::ndarray<nb::ro>& x, const Input& residual, const nb::ndarray<nb::ro>& weight,
                                     const Output& y, float eps, uintptr_t stream, uint32_t bf16, bool explain) {
    CallOperands operands;
    describe_rmsnorm(x, residual, weight, y, bf16, operands);
    const arb_rmsnorm_args args = rmsnorm_args(operands, eps);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_RMSNORM, &args);
    call([&](arb_context context) { return arb_rmsnorm(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  std::optional<std::string> softmax(const nb::ndarray<nb::ro>& x, const Output& y, uintptr_t stream, uint32_t bf16,
                                     bool explain) {
    CallOperands operands;
    describe_softmax(x, y, bf16, operands);
    const arb_softmax_args args = softmax_args(operands);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_SOFTMAX, &args);
    call([&](arb_context context) { return arb_softmax(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // y = silu(gate) * up; without up, gate is one fused [..., 2n] gate/up output (first n columns
  // the gate, last n the up projection) and y is [..., n].
  std::optional<std::string> swiglu(const nb::ndarray<nb::ro>& gate, const Input& up, const Output& y, uintptr_t stream,
                                    uint32_t bf16, bool explain) {
    CallOperands operands;
    describe_swiglu(gate, up, y, bf16, operands);
    const arb_swiglu_args args = swiglu_args(operands);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_SWIGLU, &args);
    call([&](arb_context context) { return arb_swiglu(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // Rotates x [..., heads, head_dim] in place by the angles of int32 positions (x's leading shape);
  // layout: arb_rope_layout. The library checks CPU positions against max_position.
  std::optional<std::string> rope(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& positions, double theta,
                                  int64_t max_position, int32_t layout, uintptr_t stream, uint32_t bf16, bool explain) {
    CallOperands operands;
    describe_rope(x, positions, bf16, operands);
    const arb_rope_args args = rope_args(operands, theta, max_position, layout);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_ROPE, &args);
    call([&](arb_context context) { return arb_rope(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // out = softmax(scale q k^T) v per batch and head: q and out [batch, q_len, heads, head_dim],
  // k and v [batch, kv_len, kv_heads, head_dim]; scale 0 is 1 / sqrt(head_dim).
  std::optional<std::string> attention(const nb::ndarray<nb::ro>& q, const nb::ndarray<nb::ro>& k,
                                       const nb::ndarray<nb::ro>& v, const Output& out, bool causal, float scale,
                                       uintptr_t stream, uint32_t bf16, bool explain) {
    CallOperands operands;
    describe_attention(q, k, v, out, bf16, operands);
    const arb_attention_args args = attention_args(operands, causal, scale);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_ATTENTION, &args);
    call([&](arb_context context) { return arb_attention(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // The MLP block: out = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * norm_weight, the
  // weights as torch.nn.Linear stores them; without up, gate is the fused [2 inter, hidden]
  // gate/up weight.
  std::optional<std::string> mlp(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight,
                                 const nb::ndarray<nb::ro>& gate, const Input& up, const nb::ndarray<nb::ro>& down,
                                 const Output& out, float eps, uintptr_t stream, uint32_t bf16, bool explain) {
    CallOperands operands;
    describe_mlp(x, norm_weight, gate, up, down, out, bf16, operands);
    const arb_mlp_args args = mlp_args(operands, eps);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_MLP, &args);
    call([&](arb_context context) { return arb_mlp(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // The input of an attention block: out = rope(n W^T) on its q and k heads, n = rmsnorm(x) *
  // norm_weight, W the fused QKV weight as torch.nn.Linear stores it; out [..., heads + 2 kv_heads,
  // head_dim]; layout: arb_rope_layout. The library checks CPU positions against max_position.
  std::optional<std::string> qkv(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight,
                                 const nb::ndarray<nb::ro>& weight, const nb::ndarray<nb::ro>& positions,
                                 const Output& out, int64_t heads, int64_t kv_heads, double theta, int64_t max_position,
                                 int32_t layout, float eps, uintptr_t stream, uint32_t bf16, bool explain) {
    CallOperands operands;
    describe_qkv(x, norm_weight, weight, positions, out, bf16, operands);
    const arb_qkv_args args = qkv_args(operands, heads, kv_heads, theta, max_position, layout, eps);
    if (explain) return explain_call(ContextUse(*state_).get(), ARB_OP_QKV, &args);
    call([&](arb_context context) { return arb_qkv(context, &args, reinterpret_cast<void*>(stream)); });
    return std::nullopt;
  }

  // Plans: the same arguments as the operations, bound once (plan.hpp).
  Plan* plan_gemm(const nb::ndarray<nb::ro>& a, const nb::ndarray<nb::ro>& b, const Input& c, const Input& bias,
                  const Output& d, int32_t activation, float alpha, float beta, uint32_t bf16) {
    CallOperands operands;
    describe_gemm(a, b, c, bias, d, bf16, operands);
    const arb_gemm_args args = gemm_args(operands, activation, alpha, beta);
    return Plan::create(state_, ARB_OP_GEMM, &args, operands);
  }

  Plan* plan_rmsnorm(const nb::ndarray<nb::ro>& x, const Input& residual, const nb::ndarray<nb::ro>& weight,
                     const Output& y, float eps, uint32_t bf16) {
    CallOperands operands;
    describe_rmsnorm(x, residual, weight, y, bf16, operands);
    const arb_rmsnorm_args args = rmsnorm_args(operands, eps);
    return Plan::create(state_, ARB_OP_RMSNORM, &args, operands);
  }

  Plan* plan_softmax(const nb::ndarray<nb::ro>& x, const Output& y, uint32_t bf16) {
    CallOperands operands;
    describe_softmax(x, y, bf16, operands);
    const arb_softmax_args args = softmax_args(operands);
    return Plan::create(state_, ARB_OP_SOFTMAX, &args, operands);
  }

  // The library plans gate and up as two tensors (a fused gate, up absent, is refused as
  // unsupported): the Python layer passes a fused output's two halves as views.
  Plan* plan_swiglu(const nb::ndarray<nb::ro>& gate, const Input& up, const Output& y, uint32_t bf16) {
    CallOperands operands;
    describe_swiglu(gate, up, y, bf16, operands);
    const arb_swiglu_args args = swiglu_args(operands);
    return Plan::create(state_, ARB_OP_SWIGLU, &args, operands);
  }

  Plan* plan_rope(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& positions, double theta,
                  int64_t max_position, int32_t layout, uint32_t bf16) {
    CallOperands operands;
    describe_rope(x, positions, bf16, operands);
    const arb_rope_args args = rope_args(operands, theta, max_position, layout);
    return Plan::create(state_, ARB_OP_ROPE, &args, operands);
  }

  Plan* plan_attention(const nb::ndarray<nb::ro>& q, const nb::ndarray<nb::ro>& k, const nb::ndarray<nb::ro>& v,
                       const Output& out, bool causal, float scale, uint32_t bf16) {
    CallOperands operands;
    describe_attention(q, k, v, out, bf16, operands);
    const arb_attention_args args = attention_args(operands, causal, scale);
    return Plan::create(state_, ARB_OP_ATTENTION, &args, operands);
  }

  // Without up, gate is the fused gate/up weight: the library takes up from gate's address at
  // each run (ABI 1.8: a run takes mlp's six tensors).
  Plan* plan_mlp(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight, const nb::ndarray<nb::ro>& gate,
                 const Input& up, const nb::ndarray<nb::ro>& down, const Output& out, float eps, uint32_t bf16) {
    CallOperands operands;
    describe_mlp(x, norm_weight, gate, up, down, out, bf16, operands);
    const arb_mlp_args args = mlp_args(operands, eps);
    return Plan::create(state_, ARB_OP_MLP, &args, operands);
  }

  // The head counts, theta, max_position, layout and eps are the plan's; each run takes the five
  // tensors (x, norm_weight, weight, positions, out), its CPU positions checked as rope's.
  Plan* plan_qkv(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight,
                 const nb::ndarray<nb::ro>& weight, const nb::ndarray<nb::ro>& positions, const Output& out,
                 int64_t heads, int64_t kv_heads, double theta, int64_t max_position, int32_t layout, float eps,
                 uint32_t bf16) {
    CallOperands operands;
    describe_qkv(x, norm_weight, weight, positions, out, bf16, operands);
    const arb_qkv_args args = qkv_args(operands, heads, kv_heads, theta, max_position, layout, eps);
    return Plan::create(state_, ARB_OP_QKV, &args, operands);
  }

  std::string explain_problem(const std::string& problem) {
    const ContextUse context(*state_);
    return explain_text([&](char* buffer, size_t capacity, size_t* length) {
      return arb_explain_problem(context.get(), problem.c_str(), buffer, capacity, length);
    });
  }

  nb::list plugins() { return plugin_list(ContextUse(*state_).get()); }

  std::string verify(const std::string& problem, const std::optional<std::string>& kernel, bool full) {
    return verify_report(ContextUse(*state_).get(), problem, kernel, full);
  }

  std::string tune(const std::optional<std::vector<std::string>>& problems, const std::optional<std::string>& suite,
                   const std::optional<std::string>& table, nb::object progress) {
    return tune_report(ContextUse(*state_).get(), problems, suite, table, std::move(progress));
  }

 private:
  // Runs an operation without the GIL: other Python threads go on while a kernel runs. The
  // context stays open until the call returns.
  template <typename Call>
  void call(Call&& run) {
    arb_status status = ARB_OK;
    bool open = false;
    {
      nb::gil_scoped_release release;
      std::shared_lock<std::shared_mutex> lock(state_->lifetime);
      open = state_->context != nullptr;
      if (open) status = run(state_->context);
    }
    if (!open) raise_context_closed();
    if (status != ARB_OK) raise_status(status);
  }

  std::shared_ptr<ContextState> state_;  // shared with the plans, which refuse to run once it is closed
};

}  // namespace
}  // namespace arbiter::python

NB_MODULE(_arbiter, m) {
  using arbiter::python::Context;
  using arbiter::python::Plan;
  m.doc() = "arbiter's C ABI for Python (use the arbiter package, not this module)";
  m.def("abi_version", &arb_abi_version);
  m.def("library_version", [] { return std::string(arb_library_version()); });
  m.attr("ABI_VERSION_MAJOR") = ARB_ABI_VERSION_MAJOR;
  m.attr("ABI_VERSION_MINOR") = ARB_ABI_VERSION_MINOR;

  nb::class_<Plan>(m, "_Plan")
      .def("close", &Plan::close)
      .def("explain", &Plan::explain)
      .def_prop_ro("in_place", &Plan::in_place)
      .def("gemm", &Plan::gemm, "a"_a, "b"_a, "c"_a.none(), "bias"_a.none(), "d"_a, "stream"_a, "bf16"_a)
      .def("rmsnorm", &Plan::rmsnorm, "x"_a, "residual"_a.none(), "weight"_a, "y"_a, "stream"_a, "bf16"_a)
      .def("softmax", &Plan::softmax, "x"_a, "y"_a, "stream"_a, "bf16"_a)
      .def("swiglu", &Plan::swiglu, "gate"_a, "up"_a.none(), "y"_a, "stream"_a, "bf16"_a)
      .def("rope", &Plan::rope, "x"_a, "positions"_a, "stream"_a, "bf16"_a)
      .def("attention", &Plan::attention, "q"_a, "k"_a, "v"_a, "out"_a, "stream"_a, "bf16"_a)
      .def("mlp", &Plan::mlp, "x"_a, "norm_weight"_a, "gate"_a, "up"_a.none(), "down"_a, "out"_a, "stream"_a, "bf16"_a)
      .def("qkv", &Plan::qkv, "x"_a, "norm_weight"_a, "weight"_a, "positions"_a, "out"_a, "stream"_a, "bf16"_a);

  nb::class_<Context>(m, "_Context")
      .def(nb::init<std::optional<std::string>, std::optional<std::string>>(), "config_path"_a.none(),
           "config_toml"_a.none())
      .def("close", &Context::close)
      .def("gemm", &Context::gemm, "a"_a, "b"_a, "c"_a.none(), "bias"_a.none(), "d"_a, "activation"_a, "alpha"_a,
           "beta"_a, "stream"_a, "bf16"_a, "explain"_a)
      .def("rmsnorm", &Context::rmsnorm, "x"_a, "residual"_a.none(), "weight"_a, "y"_a, "eps"_a, "stream"_a, "bf16"_a,
           "explain"_a)
      .def("softmax", &Context::softmax, "x"_a, "y"_a, "stream"_a, "bf16"_a, "explain"_a)
      .def("swiglu", &Context::swiglu, "gate"_a, "up"_a.none(), "y"_a, "stream"_a, "bf16"_a, "explain"_a)
      .def("rope", &Context::rope, "x"_a, "positions"_a, "theta"_a, "max_position"_a, "layout"_a, "stream"_a, "bf16"_a,
           "explain"_a)
      .def("attention", &Context::attention, "q"_a, "k"_a, "v"_a, "out"_a, "causal"_a, "scale"_a, "stream"_a, "bf16"_a,
           "explain"_a)
      .def("mlp", &Context::mlp, "x"_a, "norm_weight"_a, "gate"_a, "up"_a.none(), "down"_a, "out"_a, "eps"_a,
           "stream"_a, "bf16"_a, "explain"_a)
      .def("qkv", &Context::qkv, "x"_a, "norm_weight"_a, "weight"_a, "positions"_a, "out"_a, "heads"_a, "kv_heads"_a,
           "theta"_a, "max_position"_a, "layout"_a, "eps"_a, "stream"_a, "bf16"_a, "explain"_a)
      // A plan keeps its context object alive (keep_alive<0, 1>): only an explicit close() ends it early.
      .def("plan_gemm", &Context::plan_gemm, "a"_a, "b"_a, "c"_a.none(), "bias"_a.none(), "d"_a, "activation"_a,
           "alpha"_a, "beta"_a, "bf16"_a, nb::rv_policy::take_ownership, nb::keep_alive<0, 1>())
      .def("plan_rmsnorm", &Context::plan_rmsnorm, "x"_a, "residual"_a.none(), "weight"_a, "y"_a, "eps"_a, "bf16"_a,
           nb::rv_policy::take_ownership, nb::keep_alive<0, 1>())
      .def("plan_softmax", &Context::plan_softmax, "x"_a, "y"_a, "bf16"_a, nb::rv_policy::take_ownership,
           nb::keep_alive<0, 1>())
      .def("plan_swiglu", &Context::plan_swiglu, "gate"_a, "up"_a.none(), "y"_a, "bf16"_a, nb::rv_policy::take_ownership,
           nb::keep_alive<0, 1>())
      .def("plan_rope", &Context::plan_rope, "x"_a, "positions"_a, "theta"_a, "max_position"_a, "layout"_a, "bf16"_a,
           nb::rv_policy::take_ownership, nb::keep_alive<0, 1>())
      .def("plan_attention", &Context::plan_attention, "q"_a, "k"_a, "v"_a, "out"_a, "causal"_a, "scale"_a, "bf16"_a,
           nb::rv_policy::take_ownership, nb::keep_alive<0, 1>())
      .def("plan_mlp", &Context::plan_mlp, "x"_a, "norm_weight"_a, "gate"_a, "up"_a.none(), "down"_a, "out"_a, "eps"_a,
           "bf16"_a, nb::rv_policy::take_ownership, nb::keep_alive<0, 1>())
      .def("plan_qkv", &Context::plan_qkv, "x"_a, "norm_weight"_a, "weight"_a, "positions"_a, "out"_a, "heads"_a,
           "kv_heads"_a, "theta"_a, "max_position"_a, "layout"_a, "eps"_a, "bf16"_a, nb::rv_policy::take_ownership,
           nb::keep_alive<0, 1>())
      .def("explain_problem", &Context::explain_problem, "problem"_a)
      .def("plugins", &Context::plugins)
      .def("verify", &Context::verify, "problem"_a, "kernel"_a.none(), "full"_a)
      .def("tune", &Context::tune, "problems"_a.none(), "suite"_a.none(), "table"_a.none(), "progress"_a.none());
}
