// The Llama MLP block on the CPU, fused against the chain of single ops, as an application sees
// it (the public C API only). Three metrics, never mixed:
//   1. kernel runtime per op: each of the chain's calls (rmsnorm, the gate/up gemm, swiglu, the
//      down gemm with x as C) made by itself, with the kernel dispatch chose for it;
//   2. block time: arb_mlp run by chain.mlp (those calls, dispatched from inside) and by each
//      fused kernel (cpu.mlp_fused; cpu.mlp_bf16_avx512 where it runs), and each fused
//      kernel's speedup over the chain;
//   3. tuning time: the first chain call of a shape, which tunes each step's problem (the
//      table's policy is tune-missing), and the tuning of the block itself (both candidates).
// Method: a table in a fresh folder, so every step is tuned in this run and then used; a block
// time is the median of --samples calls after 3 warm-up calls, x and y rotated over 2 buffer
// sets (the weights, hundreds of MB, are read from memory every call: no cache holds them);
// inputs uniform in [-1, 1] (the weights scaled by 1/sqrt(fan-in), as a trained layer's), and
// the two outputs checked against each other. One thread (OMP_NUM_THREADS=1 is set for the
// vendor libraries): the fused kernel is single-threaded.
//
//   arbiter_bench_mlp_block [--hidden=4096] [--inter=14336] [--rows=1,4,16] [--dtype=bf16] [--samples=15]
//                           [--fused=cpu.mlp_fused,cpu.mlp_bf16_avx512] [--log=error]
// A fused kernel that does not take the problem (another dtype, a CPU without its ISA) is
// listed as not run, with the library's reason.
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
#include <vector>

#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int64_t hidden = 4096, inter = 14336;
  std::vector<int64_t> rows = {1, 4, 16};
  std::string dtype = "bf16";
  int samples = 15;
  std::vector<std::string> fused = {"cpu.mlp_fused", "cpu.mlp_bf16_avx512"};
  std::string log_level = "error";  // --log=warn shows failed verifications, which change the tuned steps
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    items.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "arbiter_bench_mlp_block: %s: %s\n", what, arb_last_error());
  std::exit(1);
}
void check(arb_status status, const char* what) {
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
Stats timed(int samples, const std::function<void(int)>& call) {
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

std::string explain(arb_context ctx, const arb_mlp_args& args) {
  size_t length = 0;
  arb_explain(ctx, ARB_OP_MLP, &args, nullptr, 0, &length);
  std::string text(length, '\0');
  check(arb_explain(ctx, ARB_OP_MLP, &args, text.data(), text.size(), &length), "arb_explain");
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  return text;
}

// The kernel a line of explain's chain section names ("  2. gemm ...: openblas.sgemm (rule)").
std::string step_kernel(const std::string& explanation, int step) {
  const std::string tag = "  " + std::to_string(step) + ". ";
  const size_t at = explanation.find(tag);
  if (at == std::string::npos) return "?";
  const size_t colon = explanation.find(": ", explanation.find("device=", at));
  const size_t end = explanation.find(' ', colon + 2);
  return explanation.substr(colon + 2, end - colon - 2);
}

arb_context make_context(const std::string& table, const char* kernel, const std::string& log_level) {
  const std::string toml = "log_level = \"" + log_level + "\"\n[table]\npath = \"" + table +
                           "\"\npolicy = \"tune-missing\"\n[[dispatch.override]]\nop = \"mlp\"\nkernel = \"" + kernel + "\"\n";
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml.c_str();
  arb_context ctx = nullptr;
  check(arb_context_create(&options, &ctx), "arb_context_create");
  return ctx;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) { return a.rfind(key, 0) == 0 ? a.substr(std::strlen(key)) : std::string(); };
    if (auto v = value("--hidden="); !v.empty()) o.hidden = std::stoll(v);
    else if (auto v = value("--inter="); !v.empty()) o.inter = std::stoll(v);
    else if (auto v = value("--dtype="); !v.empty()) o.dtype = v;
    else if (auto v = value("--samples="); !v.empty()) o.samples = std::stoi(v);
    else if (auto v = value("--fused="); !v.empty()) o.fused = split(v);
    else if (auto v = value("--log="); !v.empty()) o.log_level = v;
    else if (auto v = value("--rows="); !v.empty()) {
      o.rows.clear();
      for (const std::string& r : split(v)) o.rows.push_back(std::stoll(r));
    } else {
      std::fprintf(stderr, "usage: arbiter_bench_mlp_block [--hidden=N] [--inter=N] [--rows=1,4,16] [--dtype=bf16|f16|f32] "
                           "[--samples=N] [--fused=KERNEL,...] [--log=error|warn|info]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("OMP_NUM_THREADS", "1", 1);
  const Options o = parse(argc, argv);
  const DLDataType dl = o.dtype == "f32" ? DLDataType{kDLFloat, 32, 1}
                        : o.dtype == "f16" ? DLDataType{kDLFloat, 16, 1} : DLDataType{kDLBfloat, 16, 1};
  const int32_t arb = o.dtype == "f32" ? ARB_DTYPE_F32 : o.dtype == "f16" ? ARB_DTYPE_F16 : ARB_DTYPE_BF16;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("arbiter-mlp-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string table = (dir / "table.toml").string();
  arb_context chain = make_context(table, "chain.mlp", o.log_level);
  std::vector<arb_context> fused;
  for (const std::string& name : o.fused) fused.push_back(make_context(table, name.c_str(), o.log_level));

  const float w_in = 1.0f / std::sqrt(static_cast<float>(o.hidden)), w_out = 1.0f / std::sqrt(static_cast<float>(o.inter));
  Buffer norm({o.hidden}, dl, arb, 1.0f, 1), gate_up({2 * o.inter, o.hidden}, dl, arb, w_in, 2), down({o.hidden, o.inter}, dl, arb, w_out, 3);
  const double weight_bytes = static_cast<double>(gate_up.size_bytes + down.size_bytes);
  std::printf("# The MLP block, fused vs chain: %s hidden=%lld inter=%lld (weights %.0f MB, gate and up fused)\n\n",
              o.dtype.c_str(), static_cast<long long>(o.hidden), static_cast<long long>(o.inter), weight_bytes / 1e6);

  std::string per_op, blocks, tuning;
  for (const int64_t rows : o.rows) {
    Buffer x0({rows, o.hidden}, dl, arb, 1.0f, 10 + rows), x1({rows, o.hidden}, dl, arb, 1.0f, 20 + rows);
    Buffer y0({rows, o.hidden}, dl, arb, 0.0f, 0), y1({rows, o.hidden}, dl, arb, 0.0f, 0), yf({rows, o.hidden}, dl, arb, 0.0f, 0);
    arb_mlp_args args = ARB_MLP_ARGS_INIT;
    args.norm_weight = &norm.t;
    args.gate = &gate_up.t;
    args.down = &down.t;
    auto set = [&](int i, DLTensor* y) {
      args.x = i % 2 ? &x1.t : &x0.t;
      args.y = y != nullptr ? y : i % 2 ? &y1.t : &y0.t;
    };
    // 3. Tuning: the first chain call tunes its steps; the block's own tuning races both.
    set(0, nullptr);
    auto start = Clock::now();
    check(arb_mlp(chain, &args, nullptr), "arb_mlp (chain, first call)");
    const double steps_tuned = seconds_since(start);
    const std::string explanation = explain(chain, args);
    const std::string key = explanation.substr(9, explanation.find('\n') - 9);
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
    char line[512];
    std::snprintf(line, sizeof line, "| %lld | %.2f s | %s |\n", static_cast<long long>(rows), steps_tuned,
                  block_tuned ? (std::to_string(block_tuning).substr(0, 5) + " s").c_str() : "failed");
    tuning += line;

    // 2. Block time, the chain and each fused kernel, each fused output against the chain's.
    const Stats chained = timed(o.samples, [&](int i) {
      set(i, nullptr);
      check(arb_mlp(chain, &args, nullptr), "arb_mlp (chain)");
    });
    set(0, &y0.t);
    check(arb_mlp(chain, &args, nullptr), "arb_mlp (chain)");
    for (size_t f = 0; f < fused.size(); ++f) {
      set(0, &yf.t);
      if (arb_mlp(fused[f], &args, nullptr) != ARB_OK) {  // not for this problem or CPU: say why
        std::snprintf(line, sizeof line, "| %lld | %s | %.3f ms | not run: %.300s | | | | |\n", static_cast<long long>(rows),
                      o.fused[f].c_str(), chained.median * 1e3, arb_last_error());
        blocks += line;
        continue;
      }
      const Stats fast = timed(o.samples, [&](int i) {
        set(i, i % 2 ? &y1.t : &yf.t);
        check(arb_mlp(fused[f], &args, nullptr), "arb_mlp (fused)");
      });
      set(0, &yf.t);
      check(arb_mlp(fused[f], &args, nullptr), "arb_mlp (fused)");
      double diff = 0, ref = 0;
      for (size_t i = 0; i < y0.count(); ++i) {
        diff += (y0.at(i) - yf.at(i)) * (y0.at(i) - yf.at(i));
        ref += yf.at(i) * yf.at(i);
      }
      std::snprintf(line, sizeof line, "| %lld | %s | %.3f ms | %.3f ms | **%.2fx** | %.1f GB/s | %.1f GB/s | %.1e |\n",
                    static_cast<long long>(rows), o.fused[f].c_str(), chained.median * 1e3, fast.median * 1e3,
                    chained.median / fast.median, weight_bytes / chained.median * 1e-9, weight_bytes / fast.median * 1e-9,
                    std::sqrt(diff / ref));
      blocks += line;
    }

    // 1. Each step alone, as the chain's explain lists it, with the kernel it got.
    Buffer normed({rows, o.hidden}, dl, arb, 0.0f, 0), projected({rows, 2 * o.inter}, dl, arb, 0.0f, 0),
        activated({rows, o.inter}, dl, arb, 0.0f, 0);
    arb_rmsnorm_args rn = ARB_RMSNORM_ARGS_INIT;
    rn.x = &x0.t;
    rn.weight = &norm.t;
    rn.y = &normed.t;
    rn.eps = args.eps;
    arb_gemm_args project = ARB_GEMM_ARGS_INIT;
    project.a = &normed.t;
    project.b = &gate_up.t;
    project.trans_b = 1;
    project.d = &projected.t;
    arb_swiglu_args act = ARB_SWIGLU_ARGS_INIT;
    act.gate = &projected.t;
    act.y = &activated.t;
    arb_gemm_args dn = ARB_GEMM_ARGS_INIT;
    dn.a = &activated.t;
    dn.b = &down.t;
    dn.trans_b = 1;
    dn.c = &x0.t;
    dn.beta = 1.0f;
    dn.d = &y0.t;
    const Stats s1 = timed(o.samples, [&](int) { check(arb_rmsnorm(chain, &rn, nullptr), "arb_rmsnorm"); });
    const Stats s2 = timed(o.samples, [&](int) { check(arb_gemm(chain, &project, nullptr), "arb_gemm (gate/up)"); });
    const Stats s3 = timed(o.samples, [&](int) { check(arb_swiglu(chain, &act, nullptr), "arb_swiglu"); });
    const Stats s4 = timed(o.samples, [&](int) { check(arb_gemm(chain, &dn, nullptr), "arb_gemm (down)"); });
    const double sum = s1.median + s2.median + s3.median + s4.median;
    const Stats* steps[] = {&s1, &s2, &s3, &s4};
    const char* names[] = {"rmsnorm", "gemm gate/up (n = 2 inter, tb=1)", "swiglu", "gemm down (beta 1, c = x)"};
    for (int s = 0; s < 4; ++s) {
      std::snprintf(line, sizeof line, "| %lld | %d. %s | %s | %.3f ms | %.3f ms | %.3f ms |\n", static_cast<long long>(rows),
                    s + 1, names[s], step_kernel(explanation, s + 1).c_str(), steps[s]->median * 1e3, steps[s]->p20 * 1e3,
                    steps[s]->p80 * 1e3);
      per_op += line;
    }
    std::snprintf(line, sizeof line, "| %lld | sum of the four | | %.3f ms | | (chain.mlp: %.3f ms) |\n",
                  static_cast<long long>(rows), sum * 1e3, chained.median * 1e3);
    per_op += line;
  }
  std::printf("## 1. Kernel runtime per op (each step of the chain called alone; median of %d calls)\n\n", o.samples);
  std::printf("| rows | step | kernel (tuned) | median | p20 | p80 |\n| ---: | --- | --- | ---: | ---: | ---: |\n%s\n", per_op.c_str());
  std::printf("## 2. Block time (median of %d calls; GB/s: the weights' bytes over the time)\n\n", o.samples);
  std::printf("| rows | fused kernel | chain.mlp | fused | fused speedup | chain GB/s | fused GB/s | chain vs fused (rel. norm) |\n"
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n%s\n", blocks.c_str());
  std::printf("## 3. Tuning time\n\n| rows | first chain call (tunes each step) | the block tuned (chain and fused raced) |\n"
              "| ---: | ---: | ---: |\n%s\n", tuning.c_str());
  std::printf("Method: a table in a fresh folder (policy tune-missing): every step tuned in this run; one thread; 3 warm-up "
              "calls, then the median of %d; x and y rotated over 2 buffer sets, the weights read from memory each call "
              "(larger than any cache); uniform inputs, weights scaled by 1/sqrt(fan-in).\n", o.samples);
  arb_context_destroy(chain);
  for (arb_context f : fused) arb_context_destroy(f);
  std::filesystem::remove_all(dir);
  return 0;
}
