#include "problem/problem.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/op.hpp"
#include "problem/op_table.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <cstring>

namespace arbiter {

namespace {
arb_problem zero_filled(int32_t op) {
  arb_problem problem;
  std::memset(&problem, 0, sizeof problem);
  problem.struct_size = sizeof problem;
  problem.op = op;
  problem.device_type = kDLCPU;
  return problem;
}
}  // namespace

arb_problem empty_problem(arb_op op) {
  arb_problem problem = zero_filled(op);
  if (const Op* description = find_op(op)) description->set_defaults(problem);
  return problem;
}

arb_problem empty_problem(const Op& op) {
  arb_problem problem = zero_filled(op.code());
  op.set_defaults(problem);
  return problem;
}

namespace {
// " align=256 device=cuda:1", common to both keys.
std::string placement(const arb_problem& p) {
  std::string text = fmt::format(" align={} device={}", p.alignment, device_name(p.device_type));
  if (p.device_id != 0) text += fmt::format(":{}", p.device_id);
  return text;
}
}  // namespace

std::string problem_key(const arb_problem& p) {
  const Op* op = find_op(p.op);
  if (op == nullptr) return "invalid";
  return fmt::format("{} {} {}{}", op->name(), dtype_name(p.dtype), op->key_fields(p), placement(p));
}

std::string problem_class_key(const arb_problem& p) {
  const Op* op = find_op(p.op);
  if (op == nullptr) return "invalid";
  const std::string fields = op->class_fields(p);
  return fmt::format("{} {}{}{}", op->name(), dtype_name(p.dtype), fields.empty() ? "" : " " + fields, placement(p));
}

void check_row_stride(const char* name, int64_t ld, int64_t row_length) {
  if (ld < row_length)
    fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("{} = {} is below the row length {}", name, ld, row_length));
}

void validate_problem(const arb_problem& p) {
  const Op* op = find_op(p.op);
  if (op == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("unknown op code {}", p.op));
  validate_problem(*op, p);
}

void validate_problem(const Op& op, const arb_problem& p) {
  auto invalid = [](const std::string& what) { fail(ARB_ERR_INVALID_ARGUMENT, what); };
  if (p.dtype < ARB_DTYPE_F32 || p.dtype > ARB_DTYPE_BF16) invalid(fmt::format("unsupported dtype code {}", p.dtype));
  if (p.device_type != kDLCPU && p.device_type != kDLCUDA)
    invalid(fmt::format("unsupported device type {} (cpu or cuda)", p.device_type));
  op.validate(p);
}

}  // namespace arbiter
