// The op table: every op the runtime knows (core/problem/ops/), looked up by code or name.
#pragma once

#include "problem/op.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// nullptr for a code or name that is not an op.
const Op* find_op(int32_t code) noexcept;
const Op* find_op(std::string_view name) noexcept;

// Every op, in code order.
const std::vector<const Op*>& all_ops();
// Every op code is below this.
size_t op_code_limit();
// "gemm, rmsnorm, softmax", for messages.
std::string op_names();

// The C API's entry: `args` points to the args struct of `op`. Throws Failure.
void build_call(int32_t op, const void* args, Call& call);

// The op's name, "invalid" for anything else.
std::string_view op_name(int32_t op);
std::optional<arb_op> parse_op(std::string_view text);

}  // namespace arbiter
