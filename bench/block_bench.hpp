// What the block benchmarks (mlp_block.cpp, qkv_block.cpp) share: packed tensors of the run's
// dtype, timing by medians after warm-up, a context whose dispatch is pinned to one kernel of
// a composite op (its table tuned in the run), and explain's chain section read back.
#pragma once

#include <arbiter/arbiter.h>
#include <arbiter/float16.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace arbiter::bench {

using Clock = std::chrono::steady_clock;


inline std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    items.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

inline double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

[[noreturn]] inline void die(const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, arb_last_error());
  std::exit(1);
}
inline void check(arb_status status, const char* what) {
  if (status != ARB_OK) die(what);
}

// A packed row-major tensor of the run's dtype, owning its memory.
struct Buffer {
  Buffer(std::vector<int64_t> shape, DLDataType dtype, int32_t arb, float scale, uint64_t seed)
      : shape_(std::move(shape)), arb_dtype(arb) {
    size_t count = 1;
    for (int64_t s : shape_) count *= static_cast<size_t>(s);
    storage.resize(count * (dtype.bits / 8) + 256);
    // 256-byte aligned, as the chain's intermediates are: the steps called alone are the
    // chain's own problems (one alignment class), with the kernels tuned for them.
    data = storage.data() + (256 - reinterpret_cast<uintptr_t>(storage.data()) % 256) % 256;
    size_bytes = count * (dtype.bits / 8);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (size_t i = 0; i < count; ++i) arbiter::store_float(data, static_cast<int64_t>(i), arb, scale * uniform(rng));
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape_.size());
    t.dtype = dtype;
    t.shape = shape_.data();
  }
  Buffer(const Buffer&) = delete;
  double at(size_t i) const { return arbiter::load_float(data, static_cast<int64_t>(i), arb_dtype); }
  size_t count() const { return size_bytes / (t.dtype.bits / 8); }
  std::vector<int64_t> shape_;
  int32_t arb_dtype;
  std::vector<unsigned char> storage;
  unsigned char* data = nullptr;
  size_t size_bytes = 0;
  DLTensor t{};
};

struct Stats {
  double median = 0, p20 = 0, p80 = 0;
};
inline Stats timed(int samples, const std::function<void(int)>& call) {
  for (int i = 0; i < 3; ++i) call(i);
  std::vector<double> s;
  for (int i = 0; i < samples; ++i) {
    const auto start = Clock::now();
    call(i);
    s.push_back(seconds_since(start));
  }
  std::sort(s.begin(), s.end());
  auto q = [&](double f) { return s[static_cast<size_t>(f * static_cast<double>(s.size() - 1) + 0.5)]; };
  return {q(0.5), q(0.2), q(0.8)};
}

inline std::string explain(arb_context ctx, int32_t op, const void* args) {
  size_t length = 0;
  arb_explain(ctx, op, args, nullptr, 0, &length);
  std::string text(length, '\0');
  check(arb_explain(ctx, op, args, text.data(), text.size(), &length), "arb_explain");
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  return text;
}

// The kernel a line of explain's chain section names ("  2. gemm ...: openblas.sgemm (rule)").
inline std::string step_kernel(const std::string& explanation, int step) {
  const std::string tag = "  " + std::to_string(step) + ". ";
  const size_t at = explanation.find(tag);
  if (at == std::string::npos) return "?";
  const size_t colon = explanation.find(": ", explanation.find("device=", at));
  const size_t end = explanation.find(' ', colon + 2);
  return explanation.substr(colon + 2, end - colon - 2);
}

// A context whose table (policy tune-missing) is `table` and whose dispatch sends `op` to `kernel`.
inline arb_context make_context(const std::string& table, const char* op, const std::string& kernel,
                                const std::string& log_level) {
  const std::string toml = "log_level = \"" + log_level + "\"\n[table]\npath = \"" + table +
                           "\"\npolicy = \"tune-missing\"\n[[dispatch.override]]\nop = \"" + op + "\"\nkernel = \"" +
                           kernel + "\"\n";
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml.c_str();
  arb_context ctx = nullptr;
  check(arb_context_create(&options, &ctx), "arb_context_create");
  return ctx;
}

// The options every block benchmark takes: --rows=1,4,16 --dtype=bf16|f16|f32 --samples=N
// --fused=KERNEL,... --log=error|warn|info. take() answers whether `arg` was one of them.
struct CommonOptions {
  std::vector<int64_t> rows = {1, 4, 16};
  std::string dtype = "bf16";
  int samples = 15;
  std::vector<std::string> fused;
  std::string log_level = "error";  // --log=warn shows failed verifications, which change the tuned steps
  bool take(const std::string& arg) {
    auto value = [&](const char* key) { return arg.rfind(key, 0) == 0 ? arg.substr(std::strlen(key)) : std::string(); };
    if (auto v = value("--dtype="); !v.empty()) dtype = v;
    else if (auto v = value("--samples="); !v.empty()) samples = std::stoi(v);
    else if (auto v = value("--fused="); !v.empty()) fused = split(v);
    else if (auto v = value("--log="); !v.empty()) log_level = v;
    else if (auto v = value("--rows="); !v.empty()) {
      rows.clear();
      for (const std::string& r : split(v)) rows.push_back(std::stoll(r));
    } else {
      return false;
    }
    return true;
  }
  DLDataType dl_dtype() const {
    return dtype == "f32" ? DLDataType{kDLFloat, 32, 1} : dtype == "f16" ? DLDataType{kDLFloat, 16, 1} : DLDataType{kDLBfloat, 16, 1};
  }
  int32_t arb_dtype() const { return dtype == "f32" ? ARB_DTYPE_F32 : dtype == "f16" ? ARB_DTYPE_F16 : ARB_DTYPE_BF16; }
};

// A run's contexts over one table in a fresh folder: the chain's, and one per fused kernel,
// each with dispatch pinned for `op`. The folder goes with them.
struct BlockContexts {
  BlockContexts(const char* op, const std::string& chain_name, const CommonOptions& o)
      : dir(std::filesystem::temp_directory_path() /
            (std::string("arbiter-") + op + "-bench-" + std::to_string(static_cast<long long>(getpid())))) {
    std::filesystem::create_directories(dir);
    const std::string table = (dir / "table.toml").string();
    chain = make_context(table, op, chain_name, o.log_level);
    for (const std::string& name : o.fused) fused.push_back(make_context(table, op, name, o.log_level));
  }
  ~BlockContexts() {
    arb_context_destroy(chain);
    for (arb_context f : fused) arb_context_destroy(f);
    std::filesystem::remove_all(dir);
  }
  BlockContexts(const BlockContexts&) = delete;
  std::filesystem::path dir;
  arb_context chain = nullptr;
  std::vector<arb_context> fused;
};

// One block shape raced as an application sees it. Metric 3: the chain's first call (which
// tunes each step; the table's policy is tune-missing) and the block's own tuning (chain and
// fused kernels raced). Metric 2: the chain and each fused kernel timed, each fused output
// compared with the chain's. call(ctx, i, y) runs the block on `ctx` with input set i % 2 into
// y (nullptr: that set's own output, y0 or y1) and answers the status. Rows of the two reports'
// tables are appended to tuning and blocks; explanation is the chain's explain, chain_median its
// block time.
struct BlockRace {
  int64_t rows = 0;
  int samples = 0;
  double weight_bytes = 0;
  std::string tuning, blocks, explanation;
  double chain_median = 0;  // seconds
};

template <typename Call>
void race_block(BlockRace& race, int32_t op, const void* args, arb_context chain,
                const std::vector<arb_context>& fused, const std::vector<std::string>& fused_names, const Buffer& y0,
                Buffer& y1, Buffer& yf, Call call) {
  auto start = Clock::now();
  check(call(chain, 0, nullptr), "the chain's first call");
  const double steps_tuned = seconds_since(start);
  race.explanation = explain(chain, op, args);
  const std::string key = race.explanation.substr(9, race.explanation.find('\n') - 9);
  start = Clock::now();
  arb_tune_options tune = ARB_TUNE_OPTIONS_INIT;
  arb_report report = nullptr;
  const char* problems[] = {key.c_str()};
  tune.problems = problems;
  tune.problem_count = 1;
  tune.table_path = "";  // reported, not written: the overrides choose here
  const bool block_tuned = arb_tune(chain, &tune, &report) == ARB_OK;
  const double block_tuning = seconds_since(start);
  if (report != nullptr) arb_report_destroy(report);
  const auto rows = static_cast<long long>(race.rows);
  char line[512];
  std::snprintf(line, sizeof line, "| %lld | %.2f s | %s |\n", rows, steps_tuned,
                block_tuned ? (std::to_string(block_tuning).substr(0, 5) + " s").c_str() : "failed");
  race.tuning += line;

  const Stats chained = timed(race.samples, [&](int i) { check(call(chain, i, nullptr), "the chain"); });
  race.chain_median = chained.median;
  check(call(chain, 0, nullptr), "the chain");  // y0: the chain's answer
  for (size_t f = 0; f < fused.size(); ++f) {
    if (call(fused[f], 0, &yf.t) != ARB_OK) {  // not for this problem or CPU: say why
      std::snprintf(line, sizeof line, "| %lld | %s | %.3f ms | not run: %.300s | | | | |\n", rows, fused_names[f].c_str(),
                    chained.median * 1e3, arb_last_error());
      race.blocks += line;
      continue;
    }
    const Stats fast =
        timed(race.samples, [&](int i) { check(call(fused[f], i, i % 2 ? &y1.t : &yf.t), "the fused kernel"); });
    check(call(fused[f], 0, &yf.t), "the fused kernel");
    double diff = 0, ref = 0;
    for (size_t i = 0; i < y0.count(); ++i) {
      diff += (y0.at(i) - yf.at(i)) * (y0.at(i) - yf.at(i));
      ref += yf.at(i) * yf.at(i);
    }
    std::snprintf(line, sizeof line, "| %lld | %s | %.3f ms | %.3f ms | **%.2fx** | %.1f GB/s | %.1f GB/s | %.1e |\n", rows,
                  fused_names[f].c_str(), chained.median * 1e3, fast.median * 1e3, chained.median / fast.median,
                  race.weight_bytes / chained.median * 1e-9, race.weight_bytes / fast.median * 1e-9, std::sqrt(diff / ref));
    race.blocks += line;
  }
}

// Metric 1's rows for one shape: each step of the chain timed alone, with the kernel the
// chain's explain names for it, and their sum beside the chain's block time.
inline void append_steps(std::string& per_op, int64_t rows, const std::string& explanation,
                         const std::vector<std::pair<const char*, Stats>>& steps, const char* chain_name,
                         double chain_median) {
  char line[512];
  double sum = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const Stats& t = steps[s].second;
    std::snprintf(line, sizeof line, "| %lld | %zu. %s | %s | %.3f ms | %.3f ms | %.3f ms |\n", static_cast<long long>(rows),
                  s + 1, steps[s].first, step_kernel(explanation, static_cast<int>(s + 1)).c_str(), t.median * 1e3,
                  t.p20 * 1e3, t.p80 * 1e3);
    per_op += line;
    sum += t.median;
  }
  std::snprintf(line, sizeof line, "| %lld | sum of the %zu | | %.3f ms | | (%s: %.3f ms) |\n", static_cast<long long>(rows),
                steps.size(), sum * 1e3, chain_name, chain_median * 1e3);
  per_op += line;
}

// The three metrics' tables, then the method (`weights`: what the GB/s divide, `inputs`: how
// the inputs were drawn).
inline void print_block_report(int samples, const char* chain_name, const char* weights, const std::string& per_op,
                               const std::string& blocks, const std::string& tuning, const char* inputs) {
  std::printf("## 1. Kernel runtime per op (each step of the chain called alone; median of %d calls)\n\n", samples);
  std::printf("| rows | step | kernel (tuned) | median | p20 | p80 |\n| ---: | --- | --- | ---: | ---: | ---: |\n%s\n", per_op.c_str());
  std::printf("## 2. Block time (median of %d calls; GB/s: %s' bytes over the time)\n\n", samples, weights);
  std::printf("| rows | fused kernel | %s | fused | fused speedup | chain GB/s | fused GB/s | chain vs fused (rel. norm) |\n"
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n%s\n", chain_name, blocks.c_str());
  std::printf("## 3. Tuning time\n\n| rows | first chain call (tunes each step) | the block tuned (chain and fused raced) |\n"
              "| ---: | ---: | ---: |\n%s\n", tuning.c_str());
  std::printf("Method: a table in a fresh folder (policy tune-missing): every step tuned in this run; one thread; 3 warm-up "
              "calls, then the median of %d; x and y rotated over 2 buffer sets, %s read from memory each call "
              "(larger than any cache); %s.\n", samples, weights, inputs);
}

}  // namespace arbiter::bench
