// The chains of the composite ops (docs/architecture.md, "Composite ops"): for each op whose
// Op::chain_bytes() is non-zero, a kernel "chain.<op>" (and "chain.<op>_cuda" for a CUDA
// device) that computes the op as the single-op calls of Op::chain_steps(), each dispatched
// through the context as the application's own call would be: selected, tuned, gated and
// shadow-checked for its own problem. The chain is a candidate like any fused kernel, so the
// tuner races the two and the table records the winner per shape.
//
// Built into libarbiter as a plugin record of its own (trust ARB_PLUGIN_TRUST_HOST: the chain
// adds no code of a plugin's, so it is not gated itself; `arbiter verify` still runs it through
// the gate). Its intermediates live in a workspace pool of its own: the steps take the
// context's, which a thread holds one buffer of at a time.
#pragma once

#include "device/device.hpp"
#include "device/workspace_pool.hpp"
#include "plugin/plugin_record.hpp"
#include "problem/op.hpp"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace arbiter {

class ChainKernels {
 public:
  // run_step dispatches one call (Context::run); runnable says why no loaded kernel supports a
  // step's problem ("" when one does); device_of gives the device of a device type (for the
  // intermediates of a CUDA chain); has_cuda: register the CUDA chains too.
  ChainKernels(std::function<void(const Call& step, void* stream)> run_step,
               std::function<std::string(const arb_problem& step)> runnable,
               std::function<Device&(int32_t device_type)> device_of, bool has_cuda);
  ChainKernels(const ChainKernels&) = delete;
  ChainKernels& operator=(const ChainKernels&) = delete;

  // The plugin record "chain" with one kernel per composite op and device; the registry owns it
  // (the kernels point back here, which outlives the registry's use of them).
  std::unique_ptr<PluginRecord> plugin_record();

  // What a kernel's ctx points to.
  struct Entry {
    ChainKernels* owner;
    const Op* op;
  };

 private:
  static int32_t supports(void* ctx, const arb_problem* problem, char* why, size_t capacity);
  static arb_status workspace_size(void* ctx, const arb_problem* problem, size_t* bytes);
  static arb_status launch(void* ctx, const arb_problem* problem, const arb_operands* operands, void* workspace,
                           size_t workspace_bytes, void* stream, char* err, size_t err_capacity);
  void run_chain(const Op& op, const arb_problem& problem, const arb_operands& operands, void* stream);

  std::function<void(const Call&, void*)> run_step_;
  std::function<std::string(const arb_problem&)> runnable_;
  std::function<Device&(int32_t)> device_of_;
  bool has_cuda_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::deque<std::string> names_;  // the kernels' names (arb_kernel.name), never moved
  WorkspacePool intermediates_;
};

}  // namespace arbiter
