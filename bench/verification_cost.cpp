// arbiter_bench_verification_cost --suite=FILE [--samples=N]
//
// What the verification gate costs on first use of a problem class: for every problem of a
// suite and every gated CPU kernel of the shipped plugins that supports it, the wall time of
// the gate's verdict (the class's shapes and trials, then the problem once at full size) in
// a fresh context, once with kernels verified in this process (verify.sandbox = "off") and
// once in the kernel sandbox process (verify.sandbox = "all": spawn, load, shared memory,
// the after-return pause, then the in-host re-run of a pass). Median of N fresh contexts
// (p20-p80); the context's creation is not timed.
#include "context.hpp"
#include "plugin/plugin_search.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"
#include "tune/shape_suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace arbiter;

namespace {

std::unique_ptr<Context> context_for(const std::string& plugin_dir, const std::string& sandbox) {
  return std::make_unique<Context>(
      parse_config(fmt::format("log_level = \"error\"\n[plugins]\nsearch_default_paths = false\npaths = [\"{}\"]\n"
                               "[verify]\nsandbox = \"{}\"\n",
                               plugin_dir, sandbox),
                   "bench", ""));
}

struct Cost {
  double median = 0, p20 = 0, p80 = 0;
  std::string summary;
};

Cost measure(const std::string& plugin_dir, const std::string& sandbox, const std::string& kernel_name,
             const arb_problem& problem, int samples) {
  std::vector<double> seconds;
  Cost cost;
  for (int s = 0; s < samples; ++s) {
    const auto context = context_for(plugin_dir, sandbox);
    const KernelRecord* kernel = context->registry().find(kernel_name);
    const auto start = std::chrono::steady_clock::now();
    const Verdict verdict = context->gate().verdict(*kernel, problem, true);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cost.summary = verdict.summary();
  }
  std::sort(seconds.begin(), seconds.end());
  auto at = [&](double q) { return seconds[static_cast<size_t>(q * static_cast<double>(seconds.size() - 1) + 0.5)]; };
  cost.median = at(0.5);
  cost.p20 = at(0.2);
  cost.p80 = at(0.8);
  return cost;
}

}  // namespace

int main(int argc, char** argv) {
  std::string suite_path;
  int samples = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--suite=", 0) == 0) suite_path = a.substr(8);
    else if (a.rfind("--samples=", 0) == 0) samples = std::max(1, std::atoi(a.c_str() + 10));
  }
  if (suite_path.empty()) {
    std::fprintf(stderr, "usage: arbiter_bench_verification_cost --suite=FILE [--samples=N]\n");
    return 2;
  }
  try {
    const std::string dir = install_plugin_dir().string();
    const ShapeSuite suite = load_suite(suite_path);
    const auto probe = context_for(dir, "off");
    fmt::print("# Verification cost per problem class\n\n- suite: `{}` ({})\n- machine: {}\n- method: wall time of "
               "the gate's verdict on first use (the class's shapes and trials, then the problem at full size) in a "
               "fresh context, median of {} contexts (p20-p80); `here`: verify.sandbox = \"off\"; `sandbox`: "
               "verify.sandbox = \"all\" (the kernel sandbox process, then the in-host re-run of a pass)\n\n",
               suite_path, suite.name, probe->device().fingerprint().name, samples);
    fmt::print("| problem | kernel | here, ms | sandbox, ms | sandbox / here | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n");
    for (const SuiteProblem& sp : suite.problems) {
      const arb_problem& p = sp.parsed.problem;
      for (const KernelRecord* kernel : probe->registry().candidates(p.op)) {
        if (!probe->gate().gated(*kernel) || kernel->abi.device_type != kDLCPU) continue;
        if (!kernel_supports(*kernel, p, nullptr)) continue;
        const Cost here = measure(dir, "off", kernel->name, p, samples);
        const Cost boxed = measure(dir, "all", kernel->name, p, samples);
        fmt::print("| `{}` | {} | {:.1f} ({:.1f}-{:.1f}) | {:.1f} ({:.1f}-{:.1f}) | {:.1f} | {} |\n", sp.text,
                   kernel->name, here.median * 1e3, here.p20 * 1e3, here.p80 * 1e3, boxed.median * 1e3,
                   boxed.p20 * 1e3, boxed.p80 * 1e3, boxed.median / here.median, boxed.summary);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arbiter_bench_verification_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
