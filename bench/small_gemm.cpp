// arbiter_bench_small_gemm [--quick] [--samples N]
//
// Kernel runtime on small CPU problems (docs/architecture.md, "Measurement" and "Benchmark reports"): cpu.gemm_small
// and the bf16 GEMMs (cpu.gemm_bf16_avx512, cpu.gemm_bf16_amx) against
// the vendor kernels openblas.sgemm and onednn.matmul (and reference.gemm), and cpu.rmsnorm /
// cpu.softmax against reference.*, all in one run so that ratios compare
// like with like. GEMM rates are also given as a fraction of this run's measured FMA peak
// for the dtype (one core, and all cores at once), and against the faster vendor kernel. Every kernel
// is called through its own arb_kernel.launch pointer (no dispatch), on the same random
// inputs, after its output has been checked against the reference plugin's.
//
// Prints a Markdown report: machine, tables, method. Exit status 3 if a kernel's output
// fails the accuracy check (its timing is then meaningless), 2 on usage errors.
#include "context.hpp"
#include "device/host_buffer.hpp"
#include "device/problem_buffers.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "problem/problem_text.hpp"
#include "plugin/plugin_record.hpp"
#include "verify/accuracy.hpp"

#include <arbiter/float16.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <immintrin.h>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef ARBITER_BENCH_BUILD_TYPE
#define ARBITER_BENCH_BUILD_TYPE "?"
#endif

namespace {

using arbiter::KernelRecord;
using arbiter::ProblemBuffers;
using Clock = std::chrono::steady_clock;

struct Settings {
  bool quick = false;
  int samples = 41;               // timed batches per kernel (>= 20)
  double batch_seconds = 2e-3;    // target length of one timed batch
  double warmup_seconds = 20e-3;  // per kernel and problem, before calibration
  uint64_t seed = 1;
};

// ---- statistics ------------------------------------------------------------------------

struct Stats {
  double median = 0, p20 = 0, p80 = 0;  // seconds per call
  int samples = 0;
  int64_t batch = 0;  // calls per timed batch
};

Stats summarise(std::vector<double> per_call, int64_t batch) {
  std::sort(per_call.begin(), per_call.end());
  auto at = [&](double q) {
    return per_call[static_cast<size_t>(std::lround(q * static_cast<double>(per_call.size() - 1)))];
  };
  return Stats{at(0.5), at(0.2), at(0.8), static_cast<int>(per_call.size()), batch};
}

// ---- one kernel on one problem -----------------------------------------------------------

struct Candidate {
  std::string name;
  const KernelRecord* kernel = nullptr;
  std::string unavailable;  // why it is not timed ("not loaded", supports() said no)
  std::unique_ptr<ProblemBuffers> buffers;
  arb_operands operands{};
  arbiter::HostBuffer workspace;
  size_t workspace_bytes = 0;
  double error = -1;  // relative norm error against the reference; < 0: not checked
  bool passed = true;
  int64_t batch = 1;
  std::vector<double> per_call;
  Stats stats;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "arbiter_bench_small_gemm: %s\n", message.c_str());
  std::exit(2);
}

// `count` launches, back to back, through the kernel's own function pointer.
void launch(Candidate& c, const arb_problem& problem, int64_t count) {
  const arb_launch_fn fn = c.kernel->abi.launch;
  void* const ctx = c.kernel->abi.ctx;
  void* const workspace = c.workspace.data();
  char err[256];
  for (int64_t i = 0; i < count; ++i)
    if (fn(ctx, &problem, &c.operands, workspace, c.workspace_bytes, nullptr, err, sizeof err) != ARB_OK)
      die(c.name + " failed: " + err);
}

double time_batch(Candidate& c, const arb_problem& problem, int64_t count) {
  const auto start = Clock::now();
  launch(c, problem, count);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Prepares a candidate: present, accepts the problem, own copy of the inputs, workspace.
void prepare(Candidate& c, const arbiter::Context& context, const arb_problem& problem, const ProblemBuffers& inputs) {
  c.kernel = context.registry().find(c.name);
  if (c.kernel == nullptr) {
    c.unavailable = "not loaded";
    return;
  }
  std::string why;
  if (c.kernel->abi.op != problem.op || c.kernel->abi.device_type != problem.device_type) {
    c.unavailable = "wrong op or device";
    return;
  }
  if (!arbiter::kernel_supports(*c.kernel, problem, &why)) {
    c.unavailable = "refuses: " + why;
    return;
  }
  if (c.kernel->abi.workspace_size != nullptr &&
      c.kernel->abi.workspace_size(c.kernel->abi.ctx, &problem, &c.workspace_bytes) != ARB_OK)
    die(c.name + ": workspace_size failed");
  c.workspace = arbiter::HostBuffer(c.workspace_bytes);
  c.buffers = std::make_unique<ProblemBuffers>(inputs);  // same inputs, own buffers
  c.operands = c.buffers->operands();
}

// Runs every available candidate once, checks it against `reference_name`'s output,
// warms up, calibrates the batch, then takes the samples round-robin across candidates.
void measure(std::vector<Candidate>& candidates, const arb_problem& problem, const std::string& reference_name,
             const Settings& settings) {
  const Candidate* reference = nullptr;
  for (Candidate& c : candidates) {
    if (!c.unavailable.empty()) continue;
    launch(c, problem, 1);
    if (c.name == reference_name) reference = &c;
  }
  for (Candidate& c : candidates) {
    if (!c.unavailable.empty() || reference == nullptr) continue;
    const arbiter::Comparison cmp = arbiter::compare_outputs(*c.buffers, *reference->buffers);
    c.error = cmp.error;
    c.passed = cmp.finite && cmp.error <= arbiter::tolerance_for(problem.dtype);
  }

  // Warm-up: at least 3 launches and warmup_seconds; the last half estimates the call time.
  for (Candidate& c : candidates) {
    if (!c.unavailable.empty()) continue;
    int64_t calls = 3;
    double seconds = time_batch(c, problem, calls);
    while (seconds < settings.warmup_seconds / 2) {
      calls *= 2;
      seconds = time_batch(c, problem, calls);
    }
    const double per_call = seconds / static_cast<double>(calls);
    c.batch = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(settings.batch_seconds / per_call)));
  }

  // Samples, interleaved: sample s times every candidate once, the order rotated by s, so
  // drift in clock speed or neighbours' load falls on all candidates alike.
  std::vector<Candidate*> live;
  for (Candidate& c : candidates)
    if (c.unavailable.empty()) live.push_back(&c);
  for (int s = 0; s < settings.samples; ++s)
    for (size_t i = 0; i < live.size(); ++i) {
      Candidate& c = *live[(i + static_cast<size_t>(s)) % live.size()];
      c.per_call.push_back(time_batch(c, problem, c.batch) / static_cast<double>(c.batch));
    }
  for (Candidate* c : live) c->stats = summarise(c->per_call, c->batch);
}

// ---- reporting ---------------------------------------------------------------------------

double gemm_flops(const arb_problem& p) { return 2.0 * static_cast<double>(p.m * p.n * p.k); }

// The bytes every kernel of the op must move (the op's own count: x and y; rmsnorm's weight
// and residual; swiglu's gate, up and y).
double row_bytes(const arb_problem& p) { return arbiter::bytes_moved(p); }

std::string fmt_double(const char* format, double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

// ---- ceilings of this run -------------------------------------------------------------------

// Peak multiply-add rates measured here (GFLOP/s, a multiply-add counting 2), per dtype; 0
// where not measured. bf16 on a CPU without AVX512-BF16 has no instruction of its own: its
// ceiling is the f32 one (kernels widen to f32).
struct Ceilings {
  double f32_one = 0, f32_all = 0;    // one thread; every logical CPU at once
  double bf16_one = 0, bf16_all = 0;  // vdpbf16ps, where the CPU has it
  std::string f32_instruction, bf16_instruction;
  double copy_gbs = 0;
};

// Something of the accumulators for the caller to keep, so that the loop is not optimised away.
__attribute__((target("avx512f"), always_inline)) inline float keep(const __m512* acc) {
  __m512 total = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) total = _mm512_add_ps(total, acc[i]);
  float lanes[16];  // not _mm512_reduce_add_ps: GCC 12 warns on its own header there
  _mm512_storeu_ps(lanes, total);
  return lanes[0] + lanes[15];
}

// 12 independent accumulator chains of FMAs: enough to cover the latency (4 cycles) of
// two FMA ports. Returns flops done.
__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iterations, float* sink) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t n = 0; n < iterations; ++n)
#pragma GCC unroll 12  // the accumulators must live in registers
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  *sink = keep(acc);
  return static_cast<double>(iterations) * 12 * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iterations, float* sink) {
  __m256 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t n = 0; n < iterations; ++n)
#pragma GCC unroll 12  // the accumulators must live in registers
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  float lanes[8];
  __m256 total = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) total = _mm256_add_ps(total, acc[i]);
  _mm256_storeu_ps(lanes, total);
  *sink = lanes[0] + lanes[7];
  return static_cast<double>(iterations) * 12 * 8 * 2;
}

// vdpbf16ps: 16 lanes, each two bf16 products added to an f32 accumulator (4 flops).
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_loop(int64_t iterations, float* sink) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);  // 1, ~6e-8
  for (int64_t n = 0; n < iterations; ++n)
#pragma GCC unroll 12  // the accumulators must live in registers
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  *sink = keep(acc);
  return static_cast<double>(iterations) * 12 * 16 * 4;
}

// The median rate (GFLOP/s) of `loop` on `threads` threads at once, each about 20 ms.
double peak_rate(double (*loop)(int64_t, float*), int threads, int samples) {
  float sink = 0;
  int64_t iterations = 1 << 14;
  for (;;) {  // size one run to about 20 ms on one thread
    const auto start = Clock::now();
    loop(iterations, &sink);
    if (std::chrono::duration<double>(Clock::now() - start).count() > 20e-3 || iterations > (int64_t(1) << 34)) break;
    iterations *= 2;
  }
  std::vector<double> rates;
  for (int s = 0; s < samples; ++s) {
    std::vector<double> flops(static_cast<size_t>(threads));
    std::vector<float> sinks(static_cast<size_t>(threads));
    const auto start = Clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] { flops[static_cast<size_t>(t)] = loop(iterations, &sinks[static_cast<size_t>(t)]); });
    for (auto& w : workers) w.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    double total = 0;
    for (double f : flops) total += f;
    rates.push_back(total / seconds * 1e-9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

Ceilings measure_fma_peaks(int samples) {
  Ceilings c;
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double (*f32_loop)(int64_t, float*) = nullptr;
  if (__builtin_cpu_supports("avx512f")) {
    f32_loop = fma_loop_avx512;
    c.f32_instruction = "vfmadd231ps zmm";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    f32_loop = fma_loop_avx2;
    c.f32_instruction = "vfmadd231ps ymm";
  }
  if (f32_loop != nullptr) {
    c.f32_one = peak_rate(f32_loop, 1, samples);
    c.f32_all = peak_rate(f32_loop, threads, samples);
  }
  if (__builtin_cpu_supports("avx512bf16")) {
    c.bf16_one = peak_rate(dpbf16_loop, 1, samples);
    c.bf16_all = peak_rate(dpbf16_loop, threads, samples);
    c.bf16_instruction = "vdpbf16ps zmm";
  } else {
    c.bf16_one = c.f32_one;
    c.bf16_all = c.f32_all;
    c.bf16_instruction = "none (no AVX512-BF16): the f32 FMA peak";
  }
  return c;
}

struct Case {
  std::string text;  // the problem, in the problem syntax
  arbiter::ParsedProblem parsed;
  std::vector<Candidate> candidates;
  std::string baseline;  // speedups are baseline median / kernel median
};

// The vendor kernels: "vs best vendor" divides the faster one's median by a kernel's.
bool is_vendor(const std::string& name) { return name == "openblas.sgemm" || name == "onednn.matmul"; }

bool print_table(const std::vector<Case>& cases, bool gemm, const Ceilings& ceilings) {
  bool all_passed = true;
  if (gemm) {
    std::printf("| shape | kernel | median us | p20 us | p80 us | GFLOP/s | of FMA peak, 1 core | of FMA peak, all cores | "
                "speedup vs openblas | vs best vendor | rel. error vs reference |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  } else {
    std::printf("| shape | kernel | median us | p20 us | p80 us | GB/s | of copy bandwidth | speedup vs reference | "
                "rel. error vs reference |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  }
  for (const Case& c : cases) {
    const arb_problem& p = c.parsed.problem;
    const Candidate* baseline = nullptr;
    const Candidate* best_vendor = nullptr;
    for (const Candidate& k : c.candidates) {
      if (!k.unavailable.empty()) continue;
      if (k.name == c.baseline) baseline = &k;
      if (is_vendor(k.name) && k.passed && (best_vendor == nullptr || k.stats.median < best_vendor->stats.median))
        best_vendor = &k;
    }
    const double peak_one = p.dtype == ARB_DTYPE_BF16 ? ceilings.bf16_one : ceilings.f32_one;
    const double peak_all = p.dtype == ARB_DTYPE_BF16 ? ceilings.bf16_all : ceilings.f32_all;
    for (const Candidate& k : c.candidates) {
      if (!k.unavailable.empty()) {
        std::printf("| %s | %s | - | - | - | - | - |%s - | %s |\n", c.text.c_str(), k.name.c_str(), gemm ? " - | - | - |" : "",
                    k.unavailable.c_str());
        continue;
      }
      const double rate = gemm ? gemm_flops(p) / k.stats.median * 1e-9 : row_bytes(p) / k.stats.median * 1e-9;
      const std::string speedup =
          baseline ? fmt_double("%.2fx", baseline->stats.median / k.stats.median) : std::string("-");
      std::string error = k.error < 0 ? "-" : fmt_double("%.2g", k.error);
      if (!k.passed) {
        error += " FAIL";
        all_passed = false;
      }
      if (gemm) {
        const auto percent = [&](double peak) { return peak > 0 ? fmt_double("%.1f%%", 100.0 * rate / peak) : std::string("-"); };
        const std::string vendor =
            best_vendor ? fmt_double("%.2fx", best_vendor->stats.median / k.stats.median) : std::string("-");
        std::printf("| %s | %s | %.3f | %.3f | %.3f | %.2f | %s | %s | %s | %s | %s |\n", c.text.c_str(), k.name.c_str(),
                    k.stats.median * 1e6, k.stats.p20 * 1e6, k.stats.p80 * 1e6, rate, percent(peak_one).c_str(),
                    percent(peak_all).c_str(), speedup.c_str(), vendor.c_str(), error.c_str());
      } else {
        const std::string of_copy =
            ceilings.copy_gbs > 0 ? fmt_double("%.1f%%", 100.0 * rate / ceilings.copy_gbs) : std::string("-");
        std::printf("| %s | %s | %.3f | %.3f | %.3f | %.2f | %s | %s | %s |\n", c.text.c_str(), k.name.c_str(),
                    k.stats.median * 1e6, k.stats.p20 * 1e6, k.stats.p80 * 1e6, rate, of_copy.c_str(), speedup.c_str(),
                    error.c_str());
      }
    }
  }
  std::printf("\n");
  return all_passed;
}

// Speedup of one kernel over the baseline, per shape, f32 and bf16 side by side.
void print_summary(const std::vector<Case>& cases, const std::string& kernel, const std::string& against) {
  std::map<std::string, std::map<std::string, std::string>> rows;  // shape without dtype -> dtype -> speedup
  std::vector<std::string> order;
  for (const Case& c : cases) {
    const Candidate* k = nullptr;
    const Candidate* b = nullptr;
    for (const Candidate& x : c.candidates) {
      if (!x.unavailable.empty()) continue;
      if (x.name == kernel) k = &x;
      if (x.name == against) b = &x;
    }
    const size_t space = c.text.find(' ', c.text.find(' ') + 1);
    const std::string dtype = c.text.substr(c.text.find(' ') + 1, space - c.text.find(' ') - 1);
    const std::string shape = c.text.substr(space + 1);
    if (rows.find(shape) == rows.end()) order.push_back(shape);
    rows[shape][dtype] = (k && b) ? fmt_double("%.2fx", b->stats.median / k->stats.median) : "-";
  }
  std::printf("| shape | f32 | bf16 |\n| --- | ---: | ---: |\n");
  for (const std::string& shape : order) {
    auto& r = rows[shape];
    std::printf("| %s | %s | %s |\n", shape.c_str(), r.count("f32") ? r["f32"].c_str() : "-",
                r.count("bf16") ? r["bf16"].c_str() : "-");
  }
  std::printf("\n");
}

// ---- the machine -------------------------------------------------------------------------

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string machine_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "?";
  int logical = 0;
  std::set<std::string> isa;
  while (std::getline(in, line)) {
    if (line.rfind("processor", 0) == 0) ++logical;
    if (line.rfind("model name", 0) == 0 && model == "?") model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string flag; words >> flag;)
        if (flag == "avx2" || flag == "fma" || flag == "f16c" || flag == "avx512f" || flag == "avx512_bf16")
          isa.insert(flag);
    }
  }
  std::string caches;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string size = read_line(dir + "size");
    if (size.empty()) break;
    const std::string type = read_line(dir + "type");
    caches += (caches.empty() ? "" : ", ") + std::string("L") + read_line(dir + "level") +
              (type == "Data" ? "d" : type == "Instruction" ? "i" : "") + " " + size;
  }
  std::string isa_text;
  for (const std::string& f : isa) isa_text += (isa_text.empty() ? "" : " ") + f;
  return model + ", " + std::to_string(logical) + " logical CPUs; ISA: " + isa_text + "; caches (cpu0): " + caches;
}

// The OpenBLAS the openblas plugin loaded (if any): its build configuration and threads.
std::string openblas_description() {
  void* library = ::dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
  if (library == nullptr) return "not loaded";
  std::string text = "?";
  if (auto config = reinterpret_cast<char* (*)()>(::dlsym(library, "openblas_get_config"))) text = config();
  if (auto threads = reinterpret_cast<int (*)()>(::dlsym(library, "openblas_get_num_threads")))
    text += ", " + std::to_string(threads()) + " threads";
  ::dlclose(library);
  const char* env = std::getenv("OPENBLAS_NUM_THREADS");
  text += std::string(" (OPENBLAS_NUM_THREADS=") + (env ? env : "unset") + ")";
  return text;
}

// Ceilings of this run: warm memcpy bandwidth, the FMA peaks and a large openblas sgemm's rate.
Ceilings print_ceilings(arbiter::Context& context, const Settings& settings) {
  const size_t bytes = 1 << 20;
  arbiter::HostBuffer from(bytes), to(bytes);
  std::memset(from.data(), 1, bytes);
  std::memset(to.data(), 2, bytes);
  std::vector<double> seconds;
  for (int i = 0; i < 3; ++i) std::memcpy(to.data(), from.data(), bytes);
  for (int s = 0; s < settings.samples; ++s) {
    const auto start = Clock::now();
    for (int i = 0; i < 8; ++i) std::memcpy(to.data(), from.data(), bytes);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count() / 8);
  }
  const Stats copy = summarise(seconds, 8);
  Ceilings ceilings = measure_fma_peaks(settings.quick ? 3 : 7);
  ceilings.copy_gbs = 2.0 * bytes / copy.median * 1e-9;
  std::printf("- copy: memcpy of 1 MiB, warm: %.1f GB/s (read + write, median of %d)\n", ceilings.copy_gbs, copy.samples);
  std::printf("- FMA peak, f32 (%s, 12 independent chains): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %u threads at once\n",
              ceilings.f32_instruction.c_str(), ceilings.f32_one, ceilings.f32_all,
              std::max(1u, std::thread::hardware_concurrency()));
  std::printf("- FMA peak, bf16 (%s): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on all\n", ceilings.bf16_instruction.c_str(),
              ceilings.bf16_one, ceilings.bf16_all);

  const std::string text = "gemm f32 m=256 n=256 k=256";
  const arbiter::ParsedProblem parsed = arbiter::parse_problem(text);
  ProblemBuffers inputs(parsed.problem, parsed.alpha, parsed.beta, parsed.eps);
  inputs.randomize(settings.seed);
  std::vector<Candidate> one(1);
  one[0].name = "openblas.sgemm";
  prepare(one[0], context, parsed.problem, inputs);
  if (!one[0].unavailable.empty()) {
    std::printf("- matmul: openblas.sgemm %s\n", one[0].unavailable.c_str());
    return ceilings;
  }
  Settings short_run = settings;
  short_run.samples = std::max(20, settings.samples / 2);
  measure(one, parsed.problem, "", short_run);
  std::printf("- matmul: openblas.sgemm on `%s`, warm: %.1f GFLOP/s (median of %d)\n", text.c_str(),
              gemm_flops(parsed.problem) / one[0].stats.median * 1e-9, one[0].stats.samples);
  return ceilings;
}

// oneDNN's threads: OpenMP's (libgomp, loaded with libdnnl).
std::string openmp_description() {
  void* library = ::dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (library == nullptr) return "libgomp not loaded";
  std::string text = "?";
  if (auto threads = reinterpret_cast<int (*)()>(::dlsym(library, "omp_get_max_threads")))
    text = std::to_string(threads()) + " OpenMP threads";
  ::dlclose(library);
  const char* env = std::getenv("OMP_NUM_THREADS");
  return text + " (OMP_NUM_THREADS=" + (env ? env : "unset") + ")";
}

std::string plugin_line(const arbiter::Context& context, const std::string& name) {
  for (const auto& plugin : context.registry().plugins())
    if (plugin->name == name && plugin->state == arbiter::PluginState::loaded)
      return name + " " + plugin->version + " (build " + plugin->build_id + ")";
  return name + " (not loaded)";
}

// What a plugin says of itself; the openblas plugin names the core it runs and why.
std::string plugin_description(const arbiter::Context& context, const std::string& name) {
  for (const auto& plugin : context.registry().plugins())
    if (plugin->name == name && plugin->state == arbiter::PluginState::loaded) return plugin->description;
  return "not loaded";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "%F %T %Z", std::localtime(&now));
  return buffer;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  std::string command = "arbiter_bench_small_gemm";
  std::string only;  // keep the problems whose text contains it
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    command += " " + arg;
    if (arg == "--quick") {
      settings.quick = true;
    } else if (arg.rfind("--only=", 0) == 0) {
      only = arg.substr(7);
    } else if (arg == "--samples" && i + 1 < argc) {
      command += std::string(" ") + argv[i + 1];
      settings.samples = std::atoi(argv[++i]);
      if (settings.samples < 20) die("--samples must be at least 20");
    } else {
      std::fprintf(stderr, "usage: arbiter_bench_small_gemm [--quick] [--samples N (>= 20)] [--only=TEXT (problems containing it)]\n");
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  if (settings.quick) {
    settings.samples = std::max(20, std::min(settings.samples, 21));
    settings.batch_seconds = 0.3e-3;
    settings.warmup_seconds = 5e-3;
  }

  std::vector<std::string> gemm_shapes = {"m=1 n=64 k=64",   "m=8 n=8 k=8",    "m=16 n=16 k=16",
                                          "m=32 n=32 k=32",  "m=64 n=64 k=64", "m=48 n=17 k=33",
                                          "m=64 n=64 k=64 act=gelu bias=1", "m=128 n=128 k=128",
                                          "m=256 n=256 k=256"};
  std::vector<std::string> dtypes = {"f32", "bf16"};
  std::vector<std::string> gemm_texts, row_texts;
  if (settings.quick) {
    gemm_texts = {"gemm f32 m=8 n=8 k=8", "gemm bf16 m=64 n=64 k=64 act=gelu bias=1"};
    row_texts = {"rmsnorm bf16 rows=8 cols=4096", "softmax f32 rows=8 cols=4096", "swiglu bf16 rows=1 cols=14336 fused=1",
                 "rope bf16 tokens=1 heads=32 dim=128", "attention bf16 q=1 kv=1024 heads=32 kvheads=8 dim=128 causal=1"};
  } else {
    for (const std::string& shape : gemm_shapes)
      for (const std::string& dtype : dtypes) gemm_texts.push_back("gemm " + dtype + " " + shape);
    for (const char* op : {"rmsnorm", "softmax"})
      for (const std::string& dtype : dtypes)
        for (const char* cols : {"4096", "32000"})
          row_texts.push_back(std::string(op) + " " + dtype + " rows=8 cols=" + cols);
    // Llama-3-8B's MLP activation at decode: the fused gate+up output's halves.
    for (const std::string& dtype : dtypes)
      for (const char* rows : {"1", "16"}) row_texts.push_back("swiglu " + dtype + " rows=" + rows + " cols=14336 fused=1");
    // Llama-3-8B's query heads (32 x 128) at decode, batch 1 and 16, and its key heads at a
    // 512-token prefill, inside the fused QKV output (token stride 6144).
    for (const std::string& dtype : dtypes) {
      row_texts.push_back("rope " + dtype + " tokens=1 heads=32 dim=128");
      row_texts.push_back("rope " + dtype + " tokens=16 heads=32 dim=128 layout=interleaved");
      row_texts.push_back("rope " + dtype + " tokens=512 heads=8 dim=128 ldtoken=6144");
    }
    // Llama-3-8B attention (32 query heads on 8 key/value heads x 128): one decode step over a
    // 4k-token cache at batch 1 and over 1k-token caches at batch 16, and a 128-token prefill.
    for (const std::string& dtype : dtypes) {
      row_texts.push_back("attention " + dtype + " q=1 kv=4096 heads=32 kvheads=8 dim=128 causal=1");
      row_texts.push_back("attention " + dtype + " batch=16 q=1 kv=1024 heads=32 kvheads=8 dim=128 causal=1");
      row_texts.push_back("attention " + dtype + " q=128 kv=128 heads=32 kvheads=8 dim=128 causal=1");
    }
  }

  for (std::vector<std::string>* texts : {&gemm_texts, &row_texts})
    std::erase_if(*texts, [&](const std::string& text) { return text.find(only) == std::string::npos; });

  unsetenv("ARBITER_PLUGIN_PATH");  // the build's own plugins, nothing else
  arbiter::Context context(arbiter::default_config());

  auto run_cases = [&](const std::vector<std::string>& texts, bool gemm) {
    std::vector<Case> cases;
    for (const std::string& text : texts) {
      Case c;
      c.text = text;
      c.parsed = arbiter::parse_problem(text);
      const arb_problem& p = c.parsed.problem;
      const std::string op = c.text.substr(0, c.text.find(' '));
      std::vector<std::string> names;
      if (gemm) {
        names = {"cpu.gemm_small_avx512", "cpu.gemm_small_avx2", "cpu.gemm_bf16_avx512", "cpu.gemm_bf16_amx", "openblas.sgemm",
                 "onednn.matmul", "reference.gemm"};
        c.baseline = "openblas.sgemm";
      } else {
        names = {"cpu." + op, "reference." + op};
        if (op == "swiglu") names.insert(names.begin(), "cpu.swiglu_avx512");
        if (op == "attention") names.insert(names.begin(), "cpu.attention_bf16_avx512");  // bf16 only
        c.baseline = "reference." + op;
      }
      ProblemBuffers inputs(p, c.parsed.alpha, c.parsed.beta, c.parsed.eps);
      inputs.randomize(settings.seed);  // uniform in [-1, 1]; outputs poisoned with NaN
      for (const std::string& name : names) {
        Candidate k;
        k.name = name;
        prepare(k, context, p, inputs);
        c.candidates.push_back(std::move(k));
      }
      measure(c.candidates, p, "reference." + op, settings);
      cases.push_back(std::move(c));
    }
    return cases;
  };

  const auto started = Clock::now();
  const std::vector<Case> gemm_cases = run_cases(gemm_texts, true);
  const std::vector<Case> row_cases = run_cases(row_texts, false);

  std::printf("# Small-shape CPU kernels: cpu.* against openblas.sgemm, onednn.matmul and reference.*\n\n");
  std::printf("- command: `%s`\n", command.c_str());
  std::printf("- date: %s\n", today().c_str());
  std::printf("- machine: %s\n", machine_description().c_str());
  std::printf("- build: %s, %s %s\n", ARBITER_BENCH_BUILD_TYPE,
#if defined(__clang__)
              "clang",
#else
              "gcc",
#endif
              __VERSION__);
  std::printf("- plugins: %s; %s; %s; %s\n", plugin_line(context, "cpu").c_str(), plugin_line(context, "openblas").c_str(),
              plugin_line(context, "onednn").c_str(), plugin_line(context, "reference").c_str());
  std::printf("- OpenBLAS: %s\n", openblas_description().c_str());
  std::printf("- openblas plugin: %s\n", plugin_description(context, "openblas").c_str());
  std::printf("- onednn plugin: %s; oneDNN's threads: %s\n", plugin_description(context, "onednn").c_str(),
              openmp_description().c_str());
  const Ceilings ceilings = print_ceilings(context, settings);
  std::printf("\n## GEMM: D = act(A*B + bias), row-major, no transposes, beta = 0\n\n");
  std::printf("Fractions of the FMA peak of this run for the problem's dtype (bf16: vdpbf16ps where the CPU has it, "
              "else the f32 peak); vs best vendor = the faster of openblas.sgemm and onednn.matmul, its median over "
              "this kernel's.\n\n");
  bool passed = print_table(gemm_cases, true, ceilings);
  std::printf("Speedup of cpu.gemm_small_avx512 over openblas.sgemm (openblas median / gemm_small_avx512 median):\n\n");
  print_summary(gemm_cases, "cpu.gemm_small_avx512", "openblas.sgemm");
  std::printf("Speedup of onednn.matmul over openblas.sgemm:\n\n");
  print_summary(gemm_cases, "onednn.matmul", "openblas.sgemm");
  std::printf("Speedup of cpu.gemm_small_avx512 over onednn.matmul:\n\n");
  print_summary(gemm_cases, "cpu.gemm_small_avx512", "onednn.matmul");
  std::printf("## RMSNorm, softmax, SwiGLU, rope and attention\n\n");
  passed = print_table(row_cases, false, ceilings) && passed;

  std::printf(
      "## Method\n\n"
      "Kernel runtime only: each kernel is called through its own `arb_kernel.launch` pointer (the plugin's "
      "C++ trampoline included, dispatch not), synchronously on one thread; OpenBLAS and oneDNN (OpenMP) may use "
      "their own threads, so their fractions of the one-core peak can exceed 100%%: compare them with the all-core one. "
      "Timer: `std::chrono::steady_clock` around a batch of back-to-back launches; the time per call is the batch "
      "time divided by its length. Warm-up: one checked launch, then at least 3 launches and %.0f ms per kernel "
      "and problem, which also sizes the batch to about %.1f ms. Samples: %d batches per kernel, taken "
      "round-robin across the kernels of one problem (order rotated each round); statistic: median, with the "
      "20th and 80th percentiles (nearest rank). Cache policy: warm cache: every launch of a kernel reuses the "
      "same buffers (its own copy of the inputs), nothing is flushed, so problems that fit stay in L1/L2. "
      "Data: inputs uniform in [-1, 1] (seed %llu, never zero-filled), outputs NaN-poisoned before the check. "
      "Check: each kernel's first output against reference.* (fp64 accumulation), relative norm error, "
      "tolerance 1e-5 (f32) / 8e-3 (bf16). Rates: GEMM 2*m*n*k flops (bias and activation not counted); row "
      "ops the bytes every kernel must move: x read and y written once, plus weight for rmsnorm, gate and up read for swiglu, x read and written in place and one int32 position per token for rope, q, k and v read and o written once for attention. Speedup = baseline median / kernel "
      "median, both from this run. Whole run: %.1f s.\n",
      settings.warmup_seconds * 1e3, settings.batch_seconds * 1e3, settings.samples,
      static_cast<unsigned long long>(settings.seed),
      std::chrono::duration<double>(Clock::now() - started).count());
  if (!passed) {
    std::fprintf(stderr, "arbiter_bench_small_gemm: a kernel failed the accuracy check (FAIL above)\n");
    return 3;
  }
  return 0;
}
