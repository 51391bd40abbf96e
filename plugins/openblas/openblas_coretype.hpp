// Which OpenBLAS core type (kernel set) the openblas plugin runs, and why. A DYNAMIC_ARCH
// OpenBLAS picks its kernels once, when it is loaded, from the CPU models it knows; on a CPU
// newer than the library (Debian's 0.3.21 on Intel family 6 model 207) it falls back to its
// SSE3 "Prescott" kernels, an order of magnitude slower than what the CPU can run. The plugin
// compares OpenBLAS's pick with the best core the CPU's features allow and reloads OpenBLAS
// with OPENBLAS_CORETYPE set only when the pick is weaker. Pure functions: no CPUID, no
// environment, no library here (see cpu_features.hpp and openblas_library.hpp for those).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace arbiter::plugins::openblas {

// The instruction sets that decide which OpenBLAS kernels can run, as usable (the OS saves
// the registers), not merely as listed by CPUID.
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512cd = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
};

// What was found when OpenBLAS was loaded.
struct CoreSituation {
  std::string openblas_core;                  // openblas_get_corename() of the library as loaded
  std::optional<std::string> user_coretype;   // OPENBLAS_CORETYPE from the user's environment
  bool loaded_before_plugin = false;          // the host had it loaded already: its pick is final
};

enum class CoreAction {
  keep,    // run the library as it is loaded
  reload,  // unload it and load it again with OPENBLAS_CORETYPE = decision.core
};

struct CoreDecision {
  CoreAction action = CoreAction::keep;
  std::string core;    // the core that runs after the action
  std::string reason;  // one sentence, for `arbiter plugins` and benchmark reports
};

// The strongest core, among those OpenBLAS 0.3.21 accepts in OPENBLAS_CORETYPE, whose
// kernels this CPU can run: Cooperlake, SkylakeX, Haswell or Sandybridge; none without AVX
// (older kernel sets differ in tuning more than in instructions: OpenBLAS's pick stands).
std::optional<std::string> best_core_for(const CpuFeatures& cpu);

// The instruction-set level of an OpenBLAS core name (case-insensitive, as OpenBLAS compares
// them): 0 SSE2/SSE3, 1 SSE4, 2 AVX, 3 AVX2 + FMA, 4 AVX-512, 5 AVX-512 + BF16, 6 AMX
// (Sapphirerapids, newer OpenBLAS); none for a name this plugin does not know.
std::optional<int> core_level(std::string_view core);

// The features the best core needs, named for the reason text ("AVX512F/BW/VL/DQ + BF16").
std::string features_text(const CpuFeatures& cpu);

// Keep OpenBLAS's pick unless it is weaker than best_core_for(cpu) and the user did not
// choose it (OPENBLAS_CORETYPE wins, whatever it names) and the library can still be
// reloaded (not loaded by the host before the plugin).
CoreDecision decide_core(const CpuFeatures& cpu, const CoreSituation& situation);

}  // namespace arbiter::plugins::openblas
