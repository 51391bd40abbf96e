// arbiter_bench_dispatch <mode> <calls> [plugin-file]
//
// The workload of the dispatch-overhead measurement (bench/dispatch_overhead.sh runs it
// under callgrind): `calls` launches of one tiny problem, either through libarbiter's
// public C ABI or straight through the kernel's own function pointer.
//
//   api          arb_softmax(f32 rows=1 cols=8) through libarbiter (the shared library),
//                after one warm-up call, so every timed call is a selection-cache hit
//   direct       the same problem, prebuilt as arb_problem + arb_operands, handed to the
//                kernel's arb_kernel.launch; the plugin file is dlopen'ed here and its
//                arbiter_plugin_entry called with a minimal host API (no libarbiter); the
//                kernel is the CPU plugin's ARBITER_BENCH_KERNEL (the script sets the one
//                the api mode chose), else softmax, rmsnorm, gemm_small_avx2
//   api_gemm     arb_gemm(f32 m=n=k=8) through libarbiter, warmed up likewise
//   direct_gemm  the same gemm through cpu.gemm_small_*'s launch pointer
//   api_rmsnorm, direct_rmsnorm  rmsnorm (f32 rows=1 cols=8, a weight, no residual) likewise
//   api_shadow, api_gemm_shadow  api and api_gemm with shadow checks of one call in 1000
//                (verify.shadow_one_in = 1000): what the sampled checks cost per call
//   plan, plan_gemm, plan_rmsnorm  the api problems bound once by arb_plan_create, each call
//                an arb_plan_run
//
// Instruction counts per call are then (Ir(calls2) - Ir(calls1)) / (calls2 - calls1): the
// difference cancels start-up (context creation, plugin loading, warm-up), and api minus
// direct is what dispatch adds to one call on a hit.
//
// The program prints one line, `mode=... op=... kernel=... calls=...`, so the script can
// check that both sides ran the same kernel (api: the kernel arb_explain reports).
#include <arbiter/arbiter.h>
#include <arbiter/plugin.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef ARBITER_BENCH_PLUGIN_DIR_FROM_BINDIR
#define ARBITER_BENCH_PLUGIN_DIR_FROM_BINDIR "../lib/arbiter/plugins"
#endif

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "arbiter_bench_dispatch: %s\n", message.c_str());
  std::exit(2);
}

void check(arb_status status, const char* what) {
  if (status != ARB_OK)
    die(std::string(what) + ": " + arb_status_string(status) + ": " + arb_last_error());
}

// The operands: small, never zero, the same values in every mode.
struct Data {
  alignas(64) float x[8];
  alignas(64) float y[8];
  alignas(64) float w[8];
  alignas(64) float a[64];
  alignas(64) float b[64];
  alignas(64) float d[64];
  Data() {
    for (int i = 0; i < 8; ++i) {
      x[i] = 0.25f * static_cast<float>(i) - 0.875f;
      w[i] = 1.0f + 0.125f * static_cast<float>(i);
    }
    for (int i = 0; i < 64; ++i) {
      a[i] = static_cast<float>((i * 7) % 13) / 13.0f - 0.4f;
      b[i] = static_cast<float>((i * 5) % 11) / 11.0f - 0.6f;
      d[i] = 0.0f;
    }
  }
};

// The op a mode runs: its name says gemm or rmsnorm; the others run softmax.
arb_op op_of(const std::string& mode) {
  if (mode.find("gemm") != std::string::npos) return ARB_OP_GEMM;
  if (mode.find("rmsnorm") != std::string::npos) return ARB_OP_RMSNORM;
  return ARB_OP_SOFTMAX;
}
const char* op_name(const std::string& mode) {
  switch (op_of(mode)) {
    case ARB_OP_GEMM: return "gemm";
    case ARB_OP_RMSNORM: return "rmsnorm";
    default: return "softmax";
  }
}
bool shadowed(const std::string& mode) { return mode.size() > 7 && mode.substr(mode.size() - 7) == "_shadow"; }

// ---- api: through libarbiter's C ABI ---------------------------------------------------

std::string chosen_kernel(arb_context ctx, arb_op op, const void* args) {
  char report[8192];
  size_t length = 0;
  check(arb_explain(ctx, op, args, report, sizeof report, &length), "arb_explain");
  const char* line = std::strstr(report, "kernel:");
  if (line == nullptr) return "?";
  line += std::strlen("kernel:");
  while (*line == ' ') ++line;
  const size_t n = std::strcspn(line, " \n");
  return std::string(line, n);
}

// The embedded default's settings, with the plugin of ARBITER_BENCH_TRUST_PATH trusted by
// its SHA-256 (ARBITER_BENCH_TRUST_SHA256) so that no verification runs: its cost varies with
// the gate's random seeds and would not cancel between the two call counts. The _shadow
// modes add shadow checks of one call in 1000.
arb_context make_context(const std::string& mode) {
  std::string toml = "log_level = \"warn\"\n";
  const char* trust_path = std::getenv("ARBITER_BENCH_TRUST_PATH");
  const char* trust_sha = std::getenv("ARBITER_BENCH_TRUST_SHA256");
  if (trust_path != nullptr && trust_sha != nullptr)
    toml += std::string("[[plugins.trust]]\npath = \"") + trust_path + "\"\nsha256 = \"" + trust_sha + "\"\n";
  if (shadowed(mode)) toml += "[verify]\nshadow_one_in = 1000\n";
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml.c_str();
  arb_context ctx = nullptr;
  check(arb_context_create(&options, &ctx), "arb_context_create");
  return ctx;
}

// The tensors of the three problems (softmax and rmsnorm f32 1x8, gemm f32 8x8x8) and the
// args of the mode's op over them.
struct Problems {
  int64_t row[2] = {1, 8}, square[2] = {8, 8}, vector[1] = {8};
  DLTensor x, y, w, a, b, d;
  arb_softmax_args softmax = ARB_SOFTMAX_ARGS_INIT;
  arb_rmsnorm_args rmsnorm = ARB_RMSNORM_ARGS_INIT;
  arb_gemm_args gemm = ARB_GEMM_ARGS_INIT;
  explicit Problems(Data& data) {
    const DLDevice cpu{kDLCPU, 0};
    const DLDataType f32{kDLFloat, 32, 1};
    x = {data.x, cpu, 2, f32, row, nullptr, 0};
    y = {data.y, cpu, 2, f32, row, nullptr, 0};
    w = {data.w, cpu, 1, f32, vector, nullptr, 0};
    a = {data.a, cpu, 2, f32, square, nullptr, 0};
    b = {data.b, cpu, 2, f32, square, nullptr, 0};
    d = {data.d, cpu, 2, f32, square, nullptr, 0};
    softmax.x = rmsnorm.x = &x;
    softmax.y = rmsnorm.y = &y;
    rmsnorm.weight = &w;
    gemm.a = &a;
    gemm.b = &b;
    gemm.d = &d;
  }
  const void* args(arb_op op) const {
    return op == ARB_OP_GEMM ? static_cast<const void*>(&gemm)
                             : op == ARB_OP_RMSNORM ? static_cast<const void*>(&rmsnorm) : &softmax;
  }
};

// One warm-up call (the selection cache's miss), then `calls` calls.
template <typename Call>
void call_many(long calls, Call call, const char* name) {
  check(call(), (std::string(name) + " (warm-up)").c_str());  // the miss
  for (long i = 0; i < calls; ++i)
    if (call() != ARB_OK) check(ARB_ERR_INTERNAL, name);
}

void run_api(const std::string& mode, long calls, Data& data) {
  arb_context ctx = make_context(mode);
  const Problems problems(data);
  const arb_op op = op_of(mode);
  switch (op) {
    case ARB_OP_GEMM:
      call_many(calls, [&] { return arb_gemm(ctx, &problems.gemm, nullptr); }, "arb_gemm");
      break;
    case ARB_OP_RMSNORM:
      call_many(calls, [&] { return arb_rmsnorm(ctx, &problems.rmsnorm, nullptr); }, "arb_rmsnorm");
      break;
    default:
      call_many(calls, [&] { return arb_softmax(ctx, &problems.softmax, nullptr); }, "arb_softmax");
  }
  const std::string kernel = chosen_kernel(ctx, op, problems.args(op));
  std::printf("mode=%s op=%s kernel=%s calls=%ld\n", mode.c_str(), op_name(mode), kernel.c_str(), calls);
  check(arb_context_destroy(ctx), "arb_context_destroy");
}

// The api mode's problem as a plan: created once, run `calls` times.
void run_plan(const std::string& mode, long calls, Data& data) {
  arb_context ctx = make_context(mode);
  const Problems problems(data);
  const arb_op op = op_of(mode);
  arb_plan plan = nullptr;
  check(arb_plan_create(ctx, op, problems.args(op), &plan), "arb_plan_create");
  const std::string kernel = chosen_kernel(ctx, op, problems.args(op));
  arb_plan_operands operands = ARB_PLAN_OPERANDS_INIT;  // in the order of the op's args struct
  switch (op) {
    case ARB_OP_GEMM:
      operands.tensors[0] = data.a;
      operands.tensors[1] = data.b;
      operands.tensors[4] = data.d;
      break;
    case ARB_OP_RMSNORM:
      operands.tensors[0] = data.x;
      operands.tensors[2] = data.w;
      operands.tensors[3] = data.y;
      break;
    default:
      operands.tensors[0] = data.x;
      operands.tensors[1] = data.y;
  }
  call_many(calls, [&] { return arb_plan_run(plan, &operands, nullptr); }, "arb_plan_run");
  std::printf("mode=%s op=%s kernel=%s calls=%ld\n", mode.c_str(), op_name(mode), kernel.c_str(), calls);
  check(arb_plan_destroy(plan), "arb_plan_destroy");
  check(arb_context_destroy(ctx), "arb_context_destroy");
}

// ---- direct: the kernel's launch pointer, no libarbiter ---------------------------------

void host_log(void*, int32_t level, const char* plugin, const char* message) {
  if (level >= ARB_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", plugin ? plugin : "?", message ? message : "");
}

std::string default_plugin_file() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "arbiter_cpu.so";
  exe[n] = '\0';
  std::string dir(exe);
  dir.erase(dir.find_last_of('/') + 1);
  return dir + ARBITER_BENCH_PLUGIN_DIR_FROM_BINDIR + "/arbiter_cpu.so";
}

const arb_kernel* load_kernel(const std::string& file, const char* name) {
  void* library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);  // as the host loads plugins
  if (library == nullptr) die("dlopen " + file + ": " + ::dlerror());
  auto entry = reinterpret_cast<arb_plugin_entry_fn>(::dlsym(library, ARB_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) die(file + " does not export " ARB_PLUGIN_ENTRY_SYMBOL);
  static const arb_host_api host = {sizeof(arb_host_api), ARB_PLUGIN_ABI_MAJOR, ARB_PLUGIN_ABI_MINOR,
                                    "arbiter_bench_dispatch", nullptr, &host_log};
  const arb_plugin_descriptor* descriptor = nullptr;
  char err[512] = "";
  if (entry(&host, &descriptor, err, sizeof err) != ARB_OK || descriptor == nullptr)
    die(file + ": arbiter_plugin_entry failed: " + err);
  for (size_t i = 0; i < descriptor->kernel_count; ++i)
    if (std::strcmp(descriptor->kernels[i]->name, name) == 0) return descriptor->kernels[i];
  die(file + " has no kernel named " + name);
}

void run_direct(const std::string& mode, long calls, Data& data, const std::string& plugin_file) {
  const arb_op op = op_of(mode);
  // The kernel the api mode chose on this machine (the script passes it), else the usual one.
  const char* chosen = std::getenv("ARBITER_BENCH_KERNEL");
  const char* name = chosen != nullptr ? chosen : op == ARB_OP_GEMM ? "gemm_small_avx2" : op_name(mode);
  const arb_kernel* kernel = load_kernel(plugin_file, name);

  // The problem exactly as the C ABI layer builds it for the api mode's call.
  arb_problem problem;
  std::memset(&problem, 0, sizeof problem);
  problem.struct_size = sizeof problem;
  problem.dtype = ARB_DTYPE_F32;
  problem.device_type = kDLCPU;
  problem.alignment = 32;  // every operand 64-byte aligned; the row strides are 32 bytes
  arb_operands operands;
  std::memset(&operands, 0, sizeof operands);
  operands.struct_size = sizeof operands;
  if (op == ARB_OP_GEMM) {
    problem.op = ARB_OP_GEMM;
    problem.m = problem.n = problem.k = 8;
    problem.batch = 1;
    problem.lda = problem.ldb = problem.ldd = 8;
    operands.a = data.a;
    operands.b = data.b;
    operands.d = data.d;
    operands.alpha = 1.0f;
    operands.beta = 0.0f;
  } else {
    problem.op = op;
    problem.rows = 1;
    problem.cols = 8;
    problem.ld_x = problem.ld_y = 8;
    operands.x = data.x;
    operands.y = data.y;
    if (op == ARB_OP_RMSNORM) {
      operands.weight = data.w;
      operands.eps = 1e-6f;  // ARB_RMSNORM_ARGS_INIT's
    }
  }

  char why[256] = "";
  if (!kernel->supports(kernel->ctx, &problem, why, sizeof why))
    die(std::string("the kernel refuses the problem: ") + why);
  size_t workspace_bytes = 0;
  if (kernel->workspace_size != nullptr && kernel->workspace_size(kernel->ctx, &problem, &workspace_bytes) != ARB_OK)
    die("workspace_size failed");
  void* workspace = workspace_bytes ? std::aligned_alloc(64, (workspace_bytes + 63) / 64 * 64) : nullptr;

  const arb_launch_fn launch = kernel->launch;
  void* const ctx = kernel->ctx;
  char err[512];
  if (launch(ctx, &problem, &operands, workspace, workspace_bytes, nullptr, err, sizeof err) != ARB_OK)
    die(std::string("launch (warm-up): ") + err);
  for (long i = 0; i < calls; ++i)
    if (launch(ctx, &problem, &operands, workspace, workspace_bytes, nullptr, err, sizeof err) != ARB_OK)
      die(std::string("launch: ") + err);
  std::printf("mode=%s op=%s kernel=cpu.%s calls=%ld\n", mode.c_str(), op_name(mode), name, calls);
  std::free(workspace);
}

}  // namespace

int main(int argc, char** argv) {
  static const char* const kModes =
      "api, direct, api_gemm, direct_gemm, api_rmsnorm, direct_rmsnorm, api_shadow, api_gemm_shadow, plan, "
      "plan_gemm, plan_rmsnorm";
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr,
                 "usage: arbiter_bench_dispatch <mode> <calls> [plugin-file]\n"
                 "  mode: %s\n"
                 "  plugin-file (direct modes): default <bindir>/%s/arbiter_cpu.so\n",
                 kModes, ARBITER_BENCH_PLUGIN_DIR_FROM_BINDIR);
    return 2;
  }
  const std::string mode = argv[1];
  char* end = nullptr;
  const long calls = std::strtol(argv[2], &end, 10);
  if (end == argv[2] || *end != '\0' || calls < 0) die("calls must be a non-negative integer");
  Data data;
  if (mode == "api" || mode == "api_gemm" || mode == "api_rmsnorm" || mode == "api_shadow" ||
      mode == "api_gemm_shadow") {
    run_api(mode, calls, data);
  } else if (mode == "plan" || mode == "plan_gemm" || mode == "plan_rmsnorm") {
    run_plan(mode, calls, data);
  } else if (mode == "direct" || mode == "direct_gemm" || mode == "direct_rmsnorm") {
    run_direct(mode, calls, data, argc == 4 ? argv[3] : default_plugin_file());
  } else {
    die("unknown mode '" + mode + "' (" + kModes + ")");
  }
  return 0;
}
