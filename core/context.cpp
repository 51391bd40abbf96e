#include "context.hpp"

#include "common/failure.hpp"
#include "common/log.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/op_table.hpp"
#include "problem/operand_fields.hpp"
#include "problem/problem.hpp"
#include "table/table_file.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>

namespace arbiter {
namespace {

// The device that serves CUDA problems, per cuda.device.
std::unique_ptr<Device> make_cuda_for(const CudaConfig& config, std::string* why) {
  switch (config.device) {
    case CudaDeviceKind::emulated: return make_emulated_cuda_device(why);
    case CudaDeviceKind::off: *why = "no CUDA device: cuda.device is \"off\""; return nullptr;
    default: return make_cuda_device(0, why);
  }
}

// The plugins compiled into libarbiter besides the oracle: the composite ops' chains.
std::vector<std::unique_ptr<PluginRecord>> built_in_plugins(ChainKernels& chains) {
  std::vector<std::unique_ptr<PluginRecord>> plugins;
  plugins.push_back(chains.plugin_record());
  return plugins;
}

}  // namespace

Context::Context(Config config, std::function<void(const arb_problem&, const TuneResult&)> on_tuned)
    : config_(std::move(config)),
      cpu_device_(adopt(make_cpu_device(), devices_.cpu)),
      cuda_device_(adopt(make_cuda_for(config_.cuda, &devices_.cuda_unavailable), devices_.cuda)),
      chains_([this](const Call& step, void* stream) { run(step.problem, step.operands, stream); },
              [this](const arb_problem& step) { return runnable(step); },
              [this](int32_t device_type) -> Device& { return devices_.of(device_type); }, devices_.cuda != nullptr),
      registry_(config_.plugins, config_.cuda.device == CudaDeviceKind::emulated, built_in_plugins(chains_)),
      gate_(devices_, registry_, config_.verify),
      tuner_(devices_, registry_, gate_, config_.tune),
      dispatcher_(registry_, config_.dispatch, services(std::move(on_tuned))),
      shadow_(devices_, registry_),
      shadow_one_in_(config_.verify.shadow_rate()) {
  for (const OverrideRule& rule : config_.dispatch.overrides)
    if (registry_.find(rule.kernel) == nullptr)
      logger().warn("config {}: override names kernel '{}', which is not loaded", rule.origin, rule.kernel);
}

DispatchServices Context::services(std::function<void(const arb_problem&, const TuneResult&)> on_tuned) {
  // Runs before dispatcher_ is built: the table is loaded here, once.
  if (!config_.table.path.empty()) {
    try {
      table_ = TableIndex::load(config_.table.path, config_.table.max_file_bytes(), devices_, registry_, gate_);
    } catch (const Failure& e) {
      table_error_ = e.what();
      logger().error("tuning table unusable, continuing without it: {}", table_error_);
    }
  }
  DispatchServices s;
  s.gate = &gate_;
  s.table = table_.get();
  s.tuner = &tuner_;
  s.policy = config_.table.policy;
  s.first_calls_checked = config_.verify.first_calls_checked;
  s.shadow_sampled = config_.verify.shadow_rate() != 0;
  s.devices = &devices_;
  s.on_tuned = std::move(on_tuned);
  // The dispatcher adds its results to the index itself; it only needs the file written.
  if (table_ != nullptr) s.persist = [this](const TableEntry& entry) { write_entry(entry); };
  return s;
}

Context::~Context() {
  // ABI rule 10 (docs/architecture.md): plugins are unloaded only after their outstanding work is done.
  for (Device* d : {devices_.cpu, devices_.cuda}) {
    if (d == nullptr) continue;
    try {
      d->synchronize_all();
    } catch (const std::exception& e) {
      logger().error("context destroyed with a device error pending: {}", e.what());
    }
  }
}

void Context::record(const TableEntry& entry) {
  write_entry(entry);
  if (table_ == nullptr) return;
  if (const KernelRecord* kernel = registry_.find(entry.kernel)) table_->add(entry, *kernel);
}

void Context::write_entry(const TableEntry& entry) {
  if (config_.table.path.empty()) fail(ARB_ERR_TABLE, "no tuning table is configured (table.path)");
  record_in_file(config_.table.path, entry);
}

void Context::record_in_file(const std::string& path, const TableEntry& entry) {
  const Device* device = nullptr;
  for (const Device* d : {devices_.cpu, devices_.cuda})
    if (d != nullptr && d->fingerprint().id() == entry.device) device = d;
  if (device == nullptr) fail(ARB_ERR_TABLE, "the entry's device " + entry.device + " is not this machine's");
  const DeviceFingerprint fingerprint = device->fingerprint();
  update_table_file(
      path, [&](TuningTable& table) { table.put(entry, fingerprint); }, config_.table.max_file_bytes());
}

void Context::run_attended(const Selection& selection, const arb_problem& problem, const arb_operands& operands,
                           void* stream) {
  if (check_due(selection)) return run_checked(selection, problem, operands, stream);
  kernel_launch(*selection.kernel, problem, operands, workspace(problem, selection.workspace_bytes, stream),
                selection.workspace_bytes, stream);
}

void Context::run_checked(const Selection& selection, const arb_problem& problem, const arb_operands& operands,
                          void* stream) {
  const std::unique_ptr<ShadowCapture> check = shadow_.capture(*selection.kernel, problem, operands, stream);
  kernel_launch(*selection.kernel, problem, operands, workspace(problem, selection.workspace_bytes, stream),
                selection.workspace_bytes, stream);
  if (check) judge(*check, selection, problem, operands, stream);
}

void Context::judge(const ShadowCapture& check, const Selection& selection, const arb_problem& problem,
                    const arb_operands& operands, void* stream) {
  const ShadowOutcome outcome = shadow_.judge(check, *selection.kernel, problem, operands, stream);
  if (outcome.state != ShadowOutcome::State::mismatched) return;
  quarantine(*selection.kernel, problem, outcome.detail);
  run(problem, operands, stream);  // the next choice (the check restored what the call reads)
}

void Context::quarantine(const KernelRecord& kernel, const arb_problem& problem, const std::string& reason) {
  if (!gate_.quarantine(kernel, reason)) {  // another thread was first; make sure its choice is gone
    if (dispatcher_.select(problem).kernel == &kernel) dispatcher_.forget_choices();
    return;
  }
  size_t marked = 0;
  if (table_ != nullptr) {
    for (const TableEntry& entry : table_->revoke(kernel, reason)) {
      try {
        write_entry(entry);
        ++marked;
      } catch (const std::exception& e) {
        logger().error("could not mark the tuning-table entry '{}' of {} failed: {}", entry.key, kernel.name, e.what());
      }
    }
  }
  dispatcher_.forget_choices();
  logger().error("kernel {} quarantined: a shadow check found it wrong: {}; it is refused from now on and dispatch "
                 "falls back to the next verified kernel{}",
                 kernel.name, reason, marked ? fmt::format("; {} tuning-table entries marked failed", marked) : "");
}

std::string Context::runnable(const arb_problem& problem) const {
  for (const KernelRecord* kernel : registry_.candidates(problem.op))
    if (kernel->abi.device_type == problem.device_type && kernel_supports(*kernel, problem, nullptr)) return "";
  return "no loaded kernel supports it";
}

std::string Context::explain(const arb_problem& problem, const arb_operands* operands) {
  std::string out = dispatcher_.explain(problem);
  const Op* op = find_op(problem.op);
  if (op == nullptr || !op->composite()) return out;
  const arb_operands nominal = nominal_operands(problem.alignment);
  if (operands == nullptr) operands = &nominal;
  std::array<Call, Op::kMaxChainSteps> steps;
  // The chain's intermediates are 256-byte aligned (its workspace pool): any such address.
  const int count = op->chain_steps(problem, *operands, reinterpret_cast<void*>(uintptr_t{1} << 48), steps.data());
  out += fmt::format("the chain (chain.{}) runs {} calls, each dispatched as its own:\n", op->name(), count);
  for (int i = 0; i < count; ++i) {
    const arb_problem& step = steps[static_cast<size_t>(i)].problem;
    const Decision decision = dispatcher_.decide(step, Dispatcher::Mode::explain);
    out += fmt::format("  {}. {}: {}\n", i + 1, problem_key(step),
                       decision.kernel != nullptr ? decision.kernel->name + " (" + decision.rule + ")"
                                                  : "none: " + decision.failure);
  }
  return out;
}

void Context::run_kernel(const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands,
                         void* stream) {
  std::string why;
  if (kernel.abi.op != problem.op || kernel.abi.device_type != problem.device_type)
    fail(ARB_ERR_UNSUPPORTED, "kernel " + kernel.name + " does not run this op on this device");
  if (!kernel_supports(kernel, problem, &why))
    fail(ARB_ERR_UNSUPPORTED, "kernel " + kernel.name + " refuses " + problem_key(problem) + ": " + why);
  const size_t bytes = kernel_workspace_bytes(kernel, problem);
  kernel_launch_watched(kernel, problem, operands, workspace(problem, bytes, stream), bytes, stream);
}

}  // namespace arbiter
