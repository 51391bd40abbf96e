#include "verify/shadow_check.hpp"

#include "problem/problem_cost.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "verify/accuracy.hpp"
#include "plugin/kernel_call.hpp"
#include "verify/verifier.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string_view>

namespace arbiter {
namespace {

// The scalars the op reads, for the report of a mismatch.
std::string scalars_of(const arb_problem& problem, const arb_operands& o) {
  const std::string text = find_op(problem.op)->scalars_text(o);
  return text.empty() ? "" : ", " + text;
}

}  // namespace

bool shadow_check_due(int64_t one_in) noexcept {
  thread_local int64_t countdown = 0;  // shared by the thread's contexts
  // A countdown above this rate's longest interval was drawn for a context with a lower rate.
  if (--countdown > 0 && countdown < 2 * one_in) return false;
  thread_local std::minstd_rand rng(std::random_device{}());
  // Uniform in [1, 2 one_in - 1]: the mean is one_in, and no launch count is safe.
  countdown = one_in <= 1 ? 1 : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * one_in - 1));
  return true;
}

std::unique_ptr<ShadowCapture> ShadowCheck::capture(const KernelRecord& kernel, const arb_problem& problem,
                                                  const arb_operands& operands, void* stream, std::string* why_not) {
  const KernelRecord* oracle = registry_.oracle(problem.op);
  Device& device = devices_.of(problem.device_type);
  const char* skip = oracle == nullptr                              ? "no oracle for this op"
                     : oracle == &kernel                            ? "the kernel is the oracle"
                     : reference_cost(problem) > kMaxReferenceCost ? "the fp64 reference would cost more than its bound"
                     : device.capturing(stream)                     ? "the stream is being captured into a graph"
                                                                    : nullptr;
  if (skip != nullptr) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    if (why_not != nullptr) *why_not = skip;
    return nullptr;
  }
  auto taken = std::make_unique<ShadowCapture>(
      ShadowCapture{oracle, ProblemBuffers(problem, operands.alpha, operands.beta, operands.eps), FloatControl{},
                    ProcessState{}});
  ProblemBuffers& before = taken->before;
  for (size_t i = 0; i < before.all().size(); ++i) {
    const ProblemBuffers::Operand& o = before.all()[i];
    if (o.is_input) device.download(before.buffer_data(i), operand_pointer(operands, o.name), o.buffer.size(), stream);
  }
  taken->state = ProcessState::now(false);  // one call's descriptors are not compared
  taken->control = FloatControl::now();
  return taken;
}

ShadowOutcome ShadowCheck::judge(const ShadowCapture& capture, const KernelRecord& kernel, const arb_problem& problem,
                                 const arb_operands& operands, void* stream) {
  Device& device = devices_.of(problem.device_type);
  const ProblemBuffers& before = capture.before;
  ProblemBuffers after = before;
  std::string detail = float_control_left_changed(kernel, capture.control);
  // One call's descriptors cannot be told from the application's own; the rest can.
  if (std::string changes = ProcessState::now(false).changes_since(capture.state, 0); !changes.empty()) {
    capture.state.restore();
    detail += (detail.empty() ? "" : "; ") + ("the call left the process's state changed: " + changes + " (put back)");
  }
  for (size_t i = 0; i < after.all().size(); ++i) {
    const ProblemBuffers::Operand& o = after.all()[i];
    device.download(after.buffer_data(i), operand_pointer(operands, o.name), o.buffer.size(), stream);
    if (!o.is_output && detail.empty() && std::memcmp(o.buffer.data(), before.all()[i].buffer.data(), o.buffer.size()) != 0)
      detail = fmt::format("input {} changed during the call", o.name);
  }
  if (detail.empty()) {
    const double tolerance = tolerance_for(kernel, problem);
    Comparison c;
    try {  // the reference on |inputs| runs only when the plain measure fails (verifier.hpp)
      c = compare_with_reference(*capture.oracle, before, after, reference_answer(*capture.oracle, before), tolerance);
    } catch (const std::exception& e) {  // the call itself went through
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return {ShadowOutcome::State::skipped, e.what()};
    }
    checked_.fetch_add(1, std::memory_order_relaxed);
    if (c.accepted(tolerance)) return {ShadowOutcome::State::matched, ""};
    detail = c.specials_match ? fmt::format("relative norm error {:.3g} in {} exceeds {:.2g}", c.error,
                                            c.worst.empty() ? "output" : c.worst, tolerance)
                              : c.first_special_mismatch;
  } else {
    checked_.fetch_add(1, std::memory_order_relaxed);
  }
  mismatched_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < before.all().size(); ++i) {  // what the next kernel must read again
    const ProblemBuffers::Operand& o = before.all()[i];
    if (o.is_input && o.is_output) device.upload(operand_pointer(operands, o.name), o.buffer.data(), o.buffer.size(), stream);
  }
  return {ShadowOutcome::State::mismatched,
          fmt::format("{} (a live call of {}{})", detail, problem_key(problem), scalars_of(problem, operands))};
}

}  // namespace arbiter
