#include "problem/problem_text.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/op.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
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

// A number the whole value spells (std::stof or std::stod: out of range is an error too).
template <typename Number, Number (*Parse)(const std::string&, size_t*)>
Number to_number(std::string_view key, std::string_view value) {
  const std::string s(value);
  size_t used = 0;
  Number v = 0;
  try {
    v = Parse(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty()) bad(fmt::format("'{}={}': expected a number", key, value));
  return v;
}
float parse_float(const std::string& s, size_t* used) { return std::stof(s, used); }
double parse_double(const std::string& s, size_t* used) { return std::stod(s, used); }

bool to_flag(std::string_view key, std::string_view value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  bad(fmt::format("'{}={}': expected 0 or 1", key, value));
}

}  // namespace

std::optional<std::string_view> ProblemFields::take(std::string_view key) {
  auto it = fields_.find(key);
  if (it == fields_.end()) return std::nullopt;
  const std::string_view v = it->second;
  fields_.erase(it);
  return v;
}

int64_t ProblemFields::take_int(std::string_view key, int64_t fallback) {
  const auto v = take(key);
  return v ? to_int(key, *v) : fallback;
}

bool ProblemFields::take_ints(std::string_view key, int64_t* values, size_t count) {
  const auto v = take(key);
  if (!v) return false;
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t comma = v->find(',', at);
    const bool last = i + 1 == count;
    if (last != (comma == std::string_view::npos))
      arbiter::bad(fmt::format("'{}={}': expected {} comma-separated integers", key, *v, count));
    const size_t end = last ? v->size() : comma;
    values[i] = to_int(key, v->substr(at, end - at));
    at = end + 1;
  }
  return true;
}

int64_t ProblemFields::require_int(std::string_view key) {
  const auto v = take(key);
  if (!v) arbiter::bad(fmt::format("{} needs '{}='", op_, key));
  return to_int(key, *v);
}

bool ProblemFields::take_flag(std::string_view key) {
  const auto v = take(key);
  return v ? to_flag(key, *v) : false;
}

std::optional<float> ProblemFields::take_float(std::string_view key) {
  const auto v = take(key);
  if (!v) return std::nullopt;
  return to_number<float, parse_float>(key, *v);
}

std::optional<double> ProblemFields::take_double(std::string_view key) {
  const auto v = take(key);
  if (!v) return std::nullopt;
  return to_number<double, parse_double>(key, *v);
}

void ProblemFields::bad(const std::string& what) const { arbiter::bad(what); }

std::optional<std::string> ProblemFields::leftover() const {
  if (fields_.empty()) return std::nullopt;
  return fields_.begin()->first;
}

ParsedProblem parse_problem(std::string_view text) {
  const std::vector<std::string_view> items = words(text);
  if (items.size() < 2) bad(fmt::format("'{}': expected '<op> <dtype> key=value ...'", text));
  const Op* op = find_op(items[0]);
  if (op == nullptr) bad(fmt::format("unknown op '{}' ({})", items[0], op_names()));
  const auto dtype = parse_dtype(items[1]);
  if (!dtype) bad(fmt::format("unknown dtype '{}' (f32, f16, bf16)", items[1]));

  std::map<std::string, std::string_view, std::less<>> map;
  for (size_t i = 2; i < items.size(); ++i) {
    const size_t eq = items[i].find('=');
    if (eq == std::string_view::npos || eq == 0) bad(fmt::format("'{}': expected key=value", items[i]));
    if (!map.emplace(std::string(items[i].substr(0, eq)), items[i].substr(eq + 1)).second)
      bad(fmt::format("'{}' given twice", items[i].substr(0, eq)));
  }
  ProblemFields fields(op->name(), std::move(map));

  ParsedProblem parsed;
  arb_problem& p = parsed.problem;
  p = empty_problem(op->code());
  p.dtype = *dtype;
  if (auto device = fields.take("device")) {
    const size_t colon = device->find(':');
    const auto type = parse_device(device->substr(0, colon));
    if (!type) bad(fmt::format("unknown device '{}' (cpu, cuda, cuda:N)", *device));
    p.device_type = *type;
    if (colon != std::string_view::npos) {
      const int64_t id = to_int("device", device->substr(colon + 1));
      if (id < 0 || id > INT32_MAX) bad(fmt::format("'device={}': the device number must be from 0 to {}", *device, INT32_MAX));
      p.device_id = static_cast<int32_t>(id);
    }
  }
  op->read_fields(fields, parsed);
  // Buffers are assumed 256-byte aligned, so strides decide; align= states it outright.
  // Checked before it is narrowed to arb_problem's 32 bits (align=4294967297 is not align=1).
  const int64_t alignment = fields.take_int("align", stride_alignment(p));
  if (alignment < 1 || alignment > 256 || (alignment & (alignment - 1)) != 0)
    bad(fmt::format("align={} must be a power of two from 1 to 256", alignment));
  p.alignment = static_cast<int32_t>(alignment);
  if (auto left = fields.leftover()) bad(fmt::format("unknown field '{}' for {}", *left, op->name()));
  validate_problem(p);
  // Operands that could not exist in memory make no problem (the C API refuses such tensors
  // the same way): (rows - 1) * ld + cols elements of the dtype, within PTRDIFF_MAX bytes.
  for (const OperandLayout& operand : op->operands(p)) {
    int64_t elements = 0, bytes = 0;
    if (__builtin_mul_overflow(operand.rows - 1, operand.ld, &elements) ||
        __builtin_add_overflow(elements, operand.cols, &elements) ||
        __builtin_mul_overflow(elements, static_cast<int64_t>(operand_element_bytes(operand.index, p)), &bytes))
      bad(fmt::format("operand {} ({} x {}, row stride {}) does not fit in memory", operand.name, operand.rows,
                      operand.cols, operand.ld));
  }
  return parsed;
}

}  // namespace arbiter
