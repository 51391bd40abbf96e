#include "verify/verifier.hpp"
#include "arbiter_base/counted.hpp"

#include "arbiter_base/abi_names.hpp"
#include "device/device_operands.hpp"
#include "device/problem_buffers.hpp"
#include "common/failure.hpp"
#include "plugin/kernel_call.hpp"
#include "plugin/process_state.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "verify/accuracy.hpp"
#include "verify/kernel_sandbox.hpp"
#include "verify/verification_shapes.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

namespace arbiter {

bool Verdict::failed(const std::string& check) const {
  return std::find(failed_checks.begin(), failed_checks.end(), check) != failed_checks.end();
}

std::string Verdict::summary() const {
  if (passed && trials == 0) return detail.empty() ? "passed" : detail;  // recorded elsewhere (the table)
  if (passed)
    return fmt::format("passed: {} of 2 runs, {}, max error {:.2g}", counted(trials, "trial"), counted(shapes, "shape"), max_error);
  std::string checks;
  for (const std::string& c : failed_checks) checks += (checks.empty() ? "" : ", ") + c;
  return "failed: " + checks;
}

std::string verdict_key(const KernelRecord& kernel, const arb_problem& problem) {
  return fmt::format("{}@{}#{}#{}|{}", kernel.name, kernel.plugin->version, kernel.plugin->build_id,
                     kernel.plugin->sha256, problem_class_key(problem));
}

// The scalars of one run, drawn per run so that no fixed value can be special-cased: the
// common ones (alpha 1, beta 1, eps 1e-5) as often as others, so that neither a kernel that
// is right only for them nor one that is right only away from them passes. beta is zero
// exactly when the problem has no C (has_c is beta != 0).
Scalars draw_scalars(const arb_problem& p, uint64_t seed, int draw) {
  std::mt19937_64 rng(seed ^ 0xa0761d6478bd642full);
  std::uniform_real_distribution<float> magnitude(0.25f, 2.0f);
  std::uniform_real_distribution<float> log_eps(std::log(1e-8f), std::log(1e-2f));
  static constexpr float kAlphas[] = {1.0f, 1.5f, -0.75f}, kBetas[] = {0.75f, 1.0f, -0.5f}, kEps[] = {1e-5f, 1e-6f, 3e-3f};
  const int pick = draw % 4;  // 0-2: a listed value, 3: a random one
  Scalars out;
  out.alpha = pick < 3 ? kAlphas[pick] : (rng() & 1 ? 1.0f : -1.0f) * magnitude(rng);
  out.beta = !p.has_c ? 0.0f : pick < 3 ? kBetas[pick] : (rng() & 1 ? 1.0f : -1.0f) * magnitude(rng);
  out.eps = pick < 3 ? kEps[pick] : std::exp(log_eps(rng));
  return out;
}

namespace {

// One verification: accumulates failures, at most the first detail per check.
class Checks {
 public:
  void fail(const std::string& check, const std::string& detail) {
    if (std::find(verdict_.failed_checks.begin(), verdict_.failed_checks.end(), check) != verdict_.failed_checks.end())
      return;
    verdict_.failed_checks.push_back(check);
    verdict_.detail += (verdict_.detail.empty() ? "" : "\n") + check + ": " + detail;
  }
  Verdict& verdict() { return verdict_; }

 private:
  Verdict verdict_;
};

// The process-wide state (process_state.hpp) while a kernel's launches run in this process
// (launches in a sandbox are watched there, one by one): compared every kStride-th launch
// and at the end, so that a kernel that leaks a descriptor per launch is stopped after a few
// dozen instead of the thousands a verification makes; from the first change on the kernel
// is not launched again here. A change the application's own threads make meanwhile would
// count too: a rare false refusal, never a false pass.
class HostStateWatch {
 public:
  explicit HostStateWatch(bool here) : here_(here) {
    if (here_) before_ = ProcessState::now();
  }
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  // After a launch here (any thread): compares every kStride-th time; a change is put back
  // and kept for finish().
  void after_launch(bool at_end = false) const {
    if (!here_) return;
    if (!at_end && launches_.fetch_add(1, std::memory_order_relaxed) % kStride != 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken()) return;
    const std::string changes = ProcessState::now().changes_since(before_, kDescriptorSlack);
    if (changes.empty()) return;
    broken_.store(true, std::memory_order_release);
    before_.restore();
    message_ = "the kernel's launches left the process's state changed: " + changes + " (put back)";
  }
  // At the end of the verification (one thread): the last comparison, and the failure.
  void finish(Checks& checks) const {
    after_launch(true);
    if (broken()) checks.fail("process_state", message_);
  }

 private:
  static constexpr int kStride = 4, kDescriptorSlack = 8;
  bool here_;
  ProcessState before_;
  mutable std::atomic<bool> broken_{false};
  mutable std::atomic<uint64_t> launches_{0};
  mutable std::mutex mutex_;
  mutable std::string message_;
};

// Runs a kernel through its C ABI on operands, with workspace from the device. Returns the
// error message, or "" on success.
std::string launch(Device& device, const KernelRecord& kernel, const arb_problem& problem, const arb_operands& operands) {
  size_t workspace_bytes = 0;
  try {
    workspace_bytes = kernel_workspace_bytes(kernel, problem);
  } catch (const Failure& e) {
    return e.what();
  }
  DeviceMemory workspace = workspace_bytes > 0 ? device.allocate(workspace_bytes) : DeviceMemory();
  std::string error;
  try {
    kernel_launch_watched(kernel, problem, operands, workspace.data(), workspace_bytes, nullptr);
  } catch (const Failure& e) {
    error = e.what();
  }
  device.synchronize(nullptr);  // failed or not, nothing may still run when the buffers go
  return error;
}

// Do the bytes of an operand outside its rows x cols (row padding) differ?
bool padding_changed(const ProblemBuffers::Operand& now, const ProblemBuffers::Operand& then, size_t element) {
  for (int64_t r = 0; r + 1 < now.rows; ++r) {
    const size_t begin = static_cast<size_t>(r * now.ld + now.cols) * element;
    const size_t end = static_cast<size_t>((r + 1) * now.ld) * element;
    if (begin < end && std::memcmp(now.buffer.data() + begin, then.buffer.data() + begin, end - begin) != 0) return true;
  }
  return false;
}

bool outputs_identical(const ProblemBuffers& a, const ProblemBuffers& b) {
  for (size_t i = 0; i < a.all().size(); ++i)
    if (a.all()[i].is_output &&
        std::memcmp(a.all()[i].buffer.data(), b.all()[i].buffer.data(), a.all()[i].buffer.size()) != 0)
      return false;
  return true;
}

// NaN in an output where the reference has a finite value: the kernel did not write it.
bool unwritten(const ProblemBuffers& result, const ProblemBuffers& expected) {
  for (const auto& out : result.all()) {
    if (!out.is_output) continue;
    const auto& ref = *expected.find(out.name);
    for (int64_t r = 0; r < out.rows; ++r)
      for (int64_t c = 0; c < out.cols; ++c)
        if (std::isnan(result.element(out, r, c)) && std::isfinite(expected.element(ref, r, c))) return true;
  }
  return false;
}

struct Run {
  const KernelRecord& kernel;
  const KernelRecord& reference;
  Device& device;
  Checks& checks;
  double base_tolerance;  // tolerance_for(kernel, dtype), or the caller's
  KernelSandbox* sandbox = nullptr;  // where the kernel's launches run, if not here
  const HostStateWatch* state = nullptr;  // the process's state, when they run here
  // The error accepted on one shape: the base, scaled by its rounding exposure.
  double tolerance(const arb_problem& shape) const { return tolerance_at(base_tolerance, shape); }
};

// What launch() says once the process's state was found changed: the launch did not happen
// (process_state says why), so nothing is judged.
constexpr const char* kNotLaunchedAgain = "not launched again: an earlier launch left the process's state changed";

// A launch of the run's kernel: in its sandbox when it has one.
std::string launch(const Run& run, const arb_problem& problem, const arb_operands& operands) {
  if (run.sandbox == nullptr) {
    if (run.state != nullptr && run.state->broken()) return kNotLaunchedAgain;
    std::string error = launch(run.device, run.kernel, problem, operands);
    if (run.state != nullptr) run.state->after_launch();
    return error;
  }
  try {
    return run.sandbox->launch(problem, operands, kernel_workspace_bytes(run.kernel, problem));
  } catch (const Failure& e) {
    return e.what();
  }
}

ProblemBuffers expected_for(const Run& run, const ProblemBuffers& inputs) { return reference_answer(run.reference, inputs); }

Comparison compare_to_reference(const Run& run, const ProblemBuffers& inputs, const ProblemBuffers& result,
                                const ProblemBuffers& expected) {
  return compare_with_reference(run.reference, inputs, result, expected, run.tolerance(inputs.problem()));
}

// Checks one kernel result against the reference answer; returns false if the accuracy
// check failed (for the caller's stale-result check).
bool check_result(const Run& run, const ProblemBuffers& inputs, const ProblemBuffers& result,
                  const ProblemBuffers& expected, const std::string& where, const std::string& accuracy_check,
                  bool poisoned) {
  const size_t element = dtype_size(inputs.problem().dtype);
  for (size_t i = 0; i < inputs.all().size(); ++i) {
    const auto& then = inputs.all()[i];
    const auto& now = result.all()[i];
    if (!then.is_output && std::memcmp(then.buffer.data(), now.buffer.data(), then.buffer.size()) != 0)
      run.checks.fail("input_modified", fmt::format("{} changed ({})", then.name, where));
    if (then.is_output && padding_changed(now, then, element))
      run.checks.fail("guard", fmt::format("wrote into the row padding of {} ({})", then.name, where));
  }
  if (poisoned && unwritten(result, expected))
    run.checks.fail("unwritten_output", "NaN poison left in the output (" + where + ")");
  const Comparison c = compare_to_reference(run, inputs, result, expected);
  if (!c.specials_match) {
    run.checks.fail(accuracy_check, c.first_special_mismatch + " (" + where + ")");
    return false;
  }
  Verdict& v = run.checks.verdict();
  if (std::isfinite(c.error)) v.max_error = std::max(v.max_error, c.error);
  if (const double tolerance = run.tolerance(inputs.problem()); !c.accepted(tolerance)) {
    run.checks.fail(accuracy_check, fmt::format("relative norm error {:.3g} in {} exceeds {:.2g} ({})", c.error,
                                                c.worst.empty() ? "output" : c.worst, tolerance, where));
    return false;
  }
  return true;
}

// The input draws of a shape in the order runs take them: the two ordinary ones first, then
// the op's hard ones in an order drawn from the seed.
std::vector<InputDraw> input_draws(const arb_problem& p, uint64_t seed) {
  std::vector<InputDraw> draws = {kUniformInputs, kNormalInputs};
  std::vector<InputDraw> hard = find_op(p.op)->hard_inputs(p);
  std::shuffle(hard.begin(), hard.end(), std::mt19937_64(seed ^ 0x3c79ac492ba7b653ull));
  draws.insert(draws.end(), hard.begin(), hard.end());
  return draws;
}

// How run number `run` fills pure outputs: NaN first (unwritten elements show), then zeros
// or random values (a kernel that writes only over the poison shows), then any of them.
OutputFill output_fill(int run, std::mt19937_64& rng) {
  if (run == 0) return OutputFill::nan;
  if (run == 1) return rng() % 2 ? OutputFill::zeros : OutputFill::random;
  return static_cast<OutputFill>(rng() % 3);
}

// One run's inputs and how they were drawn.
struct RunSetup {
  uint64_t seed;
  InputDraw draw;
  OutputFill fill;
  Scalars scalars;
  uint32_t canary;  // the guards' contents
  std::string where;  // for failure details
};

// Run number `run` of a shape: `draws` are the shape's (input_draws: one order over its runs,
// so that every draw is taken), `seed` the run's.
RunSetup draw_run(const arb_problem& p, const std::vector<InputDraw>& draws, uint64_t seed, int run,
                  const std::string& label, int trial) {
  std::mt19937_64 rng(seed ^ 0xe7037ed1a0b428dbull);
  RunSetup r{seed, draws[static_cast<size_t>(run) % draws.size()], output_fill(run, rng), draw_scalars(p, seed, run),
             static_cast<uint32_t>(rng()), ""};
  r.where = fmt::format("trial {}, {} inputs, {} outputs, alpha {:g} beta {:g} eps {:g}, {}: {}", trial, r.draw.name,
                        output_fill_name(r.fill), r.scalars.alpha, r.scalars.beta, r.scalars.eps, label, problem_key(p));
  return r;
}

ProblemBuffers buffers_for(const arb_problem& p, const RunSetup& setup) {
  ProblemBuffers inputs(p, setup.scalars.alpha, setup.scalars.beta, setup.scalars.eps);
  inputs.randomize(setup.seed, setup.draw, setup.fill);
  return inputs;
}

// Launches at the same addresses after the first, each on new data that changes only the
// interior of the inputs: 4 to 9 launches there in all (with the rerun and the first new
// data) in most runs, and in one run of each verification a long series of 20 to 272 (as
// many as kLongSeriesCost multiply-adds of the reference allow, at least the short series'
// longest), so that no count of launches per address is the gate's last.
constexpr double kLongSeriesCost = double(1 << 26);
int extra_launches(uint64_t seed, bool long_series, const arb_problem& p) {
  const int short_series = 1 + static_cast<int>((seed >> 17) % 6);
  if (!long_series) return short_series;
  const int wanted = 16 + (1 << (2 + (seed >> 23) % 7));
  const double affordable = kLongSeriesCost / std::max(1.0, reference_cost(p));
  return std::max(6, static_cast<int>(std::min<double>(wanted, affordable)));
}

// Several threads at once on the problem: each launch has its own outputs, two threads share
// their pure inputs and two have other data, and a watcher compares the shared inputs with
// their first bytes while the launches run (a kernel that uses an input as scratch and
// restores it is seen, as is one whose scratch is shared between calls). CPU memory only:
// the watcher reads it directly.
void check_concurrent_calls(const Run& run, const arb_problem& p, const RunSetup& setup) {
  // Threads 0 and 1 share their inputs; threads 2 and 3 have data of their own (scratch
  // shared between calls shows only when the calls' data differ).
  // Each thread launches for kBusy (3 to kMaxLaunches times): a race between calls shows only
  // when launches overlap, which on a loaded machine with few cores takes many of them.
  constexpr int kThreads = 4, kSharing = 2, kMinLaunches = 3, kMaxLaunches = 400;
  constexpr auto kBusy = std::chrono::milliseconds(40);
  std::vector<ProblemBuffers> inputs_of, expected_of;
  for (int t = 0; t < kThreads; ++t) {
    inputs_of.push_back(t < kSharing ? (t == 0 ? buffers_for(p, setup) : inputs_of[0])
                                     : buffers_for(p, RunSetup{setup.seed + 977u * static_cast<uint64_t>(t), setup.draw,
                                                               setup.fill, setup.scalars, setup.canary, ""}));
    expected_of.push_back(t < kSharing && t > 0 ? expected_of[0] : expected_for(run, inputs_of.back()));
  }
  const ProblemBuffers& inputs = inputs_of[0];
  DeviceOperands shared(run.device, inputs, nullptr, setup.canary);
  std::vector<std::unique_ptr<DeviceOperands>> own;
  std::vector<arb_operands> operands;
  for (int t = 0; t < kThreads; ++t) {
    own.push_back(std::make_unique<DeviceOperands>(run.device, inputs_of[t], nullptr, setup.canary));
    const DeviceOperands& mine = *own.back();
    const bool sharing = t < kSharing;
    operands.push_back(operands_by_name(
        p,
        [&](const char* name) -> void* {
          const ProblemBuffers::Operand* o = inputs.find(name);
          if (o == nullptr) return nullptr;
          return o->is_output || !sharing ? mine.data(name) : shared.data(name);
        },
        setup.scalars.alpha, setup.scalars.beta, setup.scalars.eps));
  }
  std::atomic<int> running{kThreads}, waiting{kThreads};
  std::atomic<bool> changed{false};
  std::vector<std::string> errors(kThreads);
  std::vector<int> wrong(kThreads, 0), launched(kThreads, 0);
  std::vector<std::string> wrong_detail(kThreads);
  std::thread watcher([&] {
    while (running.load(std::memory_order_acquire) > 0 && !changed.load(std::memory_order_relaxed))
      for (const auto& o : inputs.all())
        if (!o.is_output && std::memcmp(shared.data(o.name), o.buffer.data(), o.buffer.size()) != 0) changed = true;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) std::this_thread::yield();  // all start at once
      const auto until = std::chrono::steady_clock::now() + kBusy;
      for (int l = 0; l < kMaxLaunches && errors[t].empty() && (l < kMinLaunches || std::chrono::steady_clock::now() < until);
           ++l) {
        ++launched[t];
        own[t]->upload(inputs_of[t], nullptr);  // outputs that are also inputs start over
        errors[t] = launch(run, p, operands[t]);
        if (!errors[t].empty()) break;
        ProblemBuffers result = inputs_of[t];
        own[t]->download(result, nullptr);
        const Comparison c = compare_to_reference(run, inputs_of[t], result, expected_of[t]);
        if (!c.accepted(run.tolerance(p))) {
          ++wrong[t];
          if (wrong_detail[t].empty())
            wrong_detail[t] = c.specials_match ? fmt::format("relative norm error {:.3g}", c.error) : c.first_special_mismatch;
        }
      }
      running.fetch_sub(1, std::memory_order_release);
    });
  for (std::thread& t : threads) t.join();
  watcher.join();
  int wrong_total = 0, launched_total = 0;
  std::string detail;
  for (int t = 0; t < kThreads; ++t) {
    launched_total += launched[t];
    if (!errors[t].empty() && errors[t] != kNotLaunchedAgain)
      run.checks.fail("launch_failed", errors[t] + " (concurrent calls, " + setup.where + ")");
    wrong_total += wrong[t];
    if (detail.empty()) detail = wrong_detail[t];
  }
  if (wrong_total > 0)
    run.checks.fail("concurrent_calls", fmt::format("{} of {} launches from {} threads at once (two sharing their "
                                                    "inputs) were wrong (first: {}) ({})",
                                                    wrong_total, launched_total, kThreads, detail, setup.where));
  if (changed)
    run.checks.fail("input_modified", "an input changed while the kernel ran, though it was restored by the time it "
                                      "returned (concurrent calls, " + setup.where + ")");
  for (const auto& o : inputs.all())
    if (!o.is_output && std::memcmp(shared.data(o.name), o.buffer.data(), o.buffer.size()) != 0)
      run.checks.fail("input_modified", o.name + " changed (concurrent calls, " + setup.where + ")");
}

// A launch whose operands, guards included, are read again `ms` after it returned: a kernel
// that leaves work running (a detached thread still writing) would change the caller's
// tensors after the call, or write into memory the caller has freed. Sandboxed kernels only:
// the late writes then land in the sandbox's shared memory, never in this process's heap.
void check_after_return(const Run& run, const arb_problem& p, const RunSetup& setup, int ms) {
  // First a pause as long: work the earlier launches left running ends (a kernel that bounds
  // how much it leaves running would otherwise leave none behind this launch).
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  const ProblemBuffers inputs = buffers_for(p, setup);
  DeviceOperands operands(run.device, inputs, nullptr, setup.canary);
  if (!launch(run, p, operands.operands()).empty()) return;  // the runs before saw it launch
  ProblemBuffers returned = inputs;
  operands.download(returned, nullptr);
  const std::vector<std::string> guards_then = operands.damaged_guards(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  ProblemBuffers later = inputs;
  operands.download(later, nullptr);
  for (size_t i = 0; i < later.all().size(); ++i)
    if (std::memcmp(later.all()[i].buffer.data(), returned.all()[i].buffer.data(), later.all()[i].buffer.size()) != 0)
      run.checks.fail("wrote_after_return", fmt::format("{} changed between the launch's return and {} ms later: work "
                                                        "left running after the call ({})",
                                                        later.all()[i].name, ms, setup.where));
  if (operands.damaged_guards(nullptr) != guards_then)
    run.checks.fail("wrote_after_return", fmt::format("the guards around the operands changed within {} ms after the "
                                                      "launch returned ({})", ms, setup.where));
}

// Launches on `operands` (already holding `inputs`), downloads and checks the result; false
// if it failed the check named `accuracy_check` or did not launch.
// With `previous` (the last result at these addresses), a wrong answer that is the previous
// one, bit for bit, is a stale_result; any other wrong answer is inaccurate.
bool launch_and_check(const Run& run, const arb_problem& p, DeviceOperands& operands, const ProblemBuffers& inputs,
                      const RunSetup& setup, const std::string& where, ProblemBuffers* result_out = nullptr,
                      const ProblemBuffers* previous = nullptr) {
  const ProblemBuffers expected = expected_for(run, inputs);
  const std::string error = launch(run, p, operands.operands());
  if (error == kNotLaunchedAgain) return false;
  if (!error.empty()) {
    run.checks.fail("launch_failed", error + " (" + where + ")");
    return false;
  }
  ProblemBuffers result = inputs;
  operands.download(result, nullptr);
  for (const std::string& name : operands.damaged_guards(nullptr))
    run.checks.fail("guard", "wrote past the bounds of " + name + " (" + where + ")");
  const bool stale = previous != nullptr && outputs_identical(result, *previous);
  const bool right =
      check_result(run, inputs, result, expected, where, stale ? "stale_result" : "accuracy", setup.fill == OutputFill::nan);
  if (result_out) *result_out = std::move(result);
  return right;
}

}  // namespace

Verdict verify_kernel(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                      const arb_problem& problem, const VerifyOptions& options) {
  Checks checks;
  const HostStateWatch state(options.sandbox == nullptr);
  Verdict& verdict = checks.verdict();
  std::vector<VerificationShape> shapes;
  for (const VerificationShape& shape : verification_shapes(problem, options.seed))
    if (kernel_supports(kernel, shape.problem, nullptr)) shapes.push_back(shape);
  // The problem itself, at full size: on request, or when the kernel takes none of the
  // smaller shapes (a kernel for large sizes only) -- if the fp64 reference can afford it.
  const bool affordable = reference_cost(problem) <= kMaxReferenceCost;
  if ((options.full_problem || shapes.empty()) && affordable && kernel_supports(kernel, problem, nullptr) &&
      (shapes.empty() || !same_problem(shapes.front().problem, problem)))
    shapes.insert(shapes.begin(), VerificationShape{problem, "problem at full size"});
  verdict.shapes = static_cast<int>(shapes.size());
  if (shapes.empty()) {
    checks.fail("no_shape", "the kernel supports none of the verification shapes of " + problem_class_key(problem) +
                                (affordable ? "" : ", and the problem itself is too large for the fp64 reference"));
    return verdict;
  }
  const Run run{kernel, reference, device, checks,
                options.tolerance > 0 ? options.tolerance : tolerance_for(problem.dtype), options.sandbox, &state};
  const bool deterministic = (kernel.abi.flags & ARB_KERNEL_FLAG_NONDETERMINISTIC) == 0;
  // Every run's buffers stay allocated until the end, so each run gets new addresses (a
  // freed block could come back at the same address and hide a cache keyed by pointer).
  std::vector<std::unique_ptr<DeviceOperands>> keep;
  std::vector<std::vector<InputDraw>> draws_of;
  for (size_t s = 0; s < shapes.size(); ++s) draws_of.push_back(input_draws(shapes[s].problem, options.seed + 7919u * s));
  try {
    for (int trial = 0; trial < options.trials; ++trial) {
      verdict.trials = trial + 1;
      for (int half = 0; half < 2; ++half) {
        const int run_index = trial * 2 + half;
        for (size_t s = 0; s < shapes.size(); ++s) {
          // Every shape on the first trial; afterwards the problem and one rotating edge.
          if (trial > 0 && s != 0 && s != 1 + static_cast<size_t>(trial) % std::max<size_t>(1, shapes.size() - 1))
            continue;
          const arb_problem& p = shapes[s].problem;
          const uint64_t seed =
              options.seed * 0x9e3779b97f4a7c15ull + 1000003u * static_cast<uint64_t>(run_index + 1) + 7919u * s;
          const RunSetup setup =
              draw_run(p, draws_of[s], seed, run_index, shapes[s].label, trial + 1);
          const ProblemBuffers inputs = buffers_for(p, setup);
          keep.push_back(std::make_unique<DeviceOperands>(device, inputs, nullptr, setup.canary));  // new addresses
          DeviceOperands& operands = *keep.back();
          ProblemBuffers result = inputs;
          const bool accurate = launch_and_check(run, p, operands, inputs, setup, setup.where, &result);

          if (s != 0 || !accurate) continue;  // reruns and stale-data runs: main shape, once right
          operands.upload(inputs, nullptr);  // the same inputs again, same addresses
          if (launch(run, p, operands.operands()).empty()) {
            ProblemBuffers again = inputs;
            operands.download(again, nullptr);
            if (deterministic && !outputs_identical(again, result))
              checks.fail("rerun_differs", "two runs on identical inputs differ (" + setup.where + ")");
          }
          ProblemBuffers fresh = buffers_for(p, RunSetup{seed ^ 0x5bd1e995u, setup.draw, setup.fill, setup.scalars, 0, ""});
          operands.upload(fresh, nullptr);  // new data, same addresses
          ProblemBuffers last = result;
          launch_and_check(run, p, operands, fresh, setup, setup.where + ", new data at the same addresses", &last,
                           &result);
          // The long series once per verification, in a run drawn from the seed (not on the
          // emulator, where every launch is slow).
          const bool long_series = !device.emulated() && run_index == static_cast<int>(options.seed % (2 * options.trials));
          for (int extra = 0, n = extra_launches(seed, long_series, p); extra < n; ++extra) {
            fresh.redraw_interior(seed + 31u * static_cast<uint64_t>(extra + 1), setup.draw);
            operands.upload(fresh, nullptr);
            ProblemBuffers previous = std::move(last);
            launch_and_check(run, p, operands, fresh, setup,
                             fmt::format("{}, launch {} at the same addresses, new data inside the rows", setup.where,
                                         extra + 4),
                             &last, &previous);
          }
        }
      }
    }
    if (device.type() == kDLCPU && !device.emulated() && checks.verdict().failed_checks.empty())
      check_concurrent_calls(run, shapes.front().problem,
                             draw_run(shapes.front().problem, draws_of.front(), options.seed ^ 0x6a09e667f3bcc909ull, 0,
                                      shapes.front().label, options.trials + 1));
    if (options.sandbox != nullptr && options.after_return_ms > 0 && checks.verdict().failed_checks.empty())
      check_after_return(run, shapes.front().problem,
                         draw_run(shapes.front().problem, draws_of.front(), options.seed ^ 0xbb67ae8584caa73bull, 1,
                                  shapes.front().label, options.trials + 2),
                         options.after_return_ms);
  } catch (const std::exception& e) {
    checks.fail("verifier_error", e.what());
  }
  state.finish(checks);
  verdict.passed = verdict.failed_checks.empty();
  if (verdict.passed) verdict.detail = verdict.summary();
  return verdict;
}

// A cheat's error is far above either scale; a result near zero by cancellation, which the
// hard draws make (rows of magnitudes 1e-3 to 1e3), is judged on the second.
Comparison compare_with_reference(const KernelRecord& reference, const ProblemBuffers& inputs,
                                  const ProblemBuffers& result, const ProblemBuffers& expected, double tolerance) {
  Comparison c = compare_outputs(result, expected);
  if (c.accepted(tolerance) || !c.specials_match || !c.finite) return c;
  if (const Op* op = find_op(inputs.problem().op); op != nullptr && op->residual_input() != nullptr) {
    const ProblemBuffers terms = expected.residual_scale(op->residual_input());
    return compare_outputs(result, expected, &terms, 1.0);
  }
  const ProblemBuffers magnitudes = reference_answer(reference, inputs.absolute_values());
  return compare_outputs(result, expected, &magnitudes);
}

ProblemBuffers reference_answer(const KernelRecord& reference, const ProblemBuffers& inputs) {
  static const std::unique_ptr<Device> host = make_cpu_device();
  ProblemBuffers expected = inputs;
  arb_problem on_host = inputs.problem();  // the same problem, as the CPU reference runs it
  on_host.device_type = kDLCPU;
  on_host.device_id = 0;
  const std::string error = launch(*host, reference, on_host, expected.operands());
  if (!error.empty()) throw std::runtime_error("the reference failed: " + error);
  return expected;
}

Verdict check_full_size(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                        const arb_problem& problem, uint64_t seed, double tolerance, KernelSandbox* sandbox) {
  Checks checks;
  const HostStateWatch state(sandbox == nullptr);
  Verdict& verdict = checks.verdict();
  verdict.shapes = 1;
  verdict.trials = 1;
  const Run run{kernel, reference, device, checks, tolerance > 0 ? tolerance : tolerance_for(problem.dtype), sandbox,
                &state};
  try {
    std::mt19937_64 rng(seed);
    const RunSetup setup =
        draw_run(problem, input_draws(problem, seed), seed, static_cast<int>(rng() % 6), "the problem at full size", 1);
    const ProblemBuffers inputs = buffers_for(problem, setup);
    DeviceOperands operands(device, inputs, nullptr, setup.canary);
    launch_and_check(run, problem, operands, inputs, setup, setup.where);
  } catch (const std::exception& e) {
    checks.fail("verifier_error", e.what());
  }
  state.finish(checks);
  verdict.passed = verdict.failed_checks.empty();
  if (verdict.passed) verdict.detail = verdict.summary();
  return verdict;
}

}  // namespace arbiter
