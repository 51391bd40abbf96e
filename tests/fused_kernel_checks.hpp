// A fused CPU kernel against its op's reference kernel on one problem, shared by the suites of
// the composite ops (test_mlp.cpp, test_qkv_fused.cpp).
#pragma once

#include "context.hpp"
#include "device/problem_buffers.hpp"
#include "problem/op_table.hpp"
#include "problem/problem_text.hpp"
#include "verify/accuracy.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace arbiter::test {

// `kernel` and reference.<op> run on the same inputs, drawn from `seed` (uniform for an even
// seed, normal for an odd one) with the outputs' gaps NaN: the kernel's output must be within
// its tolerance, numbers where the reference has numbers and NaN where it has NaN (the gaps
// left alone, every element written), and no input changed.
inline void check_problem_against_reference(Context& context, const KernelRecord& kernel, const ParsedProblem& parsed,
                                            uint64_t seed) {
  const KernelRecord* reference = context.registry().find("reference." + std::string(op_name(parsed.problem.op)));
  REQUIRE(reference != nullptr);
  ProblemBuffers buffers(parsed.problem, parsed.alpha, parsed.beta, parsed.eps);
  buffers.randomize(seed, input_draw(seed % 2 ? Distribution::normal : Distribution::uniform), OutputFill::nan);
  ProblemBuffers expected = buffers;
  const ProblemBuffers before = buffers;
  context.run_kernel(kernel, parsed.problem, buffers.operands(), nullptr);
  context.run_kernel(*reference, parsed.problem, expected.operands(), nullptr);
  const Comparison c = compare_outputs(buffers, expected);
  CHECK_MESSAGE(c.specials_match, c.first_special_mismatch);
  CHECK(c.finite);
  CHECK_MESSAGE(c.error <= tolerance_for(kernel, parsed.problem), "relative error ", c.error);
  for (size_t i = 0; i < buffers.all().size(); ++i) {
    const ProblemBuffers::Operand& now = buffers.all()[i];
    if (now.is_output) continue;
    CAPTURE(now.name);
    CHECK(std::memcmp(now.buffer.data(), before.all()[i].buffer.data(), now.buffer.size()) == 0);
  }
}

}  // namespace arbiter::test
