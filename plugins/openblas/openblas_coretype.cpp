#include "openblas_coretype.hpp"

#include <cctype>
#include <utility>

namespace arbiter::plugins::openblas {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

bool has_avx512_base(const CpuFeatures& cpu) {
  return cpu.avx512f && cpu.avx512cd && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl;
}

// OpenBLAS's x86-64 core names (driver/others/dynamic.c) by the instructions their kernels use.
constexpr std::pair<std::string_view, int> core_levels[] = {
    {"Katmai", 0},      {"Coppermine", 0}, {"Northwood", 0},  {"Prescott", 0},
    {"Banias", 0},      {"Atom", 0},        {"Core2", 0},      {"Penryn", 0},     {"Dunnington", 0},
    {"Athlon", 0},      {"Opteron", 0},     {"Opteron_SSE3", 0}, {"Nano", 0},     {"Bobcat", 0},
    {"Nehalem", 1},     {"Barcelona", 1},
    {"Sandybridge", 2}, {"Bulldozer", 2},   {"Piledriver", 2}, {"Steamroller", 2}, {"Excavator", 2},
    {"Haswell", 3},     {"Zen", 3},
    {"SkylakeX", 4},
    {"Cooperlake", 5},
    {"Sapphirerapids", 6},  // newer OpenBLAS only
};

}  // namespace

std::optional<int> core_level(std::string_view core) {
  if (core.empty()) return std::nullopt;
  for (const auto& [name, level] : core_levels)
    if (same_name(name, core)) return level;
  return std::nullopt;
}

std::optional<std::string> best_core_for(const CpuFeatures& cpu) {
  // Cooperlake = SkylakeX + VNNI + BF16; its kernels are built for that whole set.
  if (has_avx512_base(cpu) && cpu.avx512vnni && cpu.avx512bf16) return "Cooperlake";
  if (has_avx512_base(cpu)) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return std::nullopt;
}

std::string features_text(const CpuFeatures& cpu) {
  const std::optional<std::string> best = best_core_for(cpu);
  if (!best) return "no AVX";
  if (*best == "Cooperlake") return "AVX-512 F/CD/BW/DQ/VL with VNNI and BF16";
  if (*best == "SkylakeX") return "AVX-512 F/CD/BW/DQ/VL";
  if (*best == "Haswell") return "AVX2 and FMA";
  return "AVX";
}

CoreDecision decide_core(const CpuFeatures& cpu, const CoreSituation& situation) {
  const std::string& running = situation.openblas_core;
  const std::optional<std::string> best = best_core_for(cpu);
  const int unranked = -1;
  const int running_level = core_level(running).value_or(unranked);
  const int best_level = best ? core_level(*best).value_or(unranked) : unranked;
  const bool weaker = running_level != unranked && best_level != unranked && running_level < best_level;

  CoreDecision decision{CoreAction::keep, running, ""};
  if (situation.user_coretype) {  // the user's explicit choice wins, even a weak one
    const std::string& asked = *situation.user_coretype;
    decision.reason = running + ": the user's OPENBLAS_CORETYPE=" + asked;
    if (!same_name(asked, running))
      decision.reason += " (not a core this OpenBLAS accepts: it chose " + running + " itself)";
    if (weaker) decision.reason += "; this CPU could run " + *best + " (" + features_text(cpu) + ")";
    return decision;
  }
  // A library the host loaded first was never the plugin's to choose: say so.
  const std::string host_loaded = situation.loaded_before_plugin ? " (loaded by the host before this plugin)" : "";
  if (running_level == unranked) {
    decision.reason = running + ": OpenBLAS's own choice (a core this plugin does not rank: kept)" + host_loaded;
    return decision;
  }
  if (!best) {
    decision.reason = running + ": OpenBLAS's own choice (no AVX on this CPU: nothing stronger to choose)" + host_loaded;
    return decision;
  }
  if (!weaker) {
    decision.reason = running + ": OpenBLAS's own choice, " +
                      (running_level == best_level ? "the best this CPU supports (" + features_text(cpu) + ")"
                                                     : "stronger than " + *best + ", the best this plugin knows") +
                      host_loaded;
    return decision;
  }
  if (situation.loaded_before_plugin) {
    decision.reason = running + ": chosen when the host process loaded OpenBLAS, before this plugin; this CPU could run " +
                      *best + " (" + features_text(cpu) + "): set OPENBLAS_CORETYPE=" + *best +
                      " before the process starts";
    return decision;
  }
  decision.action = CoreAction::reload;
  decision.core = *best;
  decision.reason = *best + ": overridden from OpenBLAS's own choice " + running + ", because this CPU has " +
                    features_text(cpu) + " (OpenBLAS did not recognise the CPU)";
  return decision;
}

}  // namespace arbiter::plugins::openblas
