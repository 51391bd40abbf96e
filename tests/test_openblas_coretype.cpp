// The openblas plugin's core type: the decision (plugins/openblas/openblas_coretype.hpp), and
// what the loaded plugin says about the core it runs (`arbiter plugins`, in a child process:
// OpenBLAS chooses its core once per process). Built into arbiter_openblas_coretype_tests by
// plugins/openblas/CMakeLists.txt.
#include "cpu_features.hpp"
#include "openblas_coretype.hpp"
#include "shell_command.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <link.h>
#include <string>

namespace {

using namespace arbiter::plugins::openblas;

CpuFeatures avx2_cpu() {
  CpuFeatures cpu;
  cpu.avx = cpu.avx2 = cpu.fma = true;
  return cpu;
}

CpuFeatures avx512_cpu() {  // Skylake-SP, Ice Lake-SP
  CpuFeatures cpu = avx2_cpu();
  cpu.avx512f = cpu.avx512cd = cpu.avx512bw = cpu.avx512dq = cpu.avx512vl = true;
  return cpu;
}

CpuFeatures avx512_bf16_cpu() {  // Cooper Lake, Sapphire/Emerald Rapids, Zen 4
  CpuFeatures cpu = avx512_cpu();
  cpu.avx512vnni = cpu.avx512bf16 = true;
  return cpu;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("openblas_coretype.a Prescott pick on an AVX-512 CPU is overridden to SkylakeX") {
  const CoreDecision d = decide_core(avx512_cpu(), {"Prescott", std::nullopt, false});
  CHECK(d.action == CoreAction::reload);
  CHECK(d.core == "SkylakeX");
  CHECK(contains(d.reason, "SkylakeX: overridden from OpenBLAS's own choice Prescott"));
  CHECK(contains(d.reason, "AVX-512 F/CD/BW/DQ/VL"));
}

TEST_CASE("openblas_coretype.a Prescott pick on an AVX-512 CPU with BF16 and VNNI is overridden to Cooperlake") {
  const CoreDecision d = decide_core(avx512_bf16_cpu(), {"Prescott", std::nullopt, false});
  CHECK(d.action == CoreAction::reload);
  CHECK(d.core == "Cooperlake");
}

TEST_CASE("openblas_coretype.weaker picks are overridden to the CPU's level") {
  CHECK(decide_core(avx2_cpu(), {"Nehalem", std::nullopt, false}).core == "Haswell");
  CHECK(decide_core(avx2_cpu(), {"Sandybridge", std::nullopt, false}).core == "Haswell");
  // An OpenBLAS older than Zen 4 takes it for an AVX2 Zen.
  CHECK(decide_core(avx512_bf16_cpu(), {"Zen", std::nullopt, false}).core == "Cooperlake");
  CHECK(decide_core(avx512_cpu(), {"Haswell", std::nullopt, false}).action == CoreAction::reload);
  CpuFeatures avx_only;
  avx_only.avx = true;
  CHECK(decide_core(avx_only, {"Prescott", std::nullopt, false}).core == "Sandybridge");
}

TEST_CASE("openblas_coretype.an explicit OPENBLAS_CORETYPE is kept, even a weak one, and reported as the user's") {
  const CoreDecision d = decide_core(avx512_bf16_cpu(), {"Prescott", std::string("prescott"), false});
  CHECK(d.action == CoreAction::keep);
  CHECK(d.core == "Prescott");
  CHECK(contains(d.reason, "Prescott: the user's OPENBLAS_CORETYPE=prescott"));
  CHECK(contains(d.reason, "this CPU could run Cooperlake"));
  CHECK_FALSE(contains(d.reason, "not a core"));  // OpenBLAS compares names case-insensitively

  const CoreDecision best = decide_core(avx512_bf16_cpu(), {"Cooperlake", std::string("Cooperlake"), false});
  CHECK(best.action == CoreAction::keep);
  CHECK(best.reason == "Cooperlake: the user's OPENBLAS_CORETYPE=Cooperlake");
}

TEST_CASE("openblas_coretype.a user's OPENBLAS_CORETYPE that OpenBLAS does not accept is named, and its own pick kept") {
  const CoreDecision d = decide_core(avx512_bf16_cpu(), {"Cooperlake", std::string("Sapphirerapids"), false});
  CHECK(d.action == CoreAction::keep);
  CHECK(d.core == "Cooperlake");
  CHECK(contains(d.reason, "OPENBLAS_CORETYPE=Sapphirerapids (not a core this OpenBLAS accepts: it chose Cooperlake itself)"));
}

TEST_CASE("openblas_coretype.a pick at the CPU's level is kept") {
  const CoreDecision cooperlake = decide_core(avx512_bf16_cpu(), {"Cooperlake", std::nullopt, false});
  CHECK(cooperlake.action == CoreAction::keep);
  CHECK(cooperlake.core == "Cooperlake");
  CHECK(contains(cooperlake.reason, "Cooperlake: OpenBLAS's own choice, the best this CPU supports"));
  CHECK(decide_core(avx512_cpu(), {"SkylakeX", std::nullopt, false}).action == CoreAction::keep);
  CHECK(decide_core(avx2_cpu(), {"Haswell", std::nullopt, false}).action == CoreAction::keep);
  // Zen's kernels are AVX2 kernels tuned for AMD: as strong as Haswell's, not replaced by them.
  const CoreDecision zen = decide_core(avx2_cpu(), {"Zen", std::nullopt, false});
  CHECK(zen.action == CoreAction::keep);
  CHECK(zen.core == "Zen");
}

TEST_CASE("openblas_coretype.a pick stronger than the plugin knows, or one it does not rank, is kept") {
  const CoreDecision newer = decide_core(avx512_bf16_cpu(), {"Sapphirerapids", std::nullopt, false});
  CHECK(newer.action == CoreAction::keep);
  CHECK(contains(newer.reason, "stronger than Cooperlake"));
  const CoreDecision unranked = decide_core(avx512_cpu(), {"Unknown", std::nullopt, false});
  CHECK(unranked.action == CoreAction::keep);
  CHECK(contains(unranked.reason, "does not rank"));
  CHECK(decide_core(avx512_cpu(), {"", std::nullopt, false}).action == CoreAction::keep);
}

TEST_CASE("openblas_coretype.a CPU without AVX keeps OpenBLAS's choice") {
  CpuFeatures sse_only;
  const CoreDecision d = decide_core(sse_only, {"Nehalem", std::nullopt, false});
  CHECK(d.action == CoreAction::keep);
  CHECK(d.core == "Nehalem");
  CHECK(contains(d.reason, "no AVX"));
  CHECK(decide_core(sse_only, {"Prescott", std::nullopt, false}).action == CoreAction::keep);
}

TEST_CASE("openblas_coretype.AVX-512 without BW, DQ and VL (Knights Landing) counts as AVX2") {
  CpuFeatures knl = avx2_cpu();
  knl.avx512f = knl.avx512cd = true;
  CHECK(best_core_for(knl) == "Haswell");
  CpuFeatures bf16_without_vnni = avx512_cpu();
  bf16_without_vnni.avx512bf16 = true;
  CHECK(best_core_for(bf16_without_vnni) == "SkylakeX");
}

TEST_CASE("openblas_coretype.a library the host loaded first keeps its pick and says how to get the better one") {
  const CoreDecision d = decide_core(avx512_cpu(), {"Prescott", std::nullopt, true});
  CHECK(d.action == CoreAction::keep);
  CHECK(d.core == "Prescott");
  CHECK(contains(d.reason, "before this plugin"));
  CHECK(contains(d.reason, "set OPENBLAS_CORETYPE=SkylakeX before the process starts"));
  const CoreDecision best = decide_core(avx512_cpu(), {"SkylakeX", std::nullopt, true});
  CHECK(best.action == CoreAction::keep);
  CHECK(contains(best.reason, "SkylakeX: OpenBLAS's own choice, the best this CPU supports"));
  CHECK(contains(best.reason, "(loaded by the host before this plugin)"));
}

TEST_CASE("openblas_coretype.core levels follow OpenBLAS's names case-insensitively") {
  CHECK(core_level("Prescott") == 0);
  CHECK(core_level("skylakex") == 4);
  CHECK(core_level("COOPERLAKE") == 5);
  CHECK(core_level("Zen") == core_level("Haswell"));
  CHECK_FALSE(core_level("NeoverseN1").has_value());
}

// ---- the loaded plugin, through `arbiter plugins` in a child process ------------------------

namespace {

using Run = arbiter::test::CommandRun;

// Runs the arbiter program with `environment` (VAR=value ... ) in front, OPENBLAS_CORETYPE
// and the simulation hook unset unless given.
Run run_arbiter(const std::string& environment, const std::string& arguments) {
  return arbiter::test::run_shell_command("env -u OPENBLAS_CORETYPE -u ARBITER_OPENBLAS_SIMULATE_CORE ARBITER_PLUGIN_PATH='" +
                                          std::string(ARBITER_TEST_PLUGIN_DIR) + "' " + environment + " '" +
                                          ARBITER_TEST_CLI + "' " + arguments + " 2>&1");
}

// The openblas plugin's "Core X: why" and its "wraps: OpenBLAS ..." line.
struct Report {
  std::string core, reason, wraps;
};

Report openblas_report(const std::string& plugins_output) {
  Report report;
  const size_t description = plugins_output.find("OpenBLAS cblas_sgemm;");
  if (description == std::string::npos) return report;
  const size_t core = plugins_output.find("Core ", description);
  const size_t end = plugins_output.find('\n', description);
  if (core != std::string::npos && core < end) {
    report.reason = plugins_output.substr(core + 5, end - core - 5);
    report.core = report.reason.substr(0, report.reason.find(':'));
  }
  const size_t wraps = plugins_output.find("wraps: ", end);
  if (wraps != std::string::npos) report.wraps = plugins_output.substr(wraps, plugins_output.find('\n', wraps) - wraps);
  return report;
}

// The ASan runtime this test runs with, where it is a shared library: an ASan-built arbiter
// aborts unless that runtime comes first in LD_PRELOAD. Empty in a build without ASan.
std::string sanitizer_runtime() {
  std::string runtime;
#if defined(__SANITIZE_ADDRESS__)
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* found) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("libasan.so") == std::string::npos) return 0;
        *static_cast<std::string*>(found) = name;
        return 1;
      },
      &runtime);
#endif
  return runtime;
}

[[noreturn]] void skip(const char* why) {
  std::printf("skipped: %s\n", why);
  std::fflush(stdout);
  std::exit(77);
}

}  // namespace

TEST_CASE("openblas_coretype.arbiter plugins names the user's OPENBLAS_CORETYPE and runs it") {
  const Run run = run_arbiter("OPENBLAS_CORETYPE=Prescott", "plugins");
  INFO(run.output);
  REQUIRE(run.status == 0);
  const Report report = openblas_report(run.output);
  CHECK(report.core == "Prescott");
  CHECK(contains(report.reason, "the user's OPENBLAS_CORETYPE=Prescott"));
  CHECK(contains(report.wraps, " Prescott "));  // openblas_get_config() of the library that runs
}

TEST_CASE("openblas_coretype.without OPENBLAS_CORETYPE the plugin runs at least the CPU's best core") {
  const Run run = run_arbiter("", "plugins");
  INFO(run.output);
  REQUIRE(run.status == 0);
  const Report report = openblas_report(run.output);
  REQUIRE_FALSE(report.core.empty());
  CHECK(contains(report.wraps, " " + report.core + " "));
  CHECK(contains(report.reason, "OpenBLAS's own choice"));  // this OpenBLAS knows this CPU, or the reason says not
  const std::optional<std::string> best = best_core_for(this_cpu_features());
  if (best && core_level(report.core)) CHECK(*core_level(report.core) >= *core_level(*best));
}

TEST_CASE("openblas_coretype.a weak first choice is overridden: OpenBLAS is reloaded with the CPU's best core") {
  const std::optional<std::string> best = best_core_for(this_cpu_features());
  if (!best) skip("this CPU has no AVX: there is nothing to override Prescott with");
  const Run run = run_arbiter("ARBITER_OPENBLAS_SIMULATE_CORE=Prescott", "plugins");
  INFO(run.output);
  REQUIRE(run.status == 0);
  const Report report = openblas_report(run.output);
  CHECK(report.core == *best);
  CHECK(contains(report.reason, *best + ": overridden from OpenBLAS's own choice Prescott, because this CPU has"));
  CHECK(contains(report.reason, "[OpenBLAS's first choice simulated: ARBITER_OPENBLAS_SIMULATE_CORE=Prescott]"));
  CHECK(contains(report.wraps, " " + *best + " "));
}

TEST_CASE("openblas_coretype.an OpenBLAS the host loaded first is used as loaded, and reported so") {
  // LD_PRELOAD stands for a host (NumPy...) that had libopenblas loaded before arbiter.
  const std::string asan = sanitizer_runtime();
  const std::string preload = asan.empty() ? "libopenblas.so.0" : "'" + asan + ":libopenblas.so.0'";
  const Run run = run_arbiter("LD_PRELOAD=" + preload + " ARBITER_OPENBLAS_SIMULATE_CORE=Prescott", "plugins");
  INFO(run.output);
  REQUIRE(run.status == 0);
  const Report report = openblas_report(run.output);
  REQUIRE_FALSE(report.core.empty());
  // The host's load chose (the simulation applies only to a load of the plugin's own).
  CHECK((contains(report.reason, "(loaded by the host before this plugin)") ||
         contains(report.reason, "chosen when the host process loaded OpenBLAS, before this plugin")));
  CHECK_FALSE(contains(report.reason, "overridden"));
  CHECK_FALSE(contains(report.reason, "simulated"));
  CHECK(contains(report.wraps, " " + report.core + " "));
}

TEST_CASE("openblas_coretype.the reloaded OpenBLAS computes right answers") {
  if (!best_core_for(this_cpu_features())) skip("this CPU has no AVX: nothing is reloaded");
  const Run run = run_arbiter("ARBITER_OPENBLAS_SIMULATE_CORE=Prescott", "run gemm f32 m=96 n=80 k=72 --kernel=openblas.sgemm");
  INFO(run.output);
  CHECK(run.status == 0);
}
