#include "plan.hpp"

#include "python_errors.hpp"

#include <string_view>
#include <utility>

namespace arbiter::python {
namespace {

std::string device_name(DLDevice device) {
  const char* type = device.device_type == kDLCPU       ? "cpu"
                     : device.device_type == kDLCUDA     ? "cuda"
                     : device.device_type == kDLCUDAHost ? "cuda_host"
                                                         : "device";
  return std::string(type) + ":" + std::to_string(device.device_id);
}

// "(8, 16)", in the caller's order: a transposed GEMM operand was stored swapped.
std::string tuple_text(const int64_t* values, int ndim, bool swapped) {
  std::string text = "(";
  for (int i = 0; i < ndim; ++i) {
    const int at = swapped && ndim == 2 ? 1 - i : i;
    text += std::to_string(values[at]);
    if (i + 1 < ndim || ndim == 1) text += ", ";
  }
  if (ndim == 1) text.resize(text.size() - 1);  // "(8,)"
  return text + ")";
}

[[noreturn]] void refuse(const std::string& message) {
  raise_error(ARB_ERR_INVALID_ARGUMENT, "plan.run: " + message);
}

}  // namespace

// A plan outlives neither its own close() nor its context's.
void Plan::refuse_closed(bool context_open) {
  raise_error(ARB_ERR_INVALID_ARGUMENT, context_open ? "this plan is closed"
                                                     : "this plan's arbiter context is closed (closing a context closes its plans)");
}

Plan::Plan(std::shared_ptr<ContextState> state, int32_t op, const CallOperands& operands)
    : state_(std::move(state)), op_(op), trans_a_(operands.trans_a), trans_b_(operands.trans_b) {
  for (int slot = 0; slot < kMaxCallOperands; ++slot) {
    const Operand& operand = operands.slots[slot];
    Layout& layout = layouts_[slot];
    layout.present = operand.present;
    if (!operand.present) continue;
    layout.dtype = operand.tensor.dtype;
    layout.device = operand.tensor.device;
    layout.ndim = operand.tensor.ndim;
    for (int i = 0; i < layout.ndim; ++i) {
      layout.shape[i] = operand.shape[i];
      layout.strides[i] = operand.strides[i];
    }
  }
  // The library plans c and d of the same memory as "in place" (c == d at every run).
  const Operand &c = operands.slots[2], &d = operands.slots[4];
  in_place_ = op == ARB_OP_GEMM && c.present && d.present &&
              static_cast<const char*>(c.tensor.data) + c.tensor.byte_offset ==
                  static_cast<const char*>(d.tensor.data) + d.tensor.byte_offset;
}

Plan* Plan::create(std::shared_ptr<ContextState> state, int32_t op, const void* args, const CallOperands& operands) {
  std::unique_ptr<Plan> plan(new Plan(std::move(state), op, operands));
  if (op == ARB_OP_ROPE) plan->max_position_ = static_cast<const arb_rope_args*>(args)->max_position;
  if (op == ARB_OP_QKV) plan->max_position_ = static_cast<const arb_qkv_args*>(args)->max_position;
  ContextState& context = *plan->state_;
  arb_status status = ARB_OK;
  bool open = false;
  {
    nb::gil_scoped_release release;  // choosing the kernel may verify and tune it: seconds
    std::shared_lock<std::shared_mutex> lock(context.lifetime);
    open = context.context != nullptr;
    if (open) {
      status = arb_plan_create(context.context, op, args, &plan->plan_);
      if (status == ARB_OK) {
        std::lock_guard<std::mutex> plans_lock(context.plans_mutex);
        context.plans.insert(&plan->plan_);
      }
    }
  }
  if (!open) raise_context_closed();
  if (status != ARB_OK) raise_status(status);
  return plan.release();
}

void Plan::close() {
  nb::gil_scoped_release release;  // waits for this plan's runs in flight
  std::unique_lock<std::shared_mutex> lock(running_);
  // The context's close destroys its plans under the same mutex: one of the two does it.
  std::lock_guard<std::mutex> plans_lock(state_->plans_mutex);
  if (plan_ == nullptr) return;
  state_->plans.erase(&plan_);
  arb_plan_destroy(plan_);
  plan_ = nullptr;
}

std::string Plan::explain() {
  std::string text;
  with_open_plan([&](arb_plan plan) {
    return read_report(
        [&](char* buffer, size_t capacity, size_t* length) { return arb_plan_explain(plan, buffer, capacity, length); },
        text);
  });
  return text;
}

void Plan::expect_op(int32_t op, const char* method) const {
  if (op != op_)
    raise_error(ARB_ERR_INVALID_ARGUMENT,
                std::string("plan.run: this is a ") + op_name(op_) + " plan, run with " + method + "'s arguments");
}

void Plan::gemm(const nb::ndarray<nb::ro>& a, const nb::ndarray<nb::ro>& b, const Input& c, const Input& bias,
                const Output& d, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_GEMM, "gemm");
  CallOperands given;
  describe_gemm(a, b, c, bias, d, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  run(data, stream);
}

void Plan::rmsnorm(const nb::ndarray<nb::ro>& x, const Input& residual, const nb::ndarray<nb::ro>& weight,
                   const Output& y, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_RMSNORM, "rmsnorm");
  CallOperands given;
  describe_rmsnorm(x, residual, weight, y, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  run(data, stream);
}

void Plan::softmax(const nb::ndarray<nb::ro>& x, const Output& y, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_SOFTMAX, "softmax");
  CallOperands given;
  describe_softmax(x, y, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  run(data, stream);
}

void Plan::swiglu(const nb::ndarray<nb::ro>& gate, const Input& up, const Output& y, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_SWIGLU, "swiglu");
  CallOperands given;
  describe_swiglu(gate, up, y, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  run(data, stream);
}

void Plan::rope(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& positions, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_ROPE, "rope");
  CallOperands given;
  describe_rope(x, positions, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  check_positions(given.slots[1]);
  run(data, stream);
}

void Plan::attention(const nb::ndarray<nb::ro>& q, const nb::ndarray<nb::ro>& k, const nb::ndarray<nb::ro>& v,
                     const Output& out, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_ATTENTION, "attention");
  CallOperands given;
  describe_attention(q, k, v, out, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  run(data, stream);
}

void Plan::mlp(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight, const nb::ndarray<nb::ro>& gate,
               const Input& up, const nb::ndarray<nb::ro>& down, const Output& out, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_MLP, "mlp");
  CallOperands given;
  describe_mlp(x, norm_weight, gate, up, down, out, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  run(data, stream);
}

void Plan::qkv(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight, const nb::ndarray<nb::ro>& weight,
               const nb::ndarray<nb::ro>& positions, const Output& out, uintptr_t stream, uint32_t bf16) {
  expect_op(ARB_OP_QKV, "qkv");
  CallOperands given;
  describe_qkv(x, norm_weight, weight, positions, out, bf16, given);
  arb_plan_operands data = ARB_PLAN_OPERANDS_INIT;
  check(given, data);
  check_positions(given.slots[3]);
  run(data, stream);
}

void Plan::check_positions(const Operand& positions) const {
  const DLTensor& t = positions.tensor;
  if (t.device.device_type != kDLCPU) return;
  int64_t count = 1;  // the plan's shape: the library checked its product
  for (int i = 0; i < t.ndim; ++i) count *= positions.shape[i];
  const auto* values = reinterpret_cast<const int32_t*>(static_cast<const char*>(t.data) + t.byte_offset);
  for (int64_t i = 0; i < count; ++i)
    if (values[i] < 0 || values[i] >= max_position_)
      refuse("positions[" + std::to_string(i) + "] = " + std::to_string(values[i]) + " is outside [0, max_position = " +
             std::to_string(max_position_) + ")");
}

void Plan::check(const CallOperands& given, arb_plan_operands& data) const {
  for (int slot = 0; slot < kMaxCallOperands; ++slot) {
    const Layout& plan = layouts_[slot];
    const Operand& operand = given.slots[slot];
    const std::string_view name = slot_name(op_, slot);
    if (operand.present != plan.present)
      refuse(plan.present ? "the plan was made with " + std::string(name) + ", and none was given"
                          : std::string(name) + " was given, but the plan was made without it");
    if (!plan.present) continue;
    const DLTensor& t = operand.tensor;
    if (t.dtype.code != plan.dtype.code || t.dtype.bits != plan.dtype.bits || t.dtype.lanes != plan.dtype.lanes)
      raise_dtype_error("plan.run: " + std::string(name) + " has dtype " + dtype_name(t.dtype) + ", but the plan was made for " +
                        dtype_name(plan.dtype));
    if (t.device.device_type != plan.device.device_type || t.device.device_id != plan.device.device_id)
      refuse(std::string(name) + " is on " + device_name(t.device) + ", but the plan was made for " + device_name(plan.device));
    // A GEMM operand given as a transposed view is planned as trans_a / trans_b: it must stay one.
    const bool planned_transposed = (slot == 0 && trans_a_) || (slot == 1 && trans_b_);
    const bool transposed = (slot == 0 && given.trans_a) || (slot == 1 && given.trans_b);
    if (op_ == ARB_OP_GEMM && transposed != planned_transposed)
      refuse(std::string(name) + (transposed ? " is a transposed view, but the plan was made with it stored row-major"
                                             : " is stored row-major, but the plan was made with it as a transposed view"));
    bool same_shape = t.ndim == plan.ndim;
    for (int i = 0; same_shape && i < plan.ndim; ++i) same_shape = operand.shape[i] == plan.shape[i];
    if (!same_shape)
      refuse(std::string(name) + " has shape " + tuple_text(operand.shape, t.ndim, transposed) + ", but the plan was made for " +
             tuple_text(plan.shape, plan.ndim, transposed));
    // The stride of a dimension of extent 1 is never used to address anything.
    for (int i = 0; i < plan.ndim; ++i)
      if (plan.shape[i] > 1 && operand.strides[i] != plan.strides[i])
        refuse(std::string(name) + " has strides " + tuple_text(operand.strides, t.ndim, transposed) +
               " (in elements), but the plan was made for " + tuple_text(plan.strides, plan.ndim, transposed) +
               ": a plan runs on tensors laid out as the ones it was made with");
    data.tensors[slot] = static_cast<char*>(t.data) + t.byte_offset;
  }
}

void Plan::run(const arb_plan_operands& data, uintptr_t stream) {
  with_open_plan([&](arb_plan plan) { return arb_plan_run(plan, &data, reinterpret_cast<void*>(stream)); });
}

}  // namespace arbiter::python
