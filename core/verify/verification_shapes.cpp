#include "verify/verification_shapes.hpp"

#include "problem/op_table.hpp"
#include "problem/ops/shape_helpers.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace arbiter {
namespace {

// Row strides of `resized` with the padding (stride minus columns) each had in `original`,
// rounded up to keep the alignment class.
arb_problem keep_padding(const Op& op, const arb_problem& original, arb_problem resized) {
  const std::vector<StrideField> before = op.strides(original), after = op.strides(resized);
  for (size_t i = 0; i < after.size() && i < before.size(); ++i) {
    const int64_t padding = original.*before[i].member - before[i].least;
    resized.*after[i].member =
        stride_with_alignment(after[i].least + padding, dtype_size(original.dtype), original.alignment);
  }
  op.tie_strides(resized);
  resized.alignment = stride_alignment(resized);
  return resized;
}

// Row strides drawn one by one: the least of the class half the time, padded by up to 64
// elements otherwise, so that no kernel can assume strides equal to the columns; and each
// different from those drawn before it, so that no kernel can assume them equal to each other
// (swiglu's up stepped with gate's stride passed whenever two draws agreed on every shape).
arb_problem draw_strides(const Op& op, arb_problem p, int32_t alignment, std::mt19937_64& rng) {
  std::vector<int64_t> drawn;
  for (const StrideField& field : op.strides(p)) {
    int64_t padding = rng() % 2 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 64);
    int64_t stride = stride_with_alignment(field.least + padding, dtype_size(p.dtype), alignment);
    for (int tries = 0; tries < 1024 && std::find(drawn.begin(), drawn.end(), stride) != drawn.end(); ++tries)
      stride = stride_with_alignment(field.least + ++padding, dtype_size(p.dtype), alignment);
    drawn.push_back(stride);
    p.*field.member = stride;
  }
  op.tie_strides(p);
  p.alignment = stride_alignment(p);
  return p;
}

std::string sizes_text(const Op& op, const Sizes& sizes) {
  std::string text;
  for (size_t i = 0; i < op.sizes().size(); ++i) text += fmt::format("{}{}={}", i == 0 ? "" : " ", op.sizes()[i].name, sizes.value[i]);
  return text;
}

}  // namespace

bool verified_unshrunk(const arb_problem& p) {
  const Op* op = find_op(p.op);
  if (op == nullptr) return false;
  const Sizes verified = op->verification_sizes(p);
  for (size_t i = 0; i < op->sizes().size(); ++i)
    if (verified.value[i] != p.*op->sizes()[i].member) return false;
  return true;
}

std::vector<VerificationShape> verification_shapes(const arb_problem& p, uint64_t seed) {
  std::vector<VerificationShape> shapes;
  const Op* op = find_op(p.op);
  if (op == nullptr) return shapes;
  std::mt19937_64 rng(seed ^ 0x94d049bb133111ebull);
  auto add = [&](arb_problem candidate, std::string label) {
    if (candidate.alignment != p.alignment) return;  // this size cannot keep the class
    for (const auto& s : shapes)
      if (same_problem(s.problem, candidate)) return;
    shapes.push_back({candidate, std::move(label)});
  };
  const Sizes verified = op->verification_sizes(p);
  Sizes full;
  bool shrunk = false;
  for (size_t i = 0; i < op->sizes().size(); ++i) {
    full.value[i] = p.*op->sizes()[i].member;
    shrunk = shrunk || verified.value[i] != full.value[i];
  }
  if (!shrunk)
    add(p, "problem");
  else
    add(keep_padding(*op, p, op->resized(p, verified)), "problem shrunk to " + sizes_text(*op, verified));
  for (const SizedShape& edge : op->edge_shapes(verified))
    add(draw_strides(*op, op->resized(p, edge.sizes), p.alignment, rng), edge.label);
  // Each size the shrink brought down, in full, with the other sizes small.
  for (size_t i = 0; shrunk && i < op->sizes().size(); ++i) {
    if (verified.value[i] == full.value[i]) continue;
    Sizes one = verified;
    for (size_t j = 0; j < op->sizes().size(); ++j) one.value[j] = std::min<int64_t>(verified.value[j], 8);
    one.value[i] = full.value[i];
    const arb_problem candidate = keep_padding(*op, p, op->resized(p, one));
    if (reference_cost(candidate) <= kMaxFullDimensionCost)
      add(candidate, fmt::format("{} in full ({})", op->sizes()[i].name, sizes_text(*op, one)));
  }
  return shapes;
}

}  // namespace arbiter
