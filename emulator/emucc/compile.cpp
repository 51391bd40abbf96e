#include "compile.hpp"

#include "source_rewriter.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

extern char** environ;

namespace arbiter::emucc {
namespace {

namespace fs = std::filesystem;

// Runs a program (no shell), its standard output and error appended to `log`.
bool run(const std::vector<std::string>& argv, std::string& log) {
  char path_template[] = "/tmp/arbiter-emucc-log-XXXXXX";
  const int fd = mkstemp(path_template);
  if (fd < 0) {
    log += "emucc: cannot create a temporary file\n";
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (spawned == 0) waitpid(pid, &status, 0);
  std::ifstream in(path_template);
  log += std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  ::close(fd);
  ::unlink(path_template);
  if (spawned != 0) {
    log += "emucc: cannot run " + argv[0] + "\n";
    return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string temporary_path(const std::string& output, const char* suffix) {
  std::random_device random;
  return output + ".emucc-" + std::to_string(::getpid()) + "-" + std::to_string(random() % 100000) + suffix;
}

}  // namespace

std::vector<std::string> fixed_compile_flags(const std::vector<std::string>& job_flags) {
  // #pragma unroll is nvcc's; GCC would warn about every one. -fno-tree-ter: GCC 12.2 at -O1
  // and above drops the `& 0xffff0000` of `bit_cast<float>(bit_cast<unsigned>(v) & 0xffff0000u)`
  // when v was clamped by fminf/fmaxf on another path (emulator/README.md has the reproducer;
  // clang and -O0 are right), which made a cheating kernel look exact.
  std::vector<std::string> flags = {"-std=c++20", "-Wno-unknown-pragmas", "-fno-tree-ter"};
  // A GPU faults on a misaligned access; x86 mostly does not. The alignment sanitizer traps
  // (SIGILL) where the type's alignment is broken. ThreadSanitizer's instrumentation (never
  // its runtime: the emulator answers its calls, runtime/race_check.hpp) reports every load
  // and store, for the race check on shared memory. A build with the full sanitizers
  // (AddressSanitizer cannot be combined with the thread instrumentation) has neither.
  const bool sanitized = std::any_of(job_flags.begin(), job_flags.end(),
                                     [](const std::string& f) { return f.rfind("-fsanitize=", 0) == 0; });
  if (!sanitized)
    flags.insert(flags.end(), {"-fsanitize=alignment", "-fsanitize-undefined-trap-on-error", "-fsanitize=thread",
                               "--param=tsan-instrument-func-entry-exit=0"});
  return flags;
}

CompileResult compile_for_emulator(const CompileJob& job) {
  CompileResult result;
  const std::string preprocessed = temporary_path(job.output, ".ii");
  const std::string rewritten = job.keep_rewritten.empty() ? temporary_path(job.output, ".emu.ii") : job.keep_rewritten;
  struct Cleanup {
    std::vector<std::string> files;
    ~Cleanup() {
      for (const std::string& f : files) std::remove(f.c_str());
    }
  } cleanup;
  cleanup.files.push_back(preprocessed);
  if (job.keep_rewritten.empty()) cleanup.files.push_back(rewritten);

  // 1. Preprocess: the stand-ins first on the include path, the prelude before the source.
  std::vector<std::string> pre = {job.compiler, "-E", "-std=c++20", "-x", "c++", "-I", job.emulator_include,
                                  "-include", "arbiter_emulator/prelude.hpp"};
  pre.insert(pre.end(), job.flags.begin(), job.flags.end());
  if (!job.depfile.empty()) pre.insert(pre.end(), {"-MD", "-MF", job.depfile, "-MT", job.output});
  pre.insert(pre.end(), {job.input, "-o", preprocessed});
  if (!run(pre, result.log)) return result;

  // 2. Rewrite.
  std::ifstream in(preprocessed, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  RewriteResult r = rewrite_cuda_source(text.str());
  for (const std::string& e : r.errors) result.log += e + ": the emulator's source rewriting\n";
  if (!r.errors.empty()) return result;
  {
    std::ofstream out(rewritten, std::ios::binary);
    out << r.text;
    if (!out) {
      result.log += "emucc: cannot write " + rewritten + "\n";
      return result;
    }
  }

  // 3. Compile the rewritten text as preprocessed C++ (no second preprocessing).
  std::vector<std::string> compile = {job.compiler, "-x", "c++-cpp-output"};
  const std::vector<std::string> fixed = fixed_compile_flags(job.flags);
  compile.insert(compile.end(), fixed.begin(), fixed.end());
  compile.insert(compile.end(), job.flags.begin(), job.flags.end());
  // A shared library is compiled and linked in two steps, so that the driver does not link
  // libtsan for -fsanitize=thread.
  const std::string object = job.shared_library ? temporary_path(job.output, ".o") : job.output;
  if (job.shared_library) cleanup.files.push_back(object);
  compile.insert(compile.end(), {"-c", rewritten, "-o", object});
  if (!run(compile, result.log)) return result;
  if (!job.shared_library) {
    result.ok = true;
    return result;
  }
  std::vector<std::string> link = {job.compiler, "-shared", "-o", job.output, object};
  for (const std::string& f : job.flags)  // the optimisation and sanitizer flags, not -fsanitize=thread
    if (f.rfind("-fsanitize", 0) == 0 || f.rfind("-O", 0) == 0 || f == "-g" || f == "-fPIC" || f == "-pthread")
      link.push_back(f);
  link.insert(link.end(), job.libraries.begin(), job.libraries.end());
  result.ok = run(link, result.log);
  return result;
}

}  // namespace arbiter::emucc
