// The verification gate's checks (docs/architecture.md, "The verification gate"): a kernel takes part in dispatch for
// a problem class only after it matched the fp64 reference on it. Each trial runs every
// verification shape on fresh random inputs (ordinary and hard draws), with scalars drawn per
// run (alpha, beta, eps: the common values and others), in fresh buffers at new addresses,
// with outputs filled by NaN poison, zeros or random values, and guards of a drawn canary
// (docs/verification.md, "Trials and inputs"), and then checks:
//   launch_failed     the kernel reported an error (or threw)
//   unwritten_output  NaN left in an output where the reference has a number
//   accuracy          relative norm error above the tolerance (the dtype's, scaled per shape)
//   guard             a guard canary or the padding between rows was overwritten
//   input_modified    an operand that is only read changed
//   rerun_differs     a second run on the same inputs differs in any bit (unless the
//                     kernel declares itself nondeterministic)
//   stale_result      new data at the same addresses gave the old answer
//   concurrent_calls  (CPU) a launch among several at once on shared inputs was wrong
//   wrote_after_return (sandboxed) an operand changed some time after the launch returned
#pragma once

#include "device/device.hpp"
#include "device/problem_buffers.hpp"
#include "verify/accuracy.hpp"
#include "plugin/plugin_record.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter {

struct Verdict {
  bool passed = false;
  std::vector<std::string> failed_checks;  // check names, in the order first seen
  std::string detail;                      // the first failure of each check, or a summary
  int trials = 0;
  int shapes = 0;          // verification shapes the kernel supported
  double max_error = 0.0;  // worst relative norm error seen
  bool from_table = false; // read from a tuning-table entry, not reached in this process
  bool failed(const std::string& check) const;
  std::string summary() const;  // one line, for tables and reports
};

class KernelSandbox;

struct VerifyOptions {
  int trials = 3;            // at least three (docs/architecture.md, "The verification gate")
  uint64_t seed = 0;         // varies every input and scalar; the gate draws one per verification
  bool full_problem = false; // also run the problem at full size (if the reference can afford it)
  double tolerance = 0;      // base relative norm error accepted (scaled per shape by tolerance_at); 0: the dtype's
  // Launch the kernel in this sandbox process (kernel_sandbox.hpp), on operands in its
  // device(), which is then the `device` argument; nullptr: in this process.
  KernelSandbox* sandbox = nullptr;
  // With a sandbox: after the other checks, one more launch whose operands are read again
  // this long after it returned (wrote_after_return); 0: not checked.
  int after_return_ms = 0;
};

// Verifies `kernel` on the class of `problem` against `reference` (the reference plugin's
// kernel for the same op), on `device`. Never throws for a misbehaving kernel: that is a
// failed verdict.
Verdict verify_kernel(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                      const arb_problem& problem, const VerifyOptions& options);

// The scalars of one run (alpha, beta, eps), drawn from `seed`: the common values (alpha 1,
// beta 1, eps 1e-5) as often as others; `draw` picks which (0-2 listed values, 3 random).
struct Scalars {
  float alpha = 1.0f, beta = 0.0f, eps = 1e-5f;
};
Scalars draw_scalars(const arb_problem& problem, uint64_t seed, int draw);

// The fp64 reference's answer for these inputs, computed on the host (the oracle is a CPU
// kernel). Throws if the reference fails.
ProblemBuffers reference_answer(const KernelRecord& reference, const ProblemBuffers& inputs);

// `result` against `expected`, the reference's answer on `inputs`: relative to the reference's
// norm or, where that fails, to the norm of the reference on the inputs' absolute values, the
// scale an honest sum's rounding error grows with (docs/verification.md, "Tolerances").
// Throws if the reference fails.
Comparison compare_with_reference(const KernelRecord& reference, const ProblemBuffers& inputs,
                                  const ProblemBuffers& result, const ProblemBuffers& expected, double tolerance);

// The problem itself at full size, once, with inputs, scalars, output fill and guards drawn
// as in verify_kernel: the gate's check of each new problem a class verdict is used for
// (verification_gate.hpp). The caller keeps it within kMaxReferenceCost.
Verdict check_full_size(Device& device, const KernelRecord& kernel, const KernelRecord& reference,
                        const arb_problem& problem, uint64_t seed, double tolerance, KernelSandbox* sandbox = nullptr);

// The most verification spends on the full-size problem, in the fp64 reference's
// multiply-adds (reference_cost in problem/problem_cost.hpp): a few seconds at most on a CPU.
constexpr double kMaxReferenceCost = double(1 << 28);
// The same for a full-size check on the SIMT emulator, where the kernel is much slower.
constexpr double kMaxEmulatedFullSizeCost = double(1 << 21);

// The identity a verdict belongs to: plugin, version, build id, the SHA-256 of the plugin's
// file (read by the host), kernel, problem class.
std::string verdict_key(const KernelRecord& kernel, const arb_problem& problem);

}  // namespace arbiter
