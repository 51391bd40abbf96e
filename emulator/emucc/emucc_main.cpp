// arbiter-emucc: compiles CUDA C++ sources for arbiter's SIMT emulator with the host C++
// compiler (emulator/README.md).
//
//   arbiter-emucc [--compiler=CXX] [--emulator-include=DIR] [--keep=FILE] [-MF DEPFILE]
//                 (-c | -shared) SOURCE.cu -o OUTPUT [compiler flags: -I, -D, -O, -g, -f...]
//
// The source is compiled unchanged; see emucc/source_rewriter.hpp for what the one rewriting
// pass does. Exit status 0 on success, 1 on a compile error, 2 on bad arguments.
#include "compile.hpp"

#include <cstdio>
#include <cstring>
#include <string>

#ifndef ARBITER_EMU_INCLUDE_DIR
#error "build with -DARBITER_EMU_INCLUDE_DIR=\"<source>/emulator/include\""
#endif

int main(int argc, char** argv) {
  arbiter::emucc::CompileJob job;
  job.emulator_include = ARBITER_EMU_INCLUDE_DIR;
  if (const char* cxx = std::getenv("CXX")) job.compiler = cxx;
  bool mode_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--compiler=", 0) == 0) job.compiler = a.substr(11);
    else if (a.rfind("--emulator-include=", 0) == 0) job.emulator_include = a.substr(19);
    else if (a.rfind("--keep=", 0) == 0) job.keep_rewritten = a.substr(7);
    else if (a == "-MF" && i + 1 < argc) job.depfile = argv[++i];
    else if (a == "-o" && i + 1 < argc) job.output = argv[++i];
    else if (a == "-c") mode_given = true;
    else if (a == "-shared") job.shared_library = mode_given = true;
    else if (a.size() > 3 && (a.ends_with(".cu") || a.ends_with(".cpp") || a.ends_with(".cc")) && a[0] != '-') job.input = a;
    else job.flags.push_back(a);
  }
  if (!mode_given || job.input.empty() || job.output.empty()) {
    std::fprintf(stderr, "usage: arbiter-emucc [--compiler=CXX] [--emulator-include=DIR] [--keep=FILE] [-MF DEPFILE] "
                         "(-c | -shared) SOURCE.cu -o OUTPUT [flags]\n");
    return 2;
  }
  const arbiter::emucc::CompileResult r = arbiter::emucc::compile_for_emulator(job);
  std::fputs(r.log.c_str(), stderr);
  return r.ok ? 0 : 1;
}
