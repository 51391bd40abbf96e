// arbiter_bench_tuned_dispatch --suite=FILE --table=PATH [--samples=N]
//
// Is tuned dispatch worth it? For every problem of a suite, the time of a call through
// dispatch (Context::run: selection-cache hit, then the kernel) with:
//   tuned     the tuning table at PATH, replayed (run `arbiter tune` first);
//   <plugin>  only that plugin dispatching (its highest-priority kernel that supports the
//             problem), for each shipped plugin that supports it;
// timed interleaved, in batches over buffer sets rotated past the last-level cache, median
// of N samples with p20/p80. The bar (issue 3): tuned is never slower than the best single
// plugin by more than the noise, and beats OpenBLAS-only dispatch on the small shapes.
#include "context.hpp"
#include "arbiter_base/counted.hpp"
#include "device/device_operands.hpp"
#include "problem/problem.hpp"
#include "plugin/plugin_search.hpp"
#include "tune/shape_suite.hpp"
#include "tune/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace arbiter;

namespace {

struct Contestant {
  std::string name;  // "tuned" or a plugin name
  std::unique_ptr<Context> context;
  std::vector<double> samples;
  std::string kernel;
};

std::string plugin_config(const std::string& dir, const std::string& extra) {
  return fmt::format("log_level = \"error\"\n[plugins]\nsearch_default_paths = false\npaths = [\"{}\"]\n{}", dir, extra);
}

TimingStats stats(std::vector<double> v) {
  TimingStats s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  s.median = at(0.5);
  s.p20 = at(0.2);
  s.p80 = at(0.8);
  s.samples = static_cast<int>(v.size());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string suite_path, table_path;
  int samples = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--suite=", 0) == 0) suite_path = a.substr(8);
    else if (a.rfind("--table=", 0) == 0) table_path = a.substr(8);
    else if (a.rfind("--samples=", 0) == 0) samples = std::max(20, std::atoi(a.c_str() + 10));
  }
  if (suite_path.empty() || table_path.empty()) {
    std::fprintf(stderr, "usage: arbiter_bench_tuned_dispatch --suite=FILE --table=PATH [--samples=N >= 20]\n");
    return 2;
  }
  try {
    const std::string dir = install_plugin_dir().string();
    const ShapeSuite suite = load_suite(suite_path);
    const char* plugins[] = {"cpu", "openblas", "reference"};
    std::map<std::string, std::unique_ptr<Context>> contexts;
    contexts["tuned"] = std::make_unique<Context>(
        parse_config(plugin_config(dir, fmt::format("[table]\npath = \"{}\"\npolicy = \"replay\"\n", table_path)), "tuned", ""));
    for (const char* p : plugins)  // the reference stays loaded as the gate's oracle, ranked last
      contexts[p] = std::make_unique<Context>(parse_config(
          plugin_config(dir, fmt::format("enable = [\"{}\", \"reference\"]\n[plugins.priority]\n{} = 1000\n", p, p)), p, ""));
    Device& device = contexts["tuned"]->device();

    fmt::print("# Tuned dispatch against single-plugin dispatch\n\n- suite: `{}` ({})\n- table: `{}`\n- samples: {} per "
               "contestant, interleaved; each a batch of calls through Context::run lasting >= 50 us, over buffer sets "
               "rotated past the {} MiB last-level cache; median (p20-p80)\n- machine: {}\n",
               suite_path, suite.name, table_path, samples, device.last_level_cache_bytes() >> 20,
               device.fingerprint().name);
    for (const auto& plugin : contexts["openblas"]->registry().plugins())  // the core OpenBLAS runs, and why
      if (plugin->name == "openblas" && plugin->state == PluginState::loaded)
        fmt::print("- openblas plugin: {} ({})\n", plugin->description, plugin->runtime_version);
    fmt::print("\n");
    fmt::print("| problem | tuned | best single plugin | tuned / best | openblas only | speedup over openblas only | bar |\n");
    fmt::print("| --- | --- | --- | ---: | --- | ---: | --- |\n");
    int failures = 0;
    for (const SuiteProblem& sp : suite.problems) {
      const arb_problem& p = sp.parsed.problem;
      std::vector<Contestant> contestants;
      for (auto& [name, context] : contexts) {
        const Decision d = context->dispatcher().decide(p, Dispatcher::Mode::dispatch);
        if (d.kernel == nullptr) continue;
        if (name != "tuned" && d.kernel->plugin->name != name) continue;  // the plugin cannot run it
        if (name == "tuned" && d.rule.find("tuning table") != 0)
          throw std::runtime_error("no valid table entry for " + problem_key(p) + ": run `arbiter tune` first");
        contestants.push_back({name, nullptr, {}, d.kernel->name});
      }
      // Buffer sets past the cache, shared by all contestants.
      ProblemBuffers host(p, sp.parsed.alpha, sp.parsed.beta, sp.parsed.eps);
      host.randomize(7);
      std::vector<std::unique_ptr<DeviceOperands>> sets;
      sets.push_back(std::make_unique<DeviceOperands>(device, host, nullptr));
      const size_t wanted = std::clamp<size_t>(2 * device.last_level_cache_bytes() / std::max<size_t>(sets[0]->bytes(), 1), 1, 256);
      while (sets.size() < wanted) sets.push_back(std::make_unique<DeviceOperands>(device, host, nullptr));
      size_t next = 0;
      auto time_batch = [&](Context& context, int64_t batch) {
        const auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < batch; ++i) context.run(p, sets[next++ % sets.size()]->operands(), nullptr);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(batch);
      };
      std::vector<int64_t> batch(contestants.size(), 1);
      for (size_t c = 0; c < contestants.size(); ++c) {
        Context& context = *contexts[contestants[c].name];
        time_batch(context, 3);
        batch[c] = std::clamp<int64_t>(static_cast<int64_t>(50e-6 / std::max(time_batch(context, 3), 1e-9)) + 1, 1, 100000);
      }
      for (int s = 0; s < samples; ++s)
        for (size_t c = 0; c < contestants.size(); ++c)
          contestants[c].samples.push_back(time_batch(*contexts[contestants[c].name], batch[c]));

      const Contestant* tuned = nullptr;
      const Contestant* best = nullptr;
      const Contestant* openblas = nullptr;
      for (const Contestant& c : contestants) {
        if (c.name == "tuned") tuned = &c;
        else if (!best || stats(c.samples).median < stats(best->samples).median) best = &c;
        if (c.name == "openblas") openblas = &c;
      }
      const TimingStats t = stats(tuned->samples), b = stats(best->samples);
      const double noise = measured_noise(t, b);
      const bool same_kernel = tuned->kernel == best->kernel;  // then any gap is only noise
      const bool within = same_kernel || t.median <= b.median * (1 + noise);
      failures += within ? 0 : 1;
      auto cell = [](const Contestant& c) {
        const TimingStats s = stats(c.samples);
        return fmt::format("{} {:.3g} us ({:.3g}-{:.3g})", c.kernel, s.median * 1e6, s.p20 * 1e6, s.p80 * 1e6);
      };
      std::string vs_openblas = "-", openblas_cell = "-";
      if (openblas) {
        openblas_cell = cell(*openblas);
        vs_openblas = fmt::format("{:.2f}x", stats(openblas->samples).median / t.median);
      }
      fmt::print("| {} | {} | {}: {} | {:.3f} | {} | {} | {} |\n", sp.text, cell(*tuned), best->name, cell(*best),
                 t.median / b.median, openblas_cell, vs_openblas,
                 same_kernel ? "ok (the same kernel)"
                 : within    ? fmt::format("ok (noise {:.1f}%)", noise * 100)
                             : fmt::format("SLOWER beyond noise {:.1f}%", noise * 100));
      std::fflush(stdout);
    }
    fmt::print("\n{}; tuned slower than the best single plugin by more than the noise on {}.\n",
               counted(static_cast<long long>(suite.problems.size()), "problem"), failures);
    return failures > 0 ? 3 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arbiter_bench_tuned_dispatch: %s\n", e.what());
    return 1;
  }
}
