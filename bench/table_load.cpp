// arbiter_bench_table_load [--entries=N]
//
// How long does a context take to load a large tuning table? Writes a table of N entries
// (default 10,000) for this machine and the loaded plugins' real kernels (softmax and
// rmsnorm problems of N different shapes), then times, as medians of several runs:
//   parse     reading and parsing the file (load_table_file)
//   context   creating a context that loads and validates it (every entry's key parsed,
//             the kernel found, its validators compared, supports() asked), minus the
//             same context created without a table
#include "context.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "plugin/plugin_search.hpp"
#include "table/table_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

using namespace arbiter;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int entries = 10000;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--entries=", 0) == 0) entries = std::max(1, std::atoi(argv[i] + 10));
  try {
    const std::string plugins = fmt::format(
        "log_level = \"error\"\n[plugins]\nsearch_default_paths = false\npaths = [\"{}\"]\n", install_plugin_dir().string());
    const std::string path = (std::filesystem::temp_directory_path() / fmt::format("arbiter-table-load-{}.toml", getpid())).string();
    {
      Context context(parse_config(plugins, "bench", ""));
      const KernelRecord* kernel = context.registry().find("cpu.softmax");
      if (kernel == nullptr) throw std::runtime_error("the cpu plugin is not loaded");
      TuningTable table;
      for (int i = 0; i < entries; ++i) {
        TableEntry e;
        e.key = problem_key(parse_problem(fmt::format("softmax f32 rows={} cols={}", 1 + i % 100, 64 + i / 100)).problem);
        e.device = context.device().fingerprint().id();
        e.kernel = kernel->name;
        e.plugin_version = kernel->plugin->version;
        e.build_id = kernel->plugin->build_id;
        e.runtime_version = kernel->plugin->runtime_version;
        e.median_us = 1.0 + i * 1e-3;
        e.p20_us = e.median_us * 0.98;
        e.p80_us = e.median_us * 1.02;
        e.samples = 20;
        e.noise = 0.02;
        e.runner_up = "reference.softmax";
        e.margin = 9.0;
        e.verified = true;
        e.verification = "passed: 3 trials of 2 runs, 6 shapes, max error 1e-7";
        e.when = utc_now();
        table.put(e, context.device().fingerprint());
      }
      write_table_file(path, table);
    }
    const auto bytes = std::filesystem::file_size(path);
    std::vector<double> parse, with_table, without_table;
    size_t valid = 0;
    for (int run = 0; run < 7; ++run) {
      parse.push_back(seconds([&] { load_table_file(path); }));
      without_table.push_back(seconds([&] { Context c(parse_config(plugins, "bench", "")); }));
      with_table.push_back(seconds([&] {
        Context c(parse_config(plugins + fmt::format("[table]\npath = \"{}\"\n", path), "bench", ""));
        valid = c.table() ? c.table()->valid() : 0;
      }));
    }
    std::filesystem::remove(path);
    fmt::print("tuning table of {} entries ({:.1f} MiB), {} valid after validation; medians of 7 runs:\n", entries,
               static_cast<double>(bytes) / (1 << 20), valid);
    fmt::print("  parse (load_table_file):                 {:8.1f} ms\n", median(parse) * 1e3);
    fmt::print("  context with the table, minus without:   {:8.1f} ms  (context alone: {:.1f} ms)\n",
               (median(with_table) - median(without_table)) * 1e3, median(without_table) * 1e3);
    return valid == static_cast<size_t>(entries) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arbiter_bench_table_load: %s\n", e.what());
    return 1;
  }
}
