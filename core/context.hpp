// One arbiter context: its configuration, the plugins it loaded, its dispatcher and its
// workspace. What arb_context points to.
#pragma once

#include "config/config.hpp"
#include "device/workspace_pool.hpp"
#include "dispatch/dispatcher.hpp"
#include "plugin/kernel_registry.hpp"

namespace arbiter {

class Context {
 public:
  explicit Context(Config config);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Config& config() const { return config_; }
  const KernelRegistry& registry() const { return registry_; }
  Dispatcher& dispatcher() { return dispatcher_; }

  // The hot path: select (cached) and launch. Throws Failure.
  void run(const arb_problem& problem, const arb_operands& operands, void* stream) {
    const Selection& selection = dispatcher_.select(problem);
    void* workspace = workspace_.host(selection.workspace_bytes);
    launch(*selection.kernel, problem, operands, workspace, selection.workspace_bytes, stream);
  }

  // Runs one given kernel, bypassing dispatch (tests, the CLI, verification). Checks
  // supports() first and sizes the workspace each time.
  void run_kernel(const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands, void* stream);

 private:
  static void launch(const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands,
                     void* workspace, size_t workspace_bytes, void* stream);

  Config config_;
  WorkspacePool workspace_;
  KernelRegistry registry_;
  Dispatcher dispatcher_;
};

}  // namespace arbiter
