// arbiter: header-only C++ layer over the application C ABI (arbiter.h).
// Errors become arbiter::Error exceptions; the context is an RAII, move-only object;
// View builds the DLTensor of a vector or row-major matrix over memory you own.
//
//   arbiter::Context ctx;                                   // embedded default config
//   std::vector<float> a(m * k), b(k * n), d(m * n);
//   auto A = arbiter::View::matrix(a.data(), m, k), B = ..., D = ...;
//   ctx.gemm(A, B, D);                                      // D = A * B
//   arbiter::Plan plan = ctx.plan_gemm(A, B, D);            // bound once (ABI 1.3)...
//   plan.run({a2.data(), b2.data(), nullptr, nullptr, d2.data()});  // ...run on new data
#pragma once

#include <arbiter/arbiter.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace arbiter {

class Error : public std::runtime_error {
 public:
  Error(arb_status status, const std::string& message)
      : std::runtime_error(std::string(arb_status_string(status)) + ": " + message), status_(status) {}
  arb_status status() const noexcept { return status_; }

 private:
  arb_status status_;
};

inline void check(arb_status status) {
  if (status != ARB_OK) throw Error(status, arb_last_error());
}

// A DLTensor over borrowed memory: a vector [n] or a row-major matrix [rows, cols] whose
// rows are `ld` elements apart. Keep the View alive while the call runs.
class View {
 public:
  static View vector(void* data, int64_t n, arb_dtype dtype = ARB_DTYPE_F32, DLDevice device = {kDLCPU, 0}) {
    View v(data, dtype, device);
    v.shape_[0] = n;
    v.strides_[0] = 1;
    v.tensor_.ndim = 1;
    return v;
  }
  static View matrix(void* data, int64_t rows, int64_t cols, int64_t ld = 0, arb_dtype dtype = ARB_DTYPE_F32,
                     DLDevice device = {kDLCPU, 0}) {
    View v(data, dtype, device);
    v.shape_[0] = rows;
    v.shape_[1] = cols;
    v.strides_[0] = ld > 0 ? ld : cols;
    v.strides_[1] = 1;
    v.tensor_.ndim = 2;
    return v;
  }
  // Up to 4 dimensions (rope's x [tokens, heads, head_dim], attention's [batch, tokens, heads,
  // head_dim]); strides in elements, empty for compact row-major.
  static View tensor(void* data, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides = {},
                     arb_dtype dtype = ARB_DTYPE_F32, DLDevice device = {kDLCPU, 0}) {
    if (shape.size() < 1 || shape.size() > kMaxDims || (strides.size() != 0 && strides.size() != shape.size()))
      throw std::invalid_argument("arbiter::View::tensor: 1 to 4 dimensions, and as many strides or none");
    View v(data, dtype, device);
    const int ndim = static_cast<int>(shape.size());
    std::copy(shape.begin(), shape.end(), v.shape_);
    int64_t step = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      v.strides_[i] = strides.size() != 0 ? strides.begin()[i] : step;
      step *= v.shape_[i];
    }
    v.tensor_.ndim = ndim;
    return v;
  }
  View(const View& other) : tensor_(other.tensor_) { adopt(other); }
  View& operator=(const View& other) {
    tensor_ = other.tensor_;
    adopt(other);
    return *this;
  }
  const DLTensor* get() const { return &tensor_; }
  operator const DLTensor*() const { return &tensor_; }

 private:
  View(void* data, arb_dtype dtype, DLDevice device) {
    tensor_.data = data;
    tensor_.device = device;
    tensor_.dtype = DLDataType{static_cast<uint8_t>(dtype == ARB_DTYPE_BF16 ? kDLBfloat : kDLFloat),
                               static_cast<uint8_t>(dtype == ARB_DTYPE_F32 ? 32 : 16), 1};
    tensor_.shape = shape_;
    tensor_.strides = strides_;
  }
  void adopt(const View& other) {  // shape and strides live inside the View itself
    std::copy(other.shape_, other.shape_ + kMaxDims, shape_);
    std::copy(other.strides_, other.strides_ + kMaxDims, strides_);
    tensor_.shape = shape_;
    tensor_.strides = strides_;
  }
  static constexpr size_t kMaxDims = 4;
  DLTensor tensor_{};
  int64_t shape_[kMaxDims] = {};
  int64_t strides_[kMaxDims] = {};
};

namespace detail {
// A report of the C ABI's explain calls: asks its length, then writes it.
template <typename Write>
std::string report(Write&& write) {
  size_t length = 0;
  arb_status status = write(nullptr, 0, &length);
  if (status != ARB_ERR_BUFFER_TOO_SMALL) check(status);
  std::string text(length, '\0');
  check(write(text.data(), text.size(), &length));
  text.resize(length > 0 ? length - 1 : 0);
  return text;
}
}  // namespace detail

// A problem bound once (arb_plan_create): run() takes the tensors' new addresses in the order
// of the op's args struct (gemm a, b, c, bias, d; rmsnorm x, residual, weight, y; softmax x,
// y; swiglu gate, up, y; rope x, positions; attention q, k, v, o; mlp x, norm_weight, gate, up,
// down, y (ABI 1.8); nullptr for one the plan does not use, as mlp's up with a fused gate/up
// weight). Move-only; destroy it before its Context.
class Plan {
 public:
  Plan(arb_context context, arb_op op, const void* args) { check(arb_plan_create(context, op, args, &plan_)); }
  Plan(Plan&& other) noexcept : plan_(std::exchange(other.plan_, nullptr)) {}
  Plan& operator=(Plan&& other) noexcept {
    std::swap(plan_, other.plan_);
    return *this;
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() { arb_plan_destroy(plan_); }

  arb_plan get() const { return plan_; }

  void run(const arb_plan_operands& operands, void* stream = nullptr) { check(arb_plan_run(plan_, &operands, stream)); }
  void run(std::initializer_list<void*> tensors, void* stream = nullptr) {
    if (tensors.size() > ARB_PLAN_MAX_TENSORS) throw Error(ARB_ERR_INVALID_ARGUMENT, "more tensors than a plan takes");
    arb_plan_operands operands = ARB_PLAN_OPERANDS_INIT;
    size_t i = 0;
    for (void* t : tensors) operands.tensors[i++] = t;
    run(operands, stream);
  }

  // What the plan runs and why.
  std::string explain() const {
    return detail::report([&](char* buffer, size_t capacity, size_t* length) {
      return arb_plan_explain(plan_, buffer, capacity, length);
    });
  }

 private:
  arb_plan plan_ = nullptr;
};

struct PluginInfo {
  std::string name, version, build_id, path, description, status, reason;
  int32_t provenance = 0, priority = 0;
  std::vector<std::string> kernels;
};

class Context {
 public:
  // The embedded default configuration.
  Context() { check(arb_context_create(nullptr, &context_)); }
  static Context from_file(const std::string& path) {
    arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
    options.config_path = path.c_str();
    return Context(options);
  }
  static Context from_toml(const std::string& toml) {
    arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
    options.config_toml = toml.c_str();
    return Context(options);
  }
  Context(Context&& other) noexcept : context_(std::exchange(other.context_, nullptr)) {}
  Context& operator=(Context&& other) noexcept {
    std::swap(context_, other.context_);
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { arb_context_destroy(context_); }

  arb_context get() const { return context_; }

  void gemm(const arb_gemm_args& args, void* stream = nullptr) { check(arb_gemm(context_, &args, stream)); }
  // D = act(alpha * A * B + bias): the common case, without C.
  void gemm(const View& a, const View& b, const View& d, float alpha = 1.0f,
            arb_activation activation = ARB_ACT_NONE, const View* bias = nullptr, void* stream = nullptr) {
    arb_gemm_args args = ARB_GEMM_ARGS_INIT;
    args.a = a;
    args.b = b;
    args.d = d;
    args.alpha = alpha;
    args.activation = activation;
    args.bias = bias ? bias->get() : nullptr;
    gemm(args, stream);
  }
  void rmsnorm(const View& x, const View& weight, const View& y, float eps = 1e-6f,
               const View* residual = nullptr, void* stream = nullptr) {
    arb_rmsnorm_args args = ARB_RMSNORM_ARGS_INIT;
    args.x = x;
    args.weight = weight;
    args.y = y;
    args.eps = eps;
    args.residual = residual ? residual->get() : nullptr;
    check(arb_rmsnorm(context_, &args, stream));
  }
  void softmax(const View& x, const View& y, void* stream = nullptr) {
    arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
    args.x = x;
    args.y = y;
    check(arb_softmax(context_, &args, stream));
  }
  // y = silu(gate) * up (ABI 1.4); without up, gate is one fused [..., 2n] gate/up output.
  void swiglu(const View& gate, const View* up, const View& y, void* stream = nullptr) {
    arb_swiglu_args args = ARB_SWIGLU_ARGS_INIT;
    args.gate = gate;
    args.up = up ? up->get() : nullptr;
    args.y = y;
    check(arb_swiglu(context_, &args, stream));
  }
  // Rotates x [..., heads, head_dim] in place by int32 positions (ABI 1.5).
  void rope(const View& x, const View& positions, double theta = 500000.0, int64_t max_position = 8192,
            arb_rope_layout layout = ARB_ROPE_SPLIT_HALF, void* stream = nullptr) {
    arb_rope_args args = ARB_ROPE_ARGS_INIT;
    args.x = x;
    args.positions = positions;
    args.theta = theta;
    args.max_position = max_position;
    args.layout = layout;
    check(arb_rope(context_, &args, stream));
  }
  // o = softmax(scale q k^T) v per batch and head (ABI 1.6): q and o [batch, q_len, heads,
  // head_dim], k and v [batch, kv_len, kv_heads, head_dim]; scale 0 is 1 / sqrt(head_dim).
  void attention(const View& q, const View& k, const View& v, const View& o, bool causal = false, float scale = 0.0f,
                 void* stream = nullptr) {
    arb_attention_args args = ARB_ATTENTION_ARGS_INIT;
    args.q = q;
    args.k = k;
    args.v = v;
    args.o = o;
    args.causal = causal ? 1 : 0;
    args.scale = scale;
    check(arb_attention(context_, &args, stream));
  }

  // Plans (ABI 1.3): the op's arguments bound once; see Plan.
  Plan plan(const arb_gemm_args& args) const { return Plan(context_, ARB_OP_GEMM, &args); }
  Plan plan(const arb_rmsnorm_args& args) const { return Plan(context_, ARB_OP_RMSNORM, &args); }
  Plan plan(const arb_softmax_args& args) const { return Plan(context_, ARB_OP_SOFTMAX, &args); }
  Plan plan(const arb_swiglu_args& args) const { return Plan(context_, ARB_OP_SWIGLU, &args); }
  Plan plan(const arb_rope_args& args) const { return Plan(context_, ARB_OP_ROPE, &args); }
  Plan plan(const arb_attention_args& args) const { return Plan(context_, ARB_OP_ATTENTION, &args); }
  Plan plan(const arb_mlp_args& args) const { return Plan(context_, ARB_OP_MLP, &args); }  // ABI 1.8
  Plan plan_gemm(const View& a, const View& b, const View& d, float alpha = 1.0f,
                 arb_activation activation = ARB_ACT_NONE, const View* bias = nullptr) const {
    arb_gemm_args args = ARB_GEMM_ARGS_INIT;
    args.a = a;
    args.b = b;
    args.d = d;
    args.alpha = alpha;
    args.activation = activation;
    args.bias = bias ? bias->get() : nullptr;
    return plan(args);
  }

  // Why a kernel is chosen for a problem in the problem syntax.
  std::string explain(const std::string& problem) const {
    return detail::report([&](char* buffer, size_t capacity, size_t* length) {
      return arb_explain_problem(context_, problem.c_str(), buffer, capacity, length);
    });
  }

  std::vector<PluginInfo> plugins() const {
    size_t count = 0;
    check(arb_plugin_count(context_, &count));
    std::vector<PluginInfo> result;
    for (size_t i = 0; i < count; ++i) {
      arb_plugin_info info = ARB_PLUGIN_INFO_INIT;
      check(arb_plugin_get_info(context_, i, &info));
      PluginInfo p{info.name, info.version, info.build_id, info.path, info.description, info.status,
                   info.reason, info.provenance, info.priority, {}};
      for (size_t k = 0; k < info.kernel_count; ++k) {
        arb_kernel_info kernel = ARB_KERNEL_INFO_INIT;
        check(arb_kernel_get_info(context_, i, k, &kernel));
        p.kernels.emplace_back(kernel.name);
      }
      result.push_back(std::move(p));
    }
    return result;
  }

 private:
  explicit Context(const arb_context_options& options) { check(arb_context_create(&options, &context_)); }
  arb_context context_ = nullptr;
};

}  // namespace arbiter
