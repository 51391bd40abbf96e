// arbiter_bench_table_load: how long a context takes to load a large tuning table
// (bench/table_load.sh runs the modes below and the callgrind count).
//
//   [--entries=N]            writes a table of N entries (default 10,000) for this machine and
//                            the cpu plugin's real kernels (softmax problems of N shapes), then
//                            reports medians of 7 runs of:
//                              read       load_table_file (WrittenTableReader, in pieces)
//                              toml++     the same text through toml++ (parse_general)
//                              sha256     hashing the file (what a cache keyed by content pays)
//                              context    a context that loads and validates it (every key
//                                         parsed, the kernel found, validators compared,
//                                         supports() asked), minus one without a table
//   --big [--mib=M]          a table of ~M MiB (default 100): N entries of this machine and as
//                            many of 9 other devices as fill it; each run is a fresh process
//                            (--load) whose peak RSS (VmHWM) is reported against one without
//   --write=PATH [--mib=M]   writes the table only (--mib adds the other devices' entries)
//   --load=PATH              one context with the table at PATH ("-": none); prints ms and
//                            the valid entries (the callgrind workload of table_load.sh)
#include "arbiter_base/sha256.hpp"
#include "common/text_file.hpp"
#include "context.hpp"
#include "plugin/plugin_search.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "table/table_file.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

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

std::string config_text(const std::string& table) {
  std::string text = fmt::format("log_level = \"error\"\n[plugins]\nsearch_default_paths = false\npaths = [\"{}\"]\n",
                                 install_plugin_dir().string());
  if (!table.empty()) text += fmt::format("[table]\npath = \"{}\"\nmax_file_mib = 1024\n", table);
  return text;
}

// N entries of this machine's cpu.softmax; with other_bytes, entries of 9 other devices too.
void write_table(const std::string& path, int entries, size_t other_bytes) {
  Context context(parse_config(config_text(""), "bench", ""));
  const KernelRecord* kernel = context.registry().find("cpu.softmax");
  if (kernel == nullptr) throw std::runtime_error("the cpu plugin is not loaded");
  TuningTable table;
  TableEntry e;
  e.kernel = kernel->name;
  e.plugin_version = kernel->plugin->version;
  e.build_id = kernel->plugin->build_id;
  e.runtime_version = kernel->plugin->runtime_version;
  e.plugin_sha256 = kernel->plugin->sha256;
  e.samples = 20;
  e.noise = 0.02;
  e.runner_up = "reference.softmax";
  e.margin = 9.0;
  e.verified = true;
  e.verification = "passed: 3 trials of 2 runs, 6 shapes, max error 1e-7";
  e.when = utc_now();
  auto add = [&](int i, const DeviceFingerprint& device) {
    e.key = problem_key(parse_problem(fmt::format("softmax f32 rows={} cols={}", 1 + i % 100, 64 + i / 100)).problem);
    e.device = device.id();
    e.median_us = 1.0 + i * 1e-3;
    e.p20_us = e.median_us * 0.98;
    e.p80_us = e.median_us * 1.02;
    table.put(e, device);
  };
  for (int i = 0; i < entries; ++i) add(i, context.device().fingerprint());
  if (other_bytes > 0) {
    const size_t per_entry = table.to_toml().size() / static_cast<size_t>(entries);
    const size_t others = other_bytes / per_entry;
    for (size_t i = 0; i < others; ++i) {
      DeviceFingerprint other{"cpu", fmt::format("Other CPU {}", i % 9), "avx2 fma"};
      add(static_cast<int>(i / 9), other);
    }
  }
  write_table_file(path, table);
}

// One context with the table (or none): the child of --big and callgrind's workload.
// This process's peak resident memory in KiB (VmHWM: of this program alone, unlike ru_maxrss,
// which counts what the process held before exec).
long peak_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

// Prints the context's time, the valid and other devices' entries, the time of checking
// every entry (the first valid()) and the peak RSS.
int load_once(const std::string& path) {
  std::unique_ptr<Context> c;
  const double s = seconds([&] { c = std::make_unique<Context>(parse_config(config_text(path == "-" ? "" : path), "bench", "")); });
  size_t valid = 0;
  const double check = seconds([&] { valid = c->table() ? c->table()->valid() : 0; });
  fmt::print("{:.3f} {} {} {:.3f} {}\n", s * 1e3, valid, c->table() ? c->table()->other_devices() : 0, check * 1e3,
             peak_rss_kib());
  return 0;
}

// Runs `--load=path` in a fresh process: its output and its peak RSS in KiB.
std::string run_child(const char* self, const std::string& path, long* peak_kib) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    const std::string arg = "--load=" + path;
    ::execl(self, self, arg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("the --load child failed");
  *peak_kib = 0;
  std::sscanf(out.c_str(), "%*f %*u %*u %*f %ld", peak_kib);
  return out;
}

int big(const char* self, int entries, int mib) {
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("arbiter-table-big-{}.toml", getpid())).string();
  write_table(path, entries, static_cast<size_t>(mib) << 20);
  const auto bytes = std::filesystem::file_size(path);
  std::vector<double> with_ms, without_ms, hash_ms, check_ms;
  std::vector<double> with_rss, without_rss;
  std::string last;
  for (int run = 0; run < 5; ++run) {
    long rss = 0;
    last = run_child(self, path, &rss);
    double ms = 0, check = 0;
    std::sscanf(last.c_str(), "%lf %*u %*u %lf", &ms, &check);
    with_ms.push_back(ms);
    check_ms.push_back(check);
    with_rss.push_back(static_cast<double>(rss));
    without_ms.push_back(std::stod(run_child(self, "-", &rss)));
    without_rss.push_back(static_cast<double>(rss));
  }
  for (int run = 0; run < 3; ++run)
    hash_ms.push_back(seconds([&] {
                        Sha256 h;
                        h.update(read_text_file(path, "table", ARB_ERR_TABLE, size_t(1) << 31));
                        h.hex_digest();
                      }) * 1e3);
  std::filesystem::remove(path);
  size_t valid = 0, others = 0;
  std::sscanf(last.c_str(), "%*f %zu %zu", &valid, &others);
  fmt::print("tuning table of {:.1f} MiB: {} entries of this machine ({} valid), {} of other devices; medians of 5 fresh processes:\n",
             static_cast<double>(bytes) / (1 << 20), entries, valid, others);
  fmt::print("  context with the table:     {:8.1f} ms, peak RSS {:7.1f} MiB\n", median(with_ms), median(with_rss) / 1024);
  fmt::print("  context without a table:    {:8.1f} ms, peak RSS {:7.1f} MiB\n", median(without_ms),
             median(without_rss) / 1024);
  fmt::print("  difference:                 {:8.1f} ms, {:7.1f} MiB\n", median(with_ms) - median(without_ms),
             (median(with_rss) - median(without_rss)) / 1024);
  fmt::print("  then checking every entry of this machine (the first valid()): {:.1f} ms\n", median(check_ms));
  fmt::print("  sha256 of the file (read + hash, {}): {:.1f} ms\n",
             Sha256::uses_sha_extensions() ? "SHA extensions" : "portable code", median(hash_ms));
  return valid == static_cast<size_t>(entries) ? 0 : 1;
}

int standard(int entries) {
  const std::string plugins = config_text("");
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("arbiter-table-load-{}.toml", getpid())).string();
  write_table(path, entries, 0);
  const auto bytes = std::filesystem::file_size(path);
  std::vector<double> read, general, hash, with_table, without_table, check;
  size_t valid = 0;
  for (int run = 0; run < 7; ++run) {
    read.push_back(seconds([&] { load_table_file(path); }));
    general.push_back(seconds([&] { TuningTable::parse_general(read_text_file(path, "table", ARB_ERR_TABLE), path); }));
    hash.push_back(seconds([&] {
      Sha256 h;
      h.update(read_text_file(path, "table", ARB_ERR_TABLE));
      h.hex_digest();
    }));
    without_table.push_back(seconds([&] { Context c(parse_config(plugins, "bench", "")); }));
    std::unique_ptr<Context> c;
    with_table.push_back(seconds([&] { c = std::make_unique<Context>(parse_config(config_text(path), "bench", "")); }));
    check.push_back(seconds([&] { valid = c->table() ? c->table()->valid() : 0; }));
  }
  std::filesystem::remove(path);
  fmt::print("tuning table of {} entries ({:.1f} MiB), {} valid after validation; medians of 7 runs:\n", entries,
             static_cast<double>(bytes) / (1 << 20), valid);
  fmt::print("  read (load_table_file):                  {:8.1f} ms\n", median(read) * 1e3);
  fmt::print("  toml++ (parse_general, for comparison):  {:8.1f} ms\n", median(general) * 1e3);
  fmt::print("  sha256 of the file (read + hash, {}): {:.1f} ms\n",
             Sha256::uses_sha_extensions() ? "SHA extensions" : "portable code", median(hash) * 1e3);
  fmt::print("  context with the table, minus without:   {:8.1f} ms  (context alone: {:.1f} ms)\n",
             (median(with_table) - median(without_table)) * 1e3, median(without_table) * 1e3);
  fmt::print("  then checking every entry (the first valid()): {:.1f} ms; a lookup checks only its own entry\n",
             median(check) * 1e3);
  return valid == static_cast<size_t>(entries) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int entries = 10000, mib = 0;
  bool big_mode = false;
  std::string write, load;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--entries=", 0) == 0) entries = std::max(1, std::atoi(argv[i] + 10));
    else if (arg.rfind("--mib=", 0) == 0) mib = std::max(1, std::atoi(argv[i] + 6));
    else if (arg == "--big") big_mode = true;
    else if (arg.rfind("--write=", 0) == 0) write = arg.substr(8);
    else if (arg.rfind("--load=", 0) == 0) load = arg.substr(7);
    else {
      std::fprintf(stderr, "usage: %s [--entries=N] [--big] [--mib=M] [--write=PATH] [--load=PATH]\n", argv[0]);
      return 2;
    }
  }
  try {
    if (!load.empty()) return load_once(load);
    if (!write.empty()) {
      write_table(write, entries, static_cast<size_t>(mib) << 20);
      return 0;
    }
    if (big_mode) return big("/proc/self/exe", entries, mib > 0 ? mib : 100);
    return standard(entries);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arbiter_bench_table_load: %s\n", e.what());
    return 1;
  }
}
