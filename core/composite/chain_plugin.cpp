#include "composite/chain_plugin.hpp"

#include "common/failure.hpp"
#include "plugin/plugin_loader.hpp"
#include "problem/op_table.hpp"
#include "problem/operand_fields.hpp"
#include "problem/problem_text.hpp"
#include "version.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>

namespace arbiter {
namespace {

// A message into a plugin-style buffer, truncated and terminated.
void write_message(char* buffer, size_t capacity, const std::string& text) {
  if (buffer == nullptr || capacity == 0) return;
  std::snprintf(buffer, capacity, "%s", text.c_str());
}

}  // namespace

ChainKernels::ChainKernels(std::function<void(const Call&, void*)> run_step,
                           std::function<std::string(const arb_problem&)> runnable,
                           std::function<Device&(int32_t)> device_of, bool has_cuda)
    : run_step_(std::move(run_step)), runnable_(std::move(runnable)), device_of_(std::move(device_of)),
      has_cuda_(has_cuda) {}

std::unique_ptr<PluginRecord> ChainKernels::plugin_record() {
  auto record = std::make_unique<PluginRecord>();
  record->path = builtin_plugin_path();
  record->origin = "built-in";
  record->trust = ARB_PLUGIN_TRUST_HOST;
  record->state = PluginState::loaded;
  record->name = "chain";
  record->version = ARBITER_VERSION_STRING;
  record->description = "composite ops (the MLP block, the attention block's input) as the chain of their single-op calls, each dispatched";
  record->abi_major = ARB_PLUGIN_ABI_MAJOR;
  record->abi_minor = record->agreed_minor = ARB_PLUGIN_ABI_MINOR;
  record->provenance = ARB_PROVENANCE_HAND_TUNED;
  // Below the plugins' kernels in the heuristic order: untuned dispatch prefers a fused kernel
  // that supports the problem; the tuner races both.
  record->own_priority = record->priority = 1;
  for (const Op* op : all_ops()) {
    if (!op->composite()) continue;
    for (const int32_t device_type : {int32_t{kDLCPU}, int32_t{kDLCUDA}}) {
      if (device_type == kDLCUDA && !has_cuda_) continue;
      entries_.push_back(std::make_unique<Entry>(Entry{this, op}));
      KernelRecord kernel;
      kernel.name = fmt::format("chain.{}{}", op->name(), device_type == kDLCUDA ? "_cuda" : "");
      kernel.abi.struct_size = sizeof kernel.abi;
      kernel.abi.name = names_.emplace_back(kernel.name.substr(6)).c_str();
      kernel.abi.op = op->code();
      kernel.abi.device_type = device_type;
      kernel.abi.provenance = ARB_PROVENANCE_HAND_TUNED;
      kernel.abi.ctx = entries_.back().get();
      kernel.abi.supports = &ChainKernels::supports;
      kernel.abi.workspace_size = &ChainKernels::workspace_size;
      kernel.abi.launch = &ChainKernels::launch;
      kernel.provenance = ARB_PROVENANCE_HAND_TUNED;
      kernel.plugin = record.get();
      record->kernels.push_back(std::move(kernel));
    }
  }
  return record;
}

int32_t ChainKernels::supports(void* ctx, const arb_problem* problem, char* why, size_t capacity) {
  const auto& entry = *static_cast<const Entry*>(ctx);
  if (problem == nullptr || problem->op != entry.op->code()) {
    write_message(why, capacity, "not this op");
    return 0;
  }
  if (entry.op->chain_bytes(*problem) == SIZE_MAX) {
    write_message(why, capacity, "its intermediates would exceed the address space");
    return 0;
  }
  // Each step must have a kernel (the CUDA plugins have no fallback for every shape). The
  // steps as a call of this problem's alignment class would make them.
  const arb_operands nominal = nominal_operands(problem->alignment);
  std::array<Call, Op::kMaxChainSteps> steps;
  const int count = entry.op->chain_steps(*problem, nominal, reinterpret_cast<void*>(uintptr_t{1} << 48), steps.data());
  for (int s = 0; s < count; ++s)
    if (std::string no = entry.owner->runnable_(steps[static_cast<size_t>(s)].problem); !no.empty()) {
      write_message(why, capacity, fmt::format("step {} ({}): {}", s + 1, problem_key(steps[static_cast<size_t>(s)].problem), no));
      return 0;
    }
  return 1;
}

// The chain takes no workspace from the host: its intermediates are in its own pool.
arb_status ChainKernels::workspace_size(void*, const arb_problem*, size_t* bytes) {
  *bytes = 0;
  return ARB_OK;
}

arb_status ChainKernels::launch(void* ctx, const arb_problem* problem, const arb_operands* operands, void*, size_t,
                                void* stream, char* err, size_t err_capacity) {
  const auto& entry = *static_cast<const Entry*>(ctx);
  try {
    entry.owner->run_chain(*entry.op, *problem, *operands, stream);
    return ARB_OK;
  } catch (const Failure& f) {
    write_message(err, err_capacity, fmt::format("a step of the chain failed: {}", f.what()));
    return f.status();
  } catch (const std::exception& e) {
    write_message(err, err_capacity, fmt::format("a step of the chain failed: {}", e.what()));
    return ARB_ERR_INTERNAL;
  }
}

void ChainKernels::run_chain(const Op& op, const arb_problem& problem, const arb_operands& operands, void* stream) {
  const size_t bytes = op.chain_bytes(problem);
  void* intermediates = problem.device_type == kDLCPU
                            ? intermediates_.host(bytes)
                            : intermediates_.device(device_of_(problem.device_type), bytes, stream);
  std::array<Call, Op::kMaxChainSteps> steps;
  const int count = op.chain_steps(problem, operands, intermediates, steps.data());
  for (int i = 0; i < count; ++i) run_step_(steps[static_cast<size_t>(i)], stream);
}

}  // namespace arbiter
