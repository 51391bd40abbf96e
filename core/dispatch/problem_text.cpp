#include "dispatch/problem_text.hpp"

#include "common/failure.hpp"
#include "common/names.hpp"
#include "dispatch/problem.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace arbiter {
namespace {

[[noreturn]] void bad(const std::string& what) { fail(ARB_ERR_INVALID_ARGUMENT, "problem syntax: " + what); }

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t' && text[j] != '\n') ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

int64_t to_int(std::string_view key, std::string_view value) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size())
    bad(fmt::format("'{}={}': expected an integer", key, value));
  return v;
}

float to_float(std::string_view key, std::string_view value) {
  const std::string s(value);
  size_t used = 0;
  float v = 0;
  try {
    v = std::stof(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty()) bad(fmt::format("'{}={}': expected a number", key, value));
  return v;
}

bool to_flag(std::string_view key, std::string_view value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  bad(fmt::format("'{}={}': expected 0 or 1", key, value));
}

}  // namespace

ParsedProblem parse_problem(std::string_view text) {
  const std::vector<std::string_view> items = words(text);
  if (items.size() < 2) bad(fmt::format("'{}': expected '<op> <dtype> key=value ...'", text));
  const auto op = parse_op(items[0]);
  if (!op) bad(fmt::format("unknown op '{}' (gemm, rmsnorm, softmax)", items[0]));
  const auto dtype = parse_dtype(items[1]);
  if (!dtype) bad(fmt::format("unknown dtype '{}' (f32, f16, bf16)", items[1]));

  std::map<std::string, std::string_view, std::less<>> fields;
  for (size_t i = 2; i < items.size(); ++i) {
    const size_t eq = items[i].find('=');
    if (eq == std::string_view::npos || eq == 0) bad(fmt::format("'{}': expected key=value", items[i]));
    if (!fields.emplace(std::string(items[i].substr(0, eq)), items[i].substr(eq + 1)).second)
      bad(fmt::format("'{}' given twice", items[i].substr(0, eq)));
  }
  auto take = [&](std::string_view key) -> std::optional<std::string_view> {
    auto it = fields.find(key);
    if (it == fields.end()) return std::nullopt;
    std::string_view v = it->second;
    fields.erase(it);
    return v;
  };
  auto take_int = [&](std::string_view key, int64_t fallback) {
    auto v = take(key);
    return v ? to_int(key, *v) : fallback;
  };
  auto take_flag = [&](std::string_view key) {
    auto v = take(key);
    return v ? to_flag(key, *v) : false;
  };
  auto require_int = [&](std::string_view key) {
    auto v = take(key);
    if (!v) bad(fmt::format("{} needs '{}='", items[0], key));
    return to_int(key, *v);
  };

  ParsedProblem parsed;
  arb_problem& p = parsed.problem;
  p = empty_problem(*op);
  p.dtype = *dtype;
  if (auto device = take("device")) {
    const size_t colon = device->find(':');
    const auto type = parse_device(device->substr(0, colon));
    if (!type) bad(fmt::format("unknown device '{}' (cpu, cuda, cuda:N)", *device));
    p.device_type = *type;
    if (colon != std::string_view::npos) p.device_id = static_cast<int32_t>(to_int("device", device->substr(colon + 1)));
  }
  // Per-call scalars, for the ops that have them (anything else is an unknown field below).
  if (*op == ARB_OP_GEMM) {
    if (auto alpha = take("alpha")) parsed.alpha = to_float("alpha", *alpha);
    if (auto beta = take("beta")) parsed.beta = to_float("beta", *beta);
  }
  if (*op == ARB_OP_RMSNORM) {
    if (auto eps = take("eps")) parsed.eps = to_float("eps", *eps);
    if (!(parsed.eps >= 0.0f)) bad(fmt::format("eps={} must be >= 0", parsed.eps));
  }

  const auto element = static_cast<uint64_t>(dtype_size(p.dtype));
  int32_t natural_alignment = 256;
  if (*op == ARB_OP_GEMM) {
    p.m = require_int("m");
    p.n = require_int("n");
    p.k = require_int("k");
    p.trans_a = take_flag("ta");
    p.trans_b = take_flag("tb");
    if (auto act = take("act")) {
      auto a = parse_activation(*act);
      if (!a) bad(fmt::format("unknown activation '{}' (none, relu, gelu, gelu_tanh, silu)", *act));
      p.activation = *a;
    }
    p.has_bias = take_flag("bias");
    p.has_c = parsed.beta != 0.0f;
    p.c_is_d = take_flag("inplace");
    if (p.c_is_d && !p.has_c) bad("inplace=1 needs a non-zero beta");
    p.lda = take_int("lda", p.trans_a ? p.m : p.k);
    p.ldb = take_int("ldb", p.trans_b ? p.k : p.n);
    p.ldd = take_int("ldd", p.n);
    p.ldc = p.has_c ? (p.c_is_d ? p.ldd : take_int("ldc", p.n)) : 0;
    natural_alignment = alignment_class({p.lda * element, p.ldb * element, p.ldc * element, p.ldd * element});
  } else {
    p.rows = require_int("rows");
    p.cols = require_int("cols");
    p.ld_x = take_int("ldx", p.cols);
    p.ld_y = take_int("ldy", p.cols);
    if (*op == ARB_OP_RMSNORM) {
      p.has_residual = take_flag("residual");
      if (p.has_residual) p.ld_residual = take_int("ldr", p.cols);
    }
    natural_alignment =
        alignment_class({p.ld_x * element, p.ld_y * element, p.ld_residual * element});
  }
  // Buffers are assumed 256-byte aligned, so strides decide; align= states it outright.
  p.alignment = static_cast<int32_t>(take_int("align", natural_alignment));
  if (p.alignment < 1 || p.alignment > 256 || (p.alignment & (p.alignment - 1)) != 0)
    bad(fmt::format("align={} must be a power of two from 1 to 256", p.alignment));
  if (!fields.empty()) bad(fmt::format("unknown field '{}' for {}", fields.begin()->first, items[0]));
  validate_problem(p);
  return parsed;
}

}  // namespace arbiter
