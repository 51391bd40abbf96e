#include "verify/verification_shapes.hpp"

#include "problem/op_table.hpp"
#include "problem/problem.hpp"

#include <fmt/format.h>

namespace arbiter {

std::vector<VerificationShape> verification_shapes(const arb_problem& p) {
  std::vector<VerificationShape> shapes;
  const Op* op = find_op(p.op);
  if (op == nullptr) return shapes;
  auto add = [&](arb_problem candidate, std::string label) {
    if (candidate.alignment != p.alignment) return;  // this size cannot keep the class
    for (const auto& s : shapes)
      if (same_problem(s.problem, candidate)) return;
    shapes.push_back({candidate, std::move(label)});
  };
  const Sizes verified = op->verification_sizes(p);
  bool shrunk = false;
  std::string sizes_text;
  for (size_t i = 0; i < op->sizes().size(); ++i) {
    const SizeField& size = op->sizes()[i];
    shrunk = shrunk || verified.value[i] != p.*size.member;
    sizes_text += fmt::format("{}{}={}", i == 0 ? "" : " ", size.name, verified.value[i]);
  }
  if (!shrunk) {
    add(p, "problem");
  } else {
    add(op->resized(p, verified), "problem shrunk to " + sizes_text);
  }
  for (const SizedShape& edge : op->edge_shapes(verified)) add(op->resized(p, edge.sizes), edge.label);
  return shapes;
}

}  // namespace arbiter
