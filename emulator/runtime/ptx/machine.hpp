// Running one asm statement on one emulated thread: its local registers, the C++ operands
// (%N), special registers, and typed reads and writes of every kind of operand. Instruction
// families implement `Handler`s (one file each: basic.cpp, async_copy.cpp, matrix.cpp,
// mbarrier.cpp, tma.cpp, wgmma.cpp) and register them by the opcode's first part.
#pragma once

#include "../engine.hpp"
#include "program.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter::emu::ptx {

class Machine {
 public:
  Machine(const Program& program, AsmOperand* operands, size_t count, const AsmSite& site);

  const Program& program() const { return program_; }
  Where where() const { return where_; }
  ThreadState& thread() const { return thread_; }

  // The value of an operand as `bits` bits (zero-extended; a 'f'/'d' operand as its bits).
  uint64_t read(const Operand& o, int bits) const;
  void write(const Operand& o, uint64_t value, int bits);
  float read_f32(const Operand& o) const;
  double read_f64(const Operand& o) const;
  void write_f32(const Operand& o, float v);
  void write_f64(const Operand& o, double v);
  bool read_pred(const Operand& o) const;
  void write_pred(const Operand& o, bool v);
  // The C++ object behind %N, for instructions that keep a reference (wgmma accumulators).
  AsmOperand& asm_operand(const Operand& o) const;
  // A local register's storage (64 bits) or nullptr.
  uint64_t* local(const Operand& o);

  // An address operand: the base register's value plus the offset.
  uint64_t address(const Operand& o) const;
  // The elements of a vector operand (or the operand itself).
  std::vector<Operand> elements(const Operand& o) const;

  [[noreturn]] void fail(Status status, const std::string& what, const Instruction& in) const;
  [[noreturn]] void unsupported(const Instruction& in) const;

  // Set by a taken branch: the next instruction's index.
  size_t next = 0;

 private:
  const Program& program_;
  AsmOperand* operands_;
  size_t count_;
  const AsmSite& site_;
  Where where_;
  ThreadState& thread_;
  std::vector<uint64_t> locals_;
};

using Handler = void (*)(Machine& m, const Instruction& in);
// The handler of instructions whose opcode starts with `family` ("mbarrier", "cp", ...).
void register_family(const char* family, Handler handler);
Handler find_family(const std::string& family);

// The width in bits of a type part ("b32" -> 32, "f16" -> 16, "pred" -> 1), 0 if not a type.
int type_bits(const std::string& part);

}  // namespace arbiter::emu::ptx
