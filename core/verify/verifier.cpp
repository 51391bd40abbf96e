#include "verify/verifier.hpp"

#include "arbiter_base/abi_names.hpp"
#include "device/device_operands.hpp"
#include "device/problem_buffers.hpp"
#include "common/failure.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "verify/accuracy.hpp"
#include "verify/verification_shapes.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

namespace arbiter {

bool Verdict::failed(const std::string& check) const {
  return std::find(failed_checks.begin(), failed_checks.end(), check) != failed_checks.end();
}

std::string Verdict::summary() const {
  if (passed && trials == 0) return detail.empty() ? "passed" : detail;  // recorded elsewhere (the table)
  if (passed)
    return fmt::format("passed: {} trials x 2 distributions, {} shapes, max error {:.2g}", trials, shapes, max_error);
  std::string checks;
  for (const std::string& c : failed_checks) checks += (checks.empty() ? "" : ", ") + c;
  return "failed: " + checks;
}

std::string verdict_key(const KernelRecord& kernel, const arb_problem& problem) {
  return fmt::format("{}@{}#{}#{}|{}", kernel.name, kernel.plugin->version, kernel.plugin->build_id,
                     kernel.plugin->sha256, problem_class_key(problem));
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
    kernel_launch(kernel, problem, operands, workspace.data(), workspace_bytes, nullptr);
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
  double tolerance;
};

// The reference's answer for these inputs (on the host: the reference is a CPU plugin).
ProblemBuffers expected_for(const Run& run, const ProblemBuffers& inputs) {
  static const std::unique_ptr<Device> host = make_cpu_device();
  ProblemBuffers expected = inputs;
  arb_problem on_host = inputs.problem();  // the same problem, as the CPU reference runs it
  on_host.device_type = kDLCPU;
  on_host.device_id = 0;
  const std::string error = launch(*host, run.reference, on_host, expected.operands());
  if (!error.empty()) throw std::runtime_error("the reference failed: " + error);
  return expected;
}

// Checks one kernel result against the reference answer; returns false if the accuracy
// check failed (for the caller's stale-result check).
bool check_result(const Run& run, const ProblemBuffers& inputs, const ProblemBuffers& result,
                  const ProblemBuffers& expected, const std::string& where, const std::string& accuracy_check) {
  const size_t element = dtype_size(inputs.problem().dtype);
  for (size_t i = 0; i < inputs.all().size(); ++i) {
    const auto& then = inputs.all()[i];
    const auto& now = result.all()[i];
    if (!then.is_output && std::memcmp(then.buffer.data(), now.buffer.data(), then.buffer.size()) != 0)
      run.checks.fail("input_modified", fmt::format("{} changed ({})", then.name, where));
    if (then.is_output && padding_changed(now, then, element))
      run.checks.fail("guard", fmt::format("wrote into the row padding of {} ({})", then.name, where));
  }
  if (unwritten(result, expected)) run.checks.fail("unwritten_output", "NaN poison left in the output (" + where + ")");
  const Comparison c = compare_outputs(result, expected);
  Verdict& v = run.checks.verdict();
  if (std::isfinite(c.error)) v.max_error = std::max(v.max_error, c.error);
  if (!c.finite || !(c.error <= run.tolerance)) {
    run.checks.fail(accuracy_check, fmt::format("relative norm error {:.3g} in {} exceeds {:.0e} ({})", c.error,
                                                c.worst.empty() ? "output" : c.worst, run.tolerance, where));
    return false;
  }
  return true;
}

struct Scalars {
  float alpha = 1.0f, beta = 0.0f, eps = 1e-5f;
};

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

}  // namespace

Verdict verify_kernel(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                      const arb_problem& problem, const VerifyOptions& options) {
  Checks checks;
  Verdict& verdict = checks.verdict();
  std::vector<VerificationShape> shapes;
  for (const VerificationShape& shape : verification_shapes(problem))
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
                options.tolerance > 0 ? options.tolerance : tolerance_for(problem.dtype)};
  const bool deterministic = (kernel.abi.flags & ARB_KERNEL_FLAG_NONDETERMINISTIC) == 0;
  // Every run's buffers stay allocated until the end, so each run gets new addresses (a
  // freed block could come back at the same address and hide a cache keyed by pointer).
  std::vector<std::unique_ptr<DeviceOperands>> keep;
  try {
    for (int trial = 0; trial < options.trials; ++trial) {
      verdict.trials = trial + 1;
      for (Distribution distribution : {Distribution::uniform, Distribution::normal}) {
        for (size_t s = 0; s < shapes.size(); ++s) {
          // Every shape on the first trial; afterwards the problem and one rotating edge.
          if (trial > 0 && s != 0 && s != 1 + static_cast<size_t>(trial) % std::max<size_t>(1, shapes.size() - 1))
            continue;
          const arb_problem& p = shapes[s].problem;
          const uint64_t seed = options.seed * 0x9e3779b97f4a7c15ull + 1000003u * static_cast<uint64_t>(trial + 1) +
                                7919u * s + (distribution == Distribution::normal ? 17 : 0);
          const Scalars scalars = draw_scalars(p, seed, trial * 2 + (distribution == Distribution::normal ? 1 : 0));
          ProblemBuffers inputs(p, scalars.alpha, scalars.beta, scalars.eps);
          const std::string where =
              fmt::format("trial {}, {} inputs, {}, alpha {:g} beta {:g} eps {:g}: {}", trial + 1,
                          distribution_name(distribution), shapes[s].label, scalars.alpha, scalars.beta, scalars.eps,
                          problem_key(p));
          inputs.randomize(seed, distribution);
          const ProblemBuffers expected = expected_for(run, inputs);

          keep.push_back(std::make_unique<DeviceOperands>(device, inputs, nullptr));  // new addresses
          DeviceOperands& operands = *keep.back();
          const std::string error = launch(device, kernel, p, operands.operands());
          if (!error.empty()) {
            checks.fail("launch_failed", error + " (" + where + ")");
            continue;
          }
          ProblemBuffers result = inputs;
          operands.download(result, nullptr);
          for (const std::string& name : operands.damaged_guards(nullptr))
            checks.fail("guard", "wrote past the bounds of " + name + " (" + where + ")");
          const bool accurate = check_result(run, inputs, result, expected, where, "accuracy");

          if (s != 0 || !accurate) continue;  // reruns and stale-data runs: main shape, once right
          operands.upload(inputs, nullptr);  // the same inputs again, same addresses
          if (launch(device, kernel, p, operands.operands()).empty()) {
            ProblemBuffers again = inputs;
            operands.download(again, nullptr);
            if (deterministic && !outputs_identical(again, result))
              checks.fail("rerun_differs", "two runs on identical inputs differ (" + where + ")");
          }
          ProblemBuffers fresh(p, scalars.alpha, scalars.beta, scalars.eps);  // new data, same addresses
          fresh.randomize(seed ^ 0x5bd1e995u, distribution);
          const ProblemBuffers fresh_expected = expected_for(run, fresh);
          operands.upload(fresh, nullptr);
          if (launch(device, kernel, p, operands.operands()).empty()) {
            ProblemBuffers fresh_result = fresh;
            operands.download(fresh_result, nullptr);
            check_result(run, fresh, fresh_result, fresh_expected, where + ", new data at the same addresses",
                         "stale_result");
          }
        }
      }
    }
  } catch (const std::exception& e) {
    checks.fail("verifier_error", e.what());
  }
  verdict.passed = verdict.failed_checks.empty();
  if (verdict.passed) verdict.detail = verdict.summary();
  return verdict;
}

}  // namespace arbiter
