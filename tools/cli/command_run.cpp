// arbiter run <problem>: run through dispatch (or one named kernel) on random data, check
// the result against the reference plugin, and time it. Through dispatch it first makes
// --calls calls as an application would, with shadow checks on (verify.shadow_one_in, 1 in
// kRunShadowOneIn when the config leaves it unset): a kernel right only while the gate
// watched is quarantined there, and the rest of the command uses the kernel that replaced it.
#include "cli.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "device/device_operands.hpp"
#include "device/problem_buffers.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "problem/problem_text.hpp"
#include "verify/accuracy.hpp"
#include "verify/verifier.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace arbiter::cli {
namespace {

// Useful work of one run: math flops where the op counts them, else bytes moved.
std::string rate(const arb_problem& p, double seconds) {
  if (const double flops = flop_count(p); flops > 0)
    return fmt::format("{:.2f} GFLOP/s (math flops, e.g. 2mnk for gemm)", flops / seconds * 1e-9);
  return fmt::format("{:.2f} GB/s (bytes read + written once)", bytes_moved(p) / seconds * 1e-9);
}

int64_t number_option(const Arguments& args, const std::string& name, int64_t fallback) {
  const std::string v = args.option(name);
  if (v.empty()) return fallback;
  try {
    return std::stoll(v);
  } catch (const std::exception&) {
    fail(ARB_ERR_INVALID_ARGUMENT, "--" + name + " needs a number");
  }
}

// The shadow rate of `arbiter run` when the config sets none.
constexpr int64_t kRunShadowOneIn = 4;

}  // namespace

int command_run(const Arguments& args) {
  if (args.positional.empty()) fail(ARB_ERR_INVALID_ARGUMENT, "run needs a problem, e.g. 'gemm f32 m=8 n=8 k=8'");
  const ParsedProblem parsed = parse_problem(joined(args.positional));
  const arb_problem& problem = parsed.problem;
  const auto context = make_context(args, [](Config& config) {
    if (!config.verify.shadow_one_in) config.verify.shadow_one_in = kRunShadowOneIn;
  });
  const int64_t samples = std::max<int64_t>(1, number_option(args, "samples", 50));
  const uint64_t seed = static_cast<uint64_t>(number_option(args, "seed", 1));
  const int64_t calls = std::max<int64_t>(0, number_option(args, "calls", 300));

  const KernelRecord* kernel = nullptr;
  std::string rule;
  if (const std::string name = args.option("kernel"); !name.empty()) {
    kernel = context->registry().find(name);
    if (kernel == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "no loaded kernel is named '" + name + "'");
    rule = "--kernel";
  } else {
    require_plugin_files(*context, "run");
    const Decision decision = context->dispatcher().decide(problem, Dispatcher::Mode::dispatch);
    if (decision.kernel == nullptr) fail(ARB_ERR_UNSUPPORTED, decision.failure + "; try `arbiter explain`");
    kernel = decision.kernel;
    rule = decision.rule;
  }
  const KernelRecord* reference = context->gate().oracle(problem.op);
  // The operands live on the problem's device (host memory on the CPU), as a caller's would.
  Device& device = context->devices().of(problem.device_type);

  ProblemBuffers buffers(problem, parsed.alpha, parsed.beta, parsed.eps);
  std::string shadow_line;
  bool quarantined = false;
  if (rule != "--kernel" && calls > 0) {  // the life phase, through dispatch
    buffers.randomize(seed + 1);
    const DeviceOperands life(device, buffers, nullptr);
    for (int64_t call = 0; call < calls; ++call) context->run(problem, life.operands(), nullptr);
    device.synchronize(nullptr);
    const ShadowCheck::Counts counts = context->shadow_counts();
    shadow_line = fmt::format("{} of {} calls through dispatch checked against the oracle (verify.shadow_one_in = {})",
                              counts.checked, calls, context->config().verify.shadow_rate());
    if (counts.skipped > 0) shadow_line += fmt::format(", {} skipped", counts.skipped);
    if (const std::optional<std::string> why = context->gate().quarantined(*kernel)) {
      quarantined = true;
      shadow_line += fmt::format(": {} QUARANTINED: {}", kernel->name, *why);
      const Decision now = context->dispatcher().decide(problem, Dispatcher::Mode::dispatch);
      if (now.kernel == nullptr) fail(ARB_ERR_UNSUPPORTED, shadow_line + "; and no other kernel qualifies: " + now.failure);
      kernel = now.kernel;
      rule = now.rule + ", after the quarantine";
    } else {
      shadow_line += counts.mismatched == 0 ? ": all matched" : fmt::format(": {} mismatched", counts.mismatched);
    }
  }
  buffers.randomize(seed);
  const DeviceOperands operands(device, buffers, nullptr);
  auto run_once = [&](const KernelRecord& k) { context->run_kernel(k, problem, operands.operands(), nullptr); };
  run_once(*kernel);
  ProblemBuffers result = buffers;
  operands.download(result, nullptr);

  fmt::print("problem: {}\n", problem_key(problem));
  fmt::print("kernel:  {} ({}), chosen by {}\n", kernel->name, provenance_name(kernel->provenance), rule);
  if (!shadow_line.empty()) fmt::print("shadow:  {}\n", shadow_line);
  bool passed = !quarantined;
  if (reference == nullptr) {
    fmt::print("check:   skipped: the reference plugin is not loaded\n");
  } else {
    // Judged as the gate judges: against the result, then against the magnitudes' scale.
    const double tolerance = tolerance_for(*kernel, problem);
    const Comparison c = compare_with_reference(*reference, buffers, result, reference_answer(*reference, buffers), tolerance);
    const bool accepted = c.accepted(tolerance);
    passed = passed && accepted;
    fmt::print("check:   relative norm error {:.3g} (worst output: {}) against {}, tolerance {:.2g}: {}\n", c.error,
               c.worst.empty() ? "-" : c.worst, reference->name, tolerance, accepted ? "PASS" : "FAIL");
  }

  if (device.emulated()) {  // never reported as a device's time
    fmt::print("time:    not measured: the CUDA device is the SIMT emulator (correctness only)\n");
    return passed ? 0 : 3;
  }
  // Timing: warm-up, then `samples` timed batches of runs, each batch synchronised at its end
  // (CPU runs are synchronous). A batch is long enough (about 200 us) that the clock's own
  // cost and resolution do not matter.
  using clock = std::chrono::steady_clock;
  auto elapsed = [&](int64_t runs) {
    const auto start = clock::now();
    for (int64_t r = 0; r < runs; ++r) run_once(*kernel);
    device.synchronize(nullptr);
    return std::chrono::duration<double>(clock::now() - start).count();
  };
  elapsed(3);
  const double estimate = elapsed(3) / 3;
  const int64_t batch = std::clamp<int64_t>(static_cast<int64_t>(200e-6 / std::max(estimate, 1e-9)), 1, 100000);
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) seconds.push_back(elapsed(batch) / static_cast<double>(batch));
  std::sort(seconds.begin(), seconds.end());
  auto at = [&](double q) { return seconds[static_cast<size_t>(q * static_cast<double>(seconds.size() - 1))]; };
  const double median = at(0.5);
  fmt::print("time:    median {:.3f} us (p20 {:.3f}, p80 {:.3f}) per run over {} samples of {} runs; {}\n",
             median * 1e6, at(0.2) * 1e6, at(0.8) * 1e6, samples, batch, rate(problem, median));
  fmt::print("method:  steady_clock around batches of runs (the device synchronised after each), 6 warm-up runs, "
             "same buffers every run "
             "(warm cache), inputs uniform in [-1, 1] (seed {})\n",
             seed);
  return passed ? 0 : 3;
}

}  // namespace arbiter::cli
