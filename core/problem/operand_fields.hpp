// The pointer fields of arb_operands by name, in one list: the names the ops' operand
// layouts use (OperandLayout.name), and the order in which the sandbox protocol carries them.
// A pointer appended to arb_operands gets its line here and nowhere else.
#pragma once

#include <arbiter/plugin.h>

#include <cstddef>
#include <cstdint>

namespace arbiter {

struct OperandField {
  const char* name;
  size_t offset;  // of the pointer in arb_operands
};

inline constexpr OperandField kOperandFields[] = {
    {"a", offsetof(arb_operands, a)},
    {"b", offsetof(arb_operands, b)},
    {"c", offsetof(arb_operands, c)},
    {"bias", offsetof(arb_operands, bias)},
    {"d", offsetof(arb_operands, d)},
    {"x", offsetof(arb_operands, x)},
    {"residual", offsetof(arb_operands, residual)},
    {"weight", offsetof(arb_operands, weight)},
    {"y", offsetof(arb_operands, y)},
    {"gate", offsetof(arb_operands, gate)},
    {"up", offsetof(arb_operands, up)},
    {"positions", offsetof(arb_operands, positions)},
    {"q", offsetof(arb_operands, q)},
    {"k", offsetof(arb_operands, k)},
    {"v", offsetof(arb_operands, v)},
    {"o", offsetof(arb_operands, o)},
    {"down", offsetof(arb_operands, down)},
};
inline constexpr int kOperandFieldCount = static_cast<int>(sizeof kOperandFields / sizeof kOperandFields[0]);

// The field itself. Its declared type is void* or const void*, types similar enough that one
// may be accessed as the other.
inline void*& operand_field(arb_operands& o, const OperandField& field) {
  return *reinterpret_cast<void**>(reinterpret_cast<char*>(&o) + field.offset);
}
inline void* operand_field(const arb_operands& o, const OperandField& field) {
  return *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(&o) + field.offset);
}

// Operands that stand in for a call's when only its problem is known (explain from text, a
// composite's supports()): distinct addresses, each of exactly the alignment class `alignment`.
inline arb_operands nominal_operands(int32_t alignment) {
  arb_operands o{};
  o.struct_size = sizeof o;
  uintptr_t i = 1;
  for (const OperandField& field : kOperandFields)
    operand_field(o, field) = reinterpret_cast<void*>((uintptr_t{1} << 40) * i++ + static_cast<uintptr_t>(alignment));
  return o;
}

}  // namespace arbiter
