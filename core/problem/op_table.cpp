#include "problem/op_table.hpp"

#include "common/failure.hpp"
#include "problem/ops/ops.hpp"

#include <fmt/format.h>

namespace arbiter {
namespace {

// Indexed by op code; a gap (ARB_OP_INVALID) stays null.
struct Table {
  std::vector<const Op*> by_code;
  std::vector<const Op*> all;
  Table() {
    for (const Op* op : {&gemm_op(), &rmsnorm_op(), &softmax_op(), &swiglu_op(), &rope_op(), &attention_op(), &mlp_op(), &qkv_op()}) {
      const auto code = static_cast<size_t>(op->code());
      if (by_code.size() <= code) by_code.resize(code + 1, nullptr);
      by_code[code] = op;
      all.push_back(op);
    }
  }
};

const Table& table() {
  static const Table instance;
  return instance;
}

}  // namespace

const Op* find_op(int32_t code) noexcept {
  const auto& by_code = table().by_code;
  return code >= 0 && static_cast<size_t>(code) < by_code.size() ? by_code[static_cast<size_t>(code)] : nullptr;
}

const Op* find_op(std::string_view name) noexcept {
  for (const Op* op : table().all)
    if (name == op->name()) return op;
  return nullptr;
}

const std::vector<const Op*>& all_ops() { return table().all; }

size_t op_code_limit() { return table().by_code.size(); }

std::string op_names() {
  std::string names;
  for (const Op* op : table().all) names += (names.empty() ? "" : ", ") + std::string(op->name());
  return names;
}

void build_call(int32_t op, const void* args, Call& call) {
  const Op* found = find_op(op);
  if (found == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, fmt::format("unknown op {}", op));
  found->build_call(args, call);
}

std::string_view op_name(int32_t op) {
  const Op* found = find_op(op);
  return found != nullptr ? found->name() : "invalid";
}

std::optional<arb_op> parse_op(std::string_view text) {
  const Op* found = find_op(text);
  if (found == nullptr) return std::nullopt;
  return found->code();
}

}  // namespace arbiter
