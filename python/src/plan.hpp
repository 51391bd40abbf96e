// A plan from Python: arb_plan_create on the arguments of one call, then runs on new tensors.
// arb_plan_run takes only addresses, so each run first checks here what the C plan cannot see:
// that every tensor has the plan's dtype, device, shape and strides (and is given as the same
// view: a transposed GEMM operand stays transposed), and that the plan uses exactly the optional
// tensors given. The C run then checks presence, alignment and overlaps.
#pragma once

#include "calls.hpp"
#include "lifetime.hpp"

#include <arbiter/arbiter.h>
#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>

namespace arbiter::python {

class Plan {
 public:
  // arb_plan_create(op, args) with the context's lifetime held; `operands` are the tensors `args`
  // points to (their layouts are the plan's).
  static Plan* create(std::shared_ptr<ContextState> state, int32_t op, const void* args, const CallOperands& operands);
  ~Plan() { close(); }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  void close();
  std::string explain();

  // One run each, on the same arguments (and bf16 masks) as Context's operations.
  void gemm(const nb::ndarray<nb::ro>& a, const nb::ndarray<nb::ro>& b, const Input& c, const Input& bias,
            const Output& d, uintptr_t stream, uint32_t bf16);
  void rmsnorm(const nb::ndarray<nb::ro>& x, const Input& residual, const nb::ndarray<nb::ro>& weight,
               const Output& y, uintptr_t stream, uint32_t bf16);
  void softmax(const nb::ndarray<nb::ro>& x, const Output& y, uintptr_t stream, uint32_t bf16);
  void swiglu(const nb::ndarray<nb::ro>& gate, const Input& up, const Output& y, uintptr_t stream, uint32_t bf16);
  // x rotated in place. arb_plan_run reads no positions; CPU ones are checked here against the
  // plan's max_position, as arb_rope checks them (device ones are the caller's to keep in range).
  void rope(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& positions, uintptr_t stream, uint32_t bf16);
  void attention(const nb::ndarray<nb::ro>& q, const nb::ndarray<nb::ro>& k, const nb::ndarray<nb::ro>& v,
                 const Output& out, uintptr_t stream, uint32_t bf16);
  // up absent exactly when the plan was made with the fused gate/up weight (the library takes
  // up from gate's address at each run).
  void mlp(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight, const nb::ndarray<nb::ro>& gate,
           const Input& up, const nb::ndarray<nb::ro>& down, const Output& out, uintptr_t stream, uint32_t bf16);
  // CPU positions checked against the plan's max_position, as rope's (arb_plan_run reads none).
  void qkv(const nb::ndarray<nb::ro>& x, const nb::ndarray<nb::ro>& norm_weight, const nb::ndarray<nb::ro>& weight,
           const nb::ndarray<nb::ro>& positions, const Output& out, uintptr_t stream, uint32_t bf16);

  // A gemm planned with c the same memory as out (beta != 0, updated in place).
  bool in_place() const { return in_place_; }

 private:
  Plan(std::shared_ptr<ContextState> state, int32_t op, const CallOperands& operands);

  // One tensor as the plan was made with it.
  struct Layout {
    bool present = false;
    DLDataType dtype{};
    DLDevice device{};
    int ndim = 0;
    int64_t shape[kMaxDims]{};
    int64_t strides[kMaxDims]{};
  };

  void expect_op(int32_t op, const char* method) const;
  // Raises arbiter.InvalidArgumentError (DTypeError for a dtype) naming the first tensor of
  // `given` that differs from the plan's; else fills `data` with their addresses.
  void check(const CallOperands& given, arb_plan_operands& data) const;
  void run(const arb_plan_operands& data, uintptr_t stream);
  // rope and qkv: every CPU position in [0, max_position_), else arbiter.InvalidArgumentError.
  void check_positions(const Operand& positions) const;
  // Calls `use(plan_)` without the GIL, the context and the plan held open until it returns;
  // raises the failure it returns, or that the plan or its context is closed.
  template <typename Use>
  void with_open_plan(Use&& use) {
    arb_status status = ARB_OK;
    bool open = false, context_open = false;
    {
      nb::gil_scoped_release release;
      std::shared_lock<std::shared_mutex> context_lock(state_->lifetime);
      std::shared_lock<std::shared_mutex> plan_lock(running_);
      open = plan_ != nullptr;
      context_open = state_->context != nullptr;
      if (open) status = use(plan_);
    }
    if (!open) refuse_closed(context_open);
    if (status != ARB_OK) raise_status(status);
  }
  [[noreturn]] static void refuse_closed(bool context_open);

  std::shared_ptr<ContextState> state_;  // outlives the context's Python object: a closed one is refused
  int32_t op_;
  Layout layouts_[kMaxCallOperands];
  int32_t trans_a_ = 0, trans_b_ = 0;
  bool in_place_ = false;
  int64_t max_position_ = 0;  // rope's and qkv's
  // Runs and explain hold state_->lifetime, then running_, shared; close takes running_ alone (not the
  // context's lock: a plan may be closed, or collected, inside a tune progress callback of its context).
  std::shared_mutex running_;
  arb_plan plan_ = nullptr;  // nulled by close (running_ alone) or the context's close (lifetime alone), each under plans_mutex
};

}  // namespace arbiter::python
