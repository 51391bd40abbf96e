// Compiling CUDA C++ for the SIMT emulator with the host compiler: preprocess with the
// emulator's stand-in headers and prelude, rewrite (source_rewriter.hpp), compile the
// result. Used by the arbiter-emucc command (CMake builds emulated plugins with it) and at
// run time by the generated-kernel plugin on the emulator.
#pragma once

#include <string>
#include <vector>

namespace arbiter::emucc {

struct CompileJob {
  std::string compiler = "c++";         // the host C++ compiler (g++ 12 or later)
  std::string emulator_include;          // emulator/include: the stand-ins and the prelude
  std::string input, output;             // a .cu source; an object file or a shared library
  bool shared_library = false;           // -shared (link the one source into a .so) instead of -c
  std::vector<std::string> flags;        // -I, -D, -O, -g, -f..., sanitizers: given to every step
  std::vector<std::string> libraries;    // -L, -l, -Wl: after the source, when linking a shared library
  std::string depfile;                   // make-style dependencies of the output, if not empty
  std::string keep_rewritten;            // where to keep the rewritten source, if not empty
};

struct CompileResult {
  bool ok = false;
  std::string log;  // the compiler's messages and the rewriter's errors
};

CompileResult compile_for_emulator(const CompileJob& job);

// The flags emucc adds to a job's own when it compiles (the standard, the alignment trap and
// the race check's instrumentation, compiler workarounds): part of any cache key for its output.
std::vector<std::string> fixed_compile_flags(const std::vector<std::string>& job_flags);

}  // namespace arbiter::emucc
