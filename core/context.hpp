// One arbiter context: its configuration, device, the plugins it loaded, the verification
// gate, the tuning table and tuner, the dispatcher and the workspace. What arb_context
// points to.
#pragma once

#include "common/hot_path.hpp"
#include "composite/chain_plugin.hpp"
#include "config/config.hpp"
#include "device/device.hpp"
#include "device/workspace_pool.hpp"
#include "dispatch/dispatcher.hpp"
#include "plugin/kernel_call.hpp"
#include "plugin/kernel_registry.hpp"
#include "table/table_index.hpp"
#include "tune/tuner.hpp"
#include "verify/shadow_check.hpp"
#include "verify/verification_gate.hpp"

#include <memory>
#include <string>

namespace arbiter {

class Context {
 public:
  // on_tuned, if set, hears about every tuning the dispatcher runs (progress reports).
  explicit Context(Config config, std::function<void(const arb_problem&, const TuneResult&)> on_tuned = {});
  ~Context();  // waits for outstanding device work, then unloads the plugins
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Config& config() const { return config_; }
  const KernelRegistry& registry() const { return registry_; }
  Dispatcher& dispatcher() { return dispatcher_; }
  // The host CPU; devices() has the GPU too, when there is one.
  Device& device() { return *cpu_device_; }
  const Devices& devices() const { return devices_; }
  VerificationGate& gate() { return gate_; }
  Tuner& tuner() { return tuner_; }
  // The table as this context uses it; nullptr without table.path or if it was unusable.
  TableIndex* table() { return table_.get(); }
  // Why the configured table could not be used ("" if it could, or none is configured).
  const std::string& table_error() const { return table_error_; }
  // Writes an entry into the table file (locked, merged, atomic) and the index, so that
  // dispatch uses it at once.
  void record(const TableEntry& entry);
  // Writes an entry into another table file the same way; this context's index is unchanged.
  void record_in_file(const std::string& path, const TableEntry& entry);

  // The hot path: select (cached) and launch. A call that is checked against the oracle (one
  // of a gated kernel's first calls of a problem, verify.first_calls_checked, or a sampled one
  // with shadow checks on) is launched from this same place: its inputs are copied before and
  // its results judged after, never around the launch. Throws Failure.
  void run(const arb_problem& problem, const arb_operands& operands, void* stream) {
    run_selection(dispatcher_.select(problem), problem, operands, stream);
  }
  // The same for a problem zero outside its op's `words` (Op::problem_words()), as the calls'
  // fast path builds it: only those words are hashed and compared.
  ARBITER_HOT_INLINE void run(const arb_problem& problem, ProblemWords words, const arb_operands& operands,
                              void* stream) {
    run_selection(dispatcher_.select(problem, words), problem, operands, stream);
  }
  // The same for a problem held as its call key (the calls' fast path; `words`, its op's
  // call_key_words) when the selection cache has it, launched with the cache's copy of the
  // problem; false on a miss, with nothing done (the caller then runs the call in full, which
  // selects).
  ARBITER_HOT_INLINE bool run_cached(const CallKey& key, size_t words, const arb_operands& operands, void* stream) {
    const auto hit = dispatcher_.find(key, words);
    if (hit.value == nullptr) [[unlikely]]
      return false;
    run_selection(*hit.value, *hit.key, operands, stream);
    return true;
  }
  // The same with the selection already made (a plan's).
  ARBITER_HOT_INLINE void run_selection(const Selection& selection, const arb_problem& problem,
                                       const arb_operands& operands, void* stream) {
    if (selection.attention.load(std::memory_order_acquire) != 0) [[unlikely]]
      return run_attended(selection, problem, operands, stream);
    launch_plain(selection, problem, operands, stream);
  }
  // The launch alone, for a selection whose attention is 0 (the caller tested it): so its
  // kernel takes no workspace (Selection::kWorkspace).
  ARBITER_HOT_INLINE void launch_plain(const Selection& selection, const arb_problem& problem,
                                       const arb_operands& operands, void* stream) {
    kernel_launch(*selection.kernel, problem, operands, nullptr, 0, stream);
  }
  // The shadow checks so far (verify.shadow_one_in).
  ShadowCheck::Counts shadow_counts() const { return shadow_.counts(); }

  // arb_explain's report: the dispatcher's (Dispatcher::explain) and, for a composite op, the
  // calls its chain runs, each with the kernel dispatch picks for it. `operands` are the call's
  // (nullptr for a problem from text: addresses of the problem's alignment class stand in).
  std::string explain(const arb_problem& problem, const arb_operands* operands = nullptr);

  // Why no loaded kernel supports the problem ("" when one does; the gate is not asked).
  std::string runnable(const arb_problem& problem) const;

  // Runs one given kernel, bypassing dispatch (tests, the CLI, verification). Checks
  // supports() first and sizes the workspace each time.
  void run_kernel(const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands, void* stream);

 private:
  void write_entry(const TableEntry& entry);  // the file only
  // A selection with attention (first calls checked, shadow checks sampled, forgotten, a
  // workspace): out of line, so that the plain launch stays small. Checked when due, launched
  // with its workspace otherwise.
  [[gnu::noinline]] void run_attended(const Selection& selection, const arb_problem& problem,
                                      const arb_operands& operands, void* stream);
  bool check_due(const Selection& selection) noexcept {
    if (selection.first_calls_left.load(std::memory_order_relaxed) > 0) {
      const int32_t left = selection.first_calls_left.fetch_sub(1, std::memory_order_relaxed);
      if (left <= 1) selection.attention.fetch_and(~Selection::kFirstCalls, std::memory_order_relaxed);
      if (left > 0) return true;
    }
    return shadow_one_in_ != 0 && shadow_check_due(shadow_one_in_);
  }
  // A checked call, out of line so that the unchecked path stays small enough to inline: the
  // inputs copied before the launch, the results judged after.
  void run_checked(const Selection& selection, const arb_problem& problem, const arb_operands& operands,
                   void* stream);
  // After a checked call: on a mismatch the kernel is quarantined and the call runs again with
  // the next choice, so the caller still gets a verified kernel's answer.
  void judge(const ShadowCapture& check, const Selection& selection, const arb_problem& problem,
             const arb_operands& operands, void* stream);
  // Refused by the gate from then on, its table entries marked failed (file and index),
  // every cached choice forgotten, and the event logged with the problem.
  void quarantine(const KernelRecord& kernel, const arb_problem& problem, const std::string& reason);
  // Host memory for CPU kernels; for a GPU, device memory private to this thread and stream.
  ARBITER_HOT_INLINE void* workspace(const arb_problem& problem, size_t bytes, void* stream) {
    if (bytes == 0) return nullptr;  // as host() and device() answer: one test for the kernels without any
    return problem.device_type == kDLCPU ? workspace_.host(bytes)
                                         : workspace_.device(devices_.of(problem.device_type), bytes, stream);
  }
  DispatchServices services(std::function<void(const arb_problem&, const TuneResult&)> on_tuned);
  static std::unique_ptr<Device> adopt(std::unique_ptr<Device> device, Device*& slot) {
    slot = device.get();
    return device;
  }

  Config config_;
  Devices devices_;  // pointers into the two below, set as they are made
  std::unique_ptr<Device> cpu_device_, cuda_device_;
  WorkspacePool workspace_;
  ChainKernels chains_;  // before the registry, which lists its kernels
  KernelRegistry registry_;
  VerificationGate gate_;
  Tuner tuner_;
  std::unique_ptr<TableIndex> table_;
  std::string table_error_;
  Dispatcher dispatcher_;
  ShadowCheck shadow_;
  int64_t shadow_one_in_;  // 0: off
};

}  // namespace arbiter
