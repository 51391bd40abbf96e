// The PTX of one asm statement, parsed once (on its first run) into instructions with their
// operands; %N names the statement's N-th C++ operand. The interpreter (machine.hpp) runs it
// per thread. Only what inline PTX in kernels uses is understood; anything else is an error
// naming the instruction (emulator/README.md lists what is emulated, from the PTX ISA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter::emu::ptx {

struct Operand {
  enum class Kind {
    none,
    asm_operand,  // %N
    local,        // a register the statement declares (.reg), by index
    special,      // %laneid, %tid.x, ...
    immediate,    // an integer, or float bits (0fXXXXXXXX, 0dXXXXXXXXXXXXXXXX)
    label,        // a branch target
    sink,         // _
    vector,       // {a, b, ...}
    address,      // [base + offset] or [tensor map, {coordinates}]
    pair,         // a|b (a result and its predicate)
  } kind = Kind::none;
  int index = 0;        // asm operand number, local register or label
  uint64_t value = 0;   // immediate bits; the offset of an address
  std::string name;     // special register or label name
  bool negated = false; // !p
  std::vector<Operand> elements;  // vector, pair, address (base first, then coordinates if any)
};

struct Instruction {
  std::string opcode;               // as written: "mbarrier.try_wait.parity.shared::cta.b64"
  std::vector<std::string> parts;   // split at '.': "mbarrier", "try_wait", "parity", "shared::cta", "b64"
  std::vector<Operand> operands;
  int guard = -1;                   // @p: the predicate register, -1 for none
  bool guard_negated = false;       // @!p
  int line = 0;                     // within the statement's text, from 1
  bool has(const char* part) const;
};

struct Local {
  std::string name;
  int bits = 32;  // 1 for .pred
};

struct Program {
  std::vector<Instruction> instructions;
  std::vector<Local> locals;
  std::vector<std::pair<std::string, size_t>> labels;  // name -> instruction index
};

// Throws std::runtime_error("line N: what") on text it cannot read.
Program parse(const std::string& text);

}  // namespace arbiter::emu::ptx
