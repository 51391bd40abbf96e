// The onednn plugin (plugins/onednn): libdnnl is not loaded by the plugin's entry, only by
// its first use; its runtime_version names the oneDNN version and ISA; its matmul agrees
// with the reference plugin on every dtype, transpose and epilogue it accepts, and says why
// when it refuses; a launch that finds its primitive cached allocates nothing beyond what
// oneDNN's own dnnl_primitive_execute does; launches of one problem run concurrently.
// Skipped (exit 77) when the plugin was not built or oneDNN cannot run here.
#define DOCTEST_CONFIG_IMPLEMENT
#include "common/log.hpp"
#include "device/host_buffer.hpp"
#include "device/problem_buffers.hpp"
#include "doctest_main.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem_text.hpp"
#include "test_support.hpp"
#include "verify/accuracy.hpp"

#include <arbiter/plugin.h>
#include <dlfcn.h>
#include <fmt/format.h>

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define ARBITER_TEST_HAVE_DNNL_HEADERS 1
#else
#define ARBITER_TEST_HAVE_DNNL_HEADERS 0
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define ARBITER_TEST_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARBITER_TEST_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef ARBITER_TEST_COUNT_ALLOCATIONS
#define ARBITER_TEST_COUNT_ALLOCATIONS 1
#endif

// ---- allocation counting: the malloc family, which operator new also goes through --------
#if ARBITER_TEST_COUNT_ALLOCATIONS
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}
namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void count() {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace
extern "C" {
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  count();
  void* p = __libc_memalign(alignment, n);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}
#endif

using namespace arbiter;

namespace {

bool dnnl_loaded() {
  void* handle = ::dlopen("libdnnl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  if (handle != nullptr) ::dlclose(handle);
  return handle != nullptr;
}

const bool dnnl_loaded_at_start = dnnl_loaded();

[[noreturn]] void skip(const std::string& why) {
  std::printf("skipped: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(77);
}

// The plugin file opened directly (no libarbiter between), its descriptor and kernels.
struct DirectPlugin {
  void* library = nullptr;
  const arb_plugin_descriptor* descriptor = nullptr;
  const arb_kernel* kernel(const char* name) const {
    for (size_t i = 0; i < descriptor->kernel_count; ++i)
      if (std::strcmp(descriptor->kernels[i]->name, name) == 0) return descriptor->kernels[i];
    return nullptr;
  }
};

const DirectPlugin& direct_plugin() {
  static const DirectPlugin plugin = [] {
    DirectPlugin p;
    const std::string file = test::plugin_file("onednn");
    p.library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (p.library == nullptr) skip("the onednn plugin was not built (" + file + "): apt-get install libdnnl-dev");
    auto entry = reinterpret_cast<arb_plugin_entry_fn>(::dlsym(p.library, ARB_PLUGIN_ENTRY_SYMBOL));
    REQUIRE(static_cast<bool>(entry));
    static const arb_host_api host = {sizeof(arb_host_api), ARB_PLUGIN_ABI_MAJOR, ARB_PLUGIN_ABI_MINOR, "test", nullptr, nullptr};
    char err[512] = "";
    REQUIRE_MESSAGE(entry(&host, &p.descriptor, err, sizeof err) == ARB_OK, err);
    return p;
  }();
  return plugin;
}

// Skips the test when oneDNN cannot serve the basic problem (no libdnnl at run time, an
// unexpected ISA): the plugin refuses everything then, with the reason.
void require_usable() {
  const arb_kernel* matmul = direct_plugin().kernel("matmul");
  REQUIRE(matmul != nullptr);
  const arb_problem p = parse_problem("gemm f32 m=8 n=8 k=8").problem;
  char why[512] = "";
  if (!matmul->supports(matmul->ctx, &p, why, sizeof why)) skip(std::string("oneDNN cannot run here: ") + why);
}

Context& shared_context() {
  static const auto context = test::make_context(test::config_loading({test::plugin_file("onednn")}));
  return *context;
}

// Runs `kernel` and the reference on the same random inputs; false when the kernel refuses.
bool agrees_with_reference(const std::string& kernel_name, const std::string& text, uint64_t seed, std::string* refusal) {
  CAPTURE(text);
  Context& context = shared_context();
  const KernelRecord* kernel = context.registry().find(kernel_name);
  REQUIRE(kernel != nullptr);
  const ParsedProblem parsed = parse_problem(text);
  std::string why;
  if (!kernel_supports(*kernel, parsed.problem, &why)) {
    if (refusal) *refusal = why;
    return false;
  }
  const KernelRecord* reference = context.registry().find("reference.gemm");
  REQUIRE(reference != nullptr);
  ProblemBuffers buffers(parsed.problem, parsed.alpha, parsed.beta, parsed.eps);
  buffers.randomize(seed, seed % 2 ? Distribution::normal : Distribution::uniform);
  const ProblemBuffers before = buffers;
  ProblemBuffers expected = buffers;
  context.run_kernel(*kernel, parsed.problem, buffers.operands(), nullptr);
  context.run_kernel(*reference, parsed.problem, expected.operands(), nullptr);
  const Comparison c = compare_outputs(buffers, expected);
  CHECK(c.finite);
  CHECK_MESSAGE(c.error <= tolerance_for(*kernel, parsed.problem), "relative error ", c.error, " in ", c.worst);
  for (size_t i = 0; i < buffers.all().size(); ++i)  // inputs untouched
    if (!buffers.all()[i].is_output)
      CHECK(std::memcmp(buffers.all()[i].buffer.data(), before.all()[i].buffer.data(), buffers.all()[i].buffer.size()) == 0);
  return true;
}

// One launch through the kernel's own pointer, with the workspace it asks for.
struct DirectCall {
  const arb_kernel* kernel;
  arb_problem problem;
  ProblemBuffers buffers;
  arb_operands operands;
  HostBuffer workspace;
  size_t workspace_bytes = 0;
  DirectCall(const arb_kernel* k, const std::string& text)
      : kernel(k), problem(parse_problem(text).problem), buffers([&] {
          const ParsedProblem parsed = parse_problem(text);
          ProblemBuffers b(parsed.problem, parsed.alpha, parsed.beta, parsed.eps);
          b.randomize(7);
          return b;
        }()),
        operands(buffers.operands()) {
    char why[512] = "";
    REQUIRE_MESSAGE(kernel->supports(kernel->ctx, &problem, why, sizeof why), why);
    REQUIRE(kernel->workspace_size(kernel->ctx, &problem, &workspace_bytes) == ARB_OK);
    workspace = HostBuffer(workspace_bytes);
  }
  arb_status launch(std::string* message = nullptr) {
    char err[512] = "";
    const arb_status s =
        kernel->launch(kernel->ctx, &problem, &operands, workspace.data(), workspace_bytes, nullptr, err, sizeof err);
    if (message) *message = err;
    return s;
  }
};

#if ARBITER_TEST_COUNT_ALLOCATIONS && ARBITER_TEST_HAVE_DNNL_HEADERS
// Allocations of one bare dnnl_primitive_execute of f32 m = n = k = 64 (built as the plugin
// builds it: strided descriptors, a user scratchpad), with libdnnl's own functions; -1 when
// something is missing.
long bare_execute_allocations(int calls) {
  void* dnnl = ::dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (dnnl == nullptr) return -1;
#define TEST_DNNL(name) auto name = reinterpret_cast<decltype(&::name)>(::dlsym(dnnl, #name))
  TEST_DNNL(dnnl_engine_create);
  TEST_DNNL(dnnl_stream_create);
  TEST_DNNL(dnnl_memory_desc_init_by_strides);
  TEST_DNNL(dnnl_matmul_desc_init);
  TEST_DNNL(dnnl_primitive_attr_create);
  TEST_DNNL(dnnl_primitive_attr_set_scratchpad_mode);
  TEST_DNNL(dnnl_primitive_desc_create);
  TEST_DNNL(dnnl_primitive_desc_query_md);
  TEST_DNNL(dnnl_memory_desc_get_size);
  TEST_DNNL(dnnl_primitive_create);
  TEST_DNNL(dnnl_memory_create);
  TEST_DNNL(dnnl_primitive_execute);
  TEST_DNNL(dnnl_stream_wait);
#undef TEST_DNNL
  ::dlclose(dnnl);  // the plugin keeps it loaded
  // Leaked on purpose: a few objects, once per test process.
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  REQUIRE(dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success);
  REQUIRE(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success);
  dnnl_memory_desc_t md;
  const dnnl_dims_t dims = {64, 64}, strides = {64, 1};
  REQUIRE(dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_f32, strides) == dnnl_success);
  dnnl_matmul_desc_t matmul;
  REQUIRE(dnnl_matmul_desc_init(&matmul, &md, &md, nullptr, &md) == dnnl_success);
  dnnl_primitive_attr_t attr;
  REQUIRE(dnnl_primitive_attr_create(&attr) == dnnl_success);
  REQUIRE(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success);
  dnnl_primitive_desc_t pd;
  REQUIRE(dnnl_primitive_desc_create(&pd, &matmul, attr, engine, nullptr) == dnnl_success);
  dnnl_primitive_t primitive;
  REQUIRE(dnnl_primitive_create(&primitive, pd) == dnnl_success);
  static std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 1.0f), d(64 * 64);
  static std::vector<char> scratch;
  const dnnl_memory_desc_t* scratch_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  scratch.resize(dnnl_memory_desc_get_size(scratch_md) + 64);
  dnnl_exec_arg_t args[4];
  int count = 0;
  for (auto [id, data] : {std::pair<int, void*>{DNNL_ARG_SRC, a.data()}, {DNNL_ARG_WEIGHTS, b.data()}, {DNNL_ARG_DST, d.data()}}) {
    dnnl_memory_t m;
    REQUIRE(dnnl_memory_create(&m, &md, engine, data) == dnnl_success);
    args[count++] = {id, m};
  }
  if (dnnl_memory_desc_get_size(scratch_md) > 0) {
    dnnl_memory_t m;
    REQUIRE(dnnl_memory_create(&m, scratch_md, engine, scratch.data()) == dnnl_success);
    args[count++] = {DNNL_ARG_SCRATCHPAD, m};
  }
  REQUIRE(dnnl_primitive_execute(primitive, stream, count, args) == dnnl_success);
  allocations = 0;
  counting = true;
  for (int i = 0; i < calls; ++i) {
    dnnl_primitive_execute(primitive, stream, count, args);
    dnnl_stream_wait(stream);
  }
  counting = false;
  return allocations.load();
}
#endif

}  // namespace

TEST_CASE("onednn: the entry leaves libdnnl unloaded, the first supports() loads it") {
  const DirectPlugin& plugin = direct_plugin();
  if (dnnl_loaded_at_start) {
    MESSAGE("libdnnl was in the process before the plugin: the lazy load cannot be seen");
  } else {
    CHECK_FALSE(dnnl_loaded());  // the entry has run
  }
  const std::string runtime = plugin.descriptor->runtime_version ? plugin.descriptor->runtime_version : "";
  CAPTURE(runtime);
  CHECK(runtime.rfind("oneDNN 2.", 0) == 0);
  CHECK(runtime.find(", isa ") != std::string::npos);
  require_usable();
  CHECK(dnnl_loaded());
  // The ISA announced is the one oneDNN runs (a mismatch would have made supports() refuse).
  void* dnnl = ::dlopen("libdnnl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  REQUIRE(dnnl != nullptr);
  auto effective = reinterpret_cast<int (*)()>(::dlsym(dnnl, "dnnl_get_effective_cpu_isa"));
  REQUIRE(static_cast<bool>(effective));
  MESSAGE("oneDNN's isa: 0x", std::hex, effective(), "; ", runtime);
  ::dlclose(dnnl);
}

TEST_CASE("onednn.matmul matches the reference: dtypes, transposes, epilogues, C and alpha, padded strides") {
  require_usable();
  struct Shape {
    int64_t m, n, k, pad;
  };
  const std::vector<Shape> shapes = {{1, 1, 1, 0}, {7, 13, 5, 0}, {64, 64, 64, 0}, {17, 1, 31, 1},
                                     {65, 97, 129, 0}, {2, 64, 61, 3}, {130, 1, 70, 0}, {48, 17, 33, 2}};
  int accepted = 0, refused = 0;
  uint64_t index = 0;
  for (const char* dtype : {"f32", "bf16", "f16"}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "silu"})
          for (int bias = 0; bias < 2; ++bias)
            for (int s = 0; s < 2; ++s, ++index) {
              const Shape& shape = shapes[(index * 3 + static_cast<uint64_t>(s)) % shapes.size()];
              std::string text = fmt::format("gemm {} m={} n={} k={} ta={} tb={} act={} bias={} lda={} ldb={} ldd={}", dtype,
                                             shape.m, shape.n, shape.k, ta, tb, act, bias, (ta ? shape.m : shape.k) + shape.pad,
                                             (tb ? shape.k : shape.n) + shape.pad, shape.n + shape.pad);
              switch (index % 3) {  // C: absent, a separate matrix, or D itself
                case 1: text += fmt::format(" beta=0.5 ldc={} alpha=1.5", shape.n + 2 * shape.pad); break;
                case 2: text += " beta=1 inplace=1 alpha=-1"; break;
                default: break;
              }
              std::string why;
              if (agrees_with_reference("onednn.matmul", text, index, &why)) {
                ++accepted;
              } else {
                ++refused;
                CAPTURE(text);
                CHECK(!why.empty());  // a refusal always says why
              }
            }
  }
  MESSAGE(accepted, " problems accepted and checked, ", refused, " refused with a reason");
  // What a CPU user needs most is never refused: dense f32 and bf16, any epilogue and C.
  for (const char* text : {"gemm f32 m=64 n=64 k=64", "gemm bf16 m=64 n=64 k=64 act=gelu bias=1",
                           "gemm f32 m=33 n=65 k=17 ta=1 tb=1 act=silu bias=1 beta=0.5 alpha=2",
                           "gemm bf16 m=256 n=256 k=256 beta=1 inplace=1", "gemm f32 m=1 n=4096 k=512 act=relu"}) {
    std::string why;
    CHECK_MESSAGE(agrees_with_reference("onednn.matmul", text, 3, &why), text, ": ", why);
  }
}

TEST_CASE("onednn: beta C is formed in f32, never rounded to a 16-bit D on its own (cancellation stays exact)") {
  require_usable();
  // d = a b + beta c with a b = -0.75 and beta c = 0.75 (1 + 2^-7) = 0.755859375, which bf16
  // cannot hold (it rounds to 0.7578125): the exact d, 3 x 2^-9, is a bf16. Scaling C into D
  // first gave 0.0078125 (33% off; the gate failed one verification in ten at m = n = k = 1).
  const KernelRecord* matmul = shared_context().registry().find("onednn.matmul");
  REQUIRE(matmul != nullptr);
  for (const bool in_place : {false, true}) {
    CAPTURE(in_place);
    const ParsedProblem parsed = parse_problem(in_place ? "gemm bf16 m=1 n=1 k=1 beta=0.75 inplace=1" : "gemm bf16 m=1 n=1 k=1 beta=0.75");
    uint16_t a = float_to_bf16(1.0f), b = float_to_bf16(-0.75f), c = float_to_bf16(1.0078125f), d = 0;
    if (in_place) d = c;
    arb_operands o{};
    o.struct_size = sizeof o;
    o.a = &a;
    o.b = &b;
    o.c = in_place ? static_cast<const void*>(&d) : &c;
    o.d = &d;
    o.alpha = 1.0f;
    o.beta = 0.75f;
    shared_context().run_kernel(*matmul, parsed.problem, o, nullptr);
    CHECK(bf16_to_float(d) == 0.005859375f);
    o.alpha = -2.0f;  // alpha and beta both run-time: -2 (-0.75) + 0.75 (1 + 2^-7) = 2.255859375, 2.25 in bf16
    d = in_place ? c : 0;
    shared_context().run_kernel(*matmul, parsed.problem, o, nullptr);
    CHECK(bf16_to_float(d) == 2.25f);
  }
}

TEST_CASE("onednn: a problem oneDNN's primitive cache takes for another runs with the cached primitive's scratchpad") {
  require_usable();
  // For one row, oneDNN's primitive cache ignores the row strides of A and D, so these two
  // problems meet there. Described first, while the cache is empty, the second is jit gemm
  // (no scratchpad); the first, launched next, puts its brgemm primitive (which copies B
  // into its scratchpad) in the cache; the second's primitive, created after, is that one.
  // Sized from the second's own descriptor, the copy went to address 0 (a verification's
  // edge shapes did exactly this).
  const std::string first = "gemm f32 m=1 n=48 k=80 tb=1", second = "gemm f32 m=1 n=48 k=80 tb=1 lda=160 ldb=80 ldd=96";
  const KernelRecord* matmul = shared_context().registry().find("onednn.matmul");
  REQUIRE(matmul != nullptr);
  std::string why;
  REQUIRE_MESSAGE(kernel_supports(*matmul, parse_problem(second).problem, &why), why);
  for (const std::string& text : {first, second, first, second}) {
    CHECK_MESSAGE(agrees_with_reference("onednn.matmul", text, 5, &why), text, ": ", why);
  }
}

TEST_CASE("onednn: no softmax kernel (oneDNN gives 0 where arbiter gives NaN, a row of -inf logits)") {
  require_usable();
  CHECK(direct_plugin().kernel("softmax") == nullptr);
}

TEST_CASE("onednn: a launch on a cache hit allocates nothing beyond oneDNN's own execute") {
#if !ARBITER_TEST_COUNT_ALLOCATIONS
  MESSAGE("skipped: allocations are not counted under AddressSanitizer");
#else
  require_usable();
  const DirectPlugin& plugin = direct_plugin();
  // Arguments per execute: src, weights, dst (+ bias, the alpha scale, the scratchpad).
  struct Case {
    const char* kernel;
    const char* text;
  };
  for (const Case c : {Case{"matmul", "gemm f32 m=64 n=64 k=64"}, Case{"matmul", "gemm bf16 m=32 n=48 k=40 act=gelu bias=1 alpha=0.5"},
                       Case{"matmul", "gemm f32 m=16 n=16 k=16 beta=1 inplace=1 act=silu"}}) {
    CAPTURE(c.text);
    DirectCall call(plugin.kernel(c.kernel), c.text);
    std::string err;
    REQUIRE_MESSAGE(call.launch(&err) == ARB_OK, err);  // the miss: primitive and slot made
    REQUIRE(call.launch() == ARB_OK);
    const int calls = 50;
    allocations = 0;
    counting = true;
    for (int i = 0; i < calls; ++i) call.launch();
    counting = false;
    const long launched = allocations.load();
    MESSAGE(std::string(c.text), ": ", launched, " allocations in ", calls, " launches");
    CHECK(launched % calls == 0);  // the same every call: nothing grows or is cached late
    // oneDNN 2.6's dnnl_primitive_execute itself allocates per call (it builds a
    // std::unordered_map of its arguments and an execution context): about two per argument.
    CHECK(launched / calls <= 2 * 6);
#if ARBITER_TEST_HAVE_DNNL_HEADERS
    // The plugin's own path (cache lookup, slot, data handles) adds nothing to that: for the
    // plain f32 problem, exactly what a bare execute of the same primitive allocates.
    if (std::string(c.text) == "gemm f32 m=64 n=64 k=64") {
      const long bare = bare_execute_allocations(calls);
      MESSAGE("a bare dnnl_primitive_execute of it: ", bare, " allocations in ", calls, " calls");
      CHECK(launched == bare);
    }
#endif
  }
#endif
}

TEST_CASE("onednn: launches of one problem from several threads at once agree") {
  require_usable();
  const DirectPlugin& plugin = direct_plugin();
  const std::string text = "gemm f32 m=48 n=40 k=56 act=relu bias=1 alpha=1.25 beta=0.5";
  DirectCall first(plugin.kernel("matmul"), text);
  REQUIRE(first.launch() == ARB_OK);
  std::vector<std::unique_ptr<DirectCall>> calls;
  for (int t = 0; t < 4; ++t) calls.push_back(std::make_unique<DirectCall>(plugin.kernel("matmul"), text));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (auto& call : calls)
    threads.emplace_back([&failures, c = call.get()] {
      for (int i = 0; i < 20; ++i)
        if (c->launch() != ARB_OK) ++failures;
    });
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  // beta * C is rewritten from C each call, so every copy ends where one launch does.
  for (auto& call : calls) CHECK(compare_outputs(call->buffers, first.buffers).error == 0.0);
}

TEST_CASE("onednn: a too small workspace and unknown problems give a status and a message") {
  require_usable();
  const DirectPlugin& plugin = direct_plugin();
  const arb_kernel* matmul = plugin.kernel("matmul");
  DirectCall call(matmul, "gemm f32 m=64 n=64 k=64 ta=1");
  if (call.workspace_bytes > 0) {
    char err[256] = "";
    const arb_status s = matmul->launch(matmul->ctx, &call.problem, &call.operands, call.workspace.data(), 1, nullptr,
                                        err, sizeof err);
    CHECK(s == ARB_ERR_INVALID_ARGUMENT);
    CHECK(std::string(err).find("workspace") != std::string::npos);
  }
  arb_problem batched = call.problem;
  batched.batch = 4;
  char why[256] = "";
  CHECK(matmul->supports(matmul->ctx, &batched, why, sizeof why) == 0);
  CHECK(std::string(why).find("batched") != std::string::npos);
  arb_problem gpu = call.problem;
  gpu.device_type = kDLCUDA;
  CHECK(matmul->supports(matmul->ctx, &gpu, why, sizeof why) == 0);
}

int main(int argc, char** argv) {
  arbiter::set_log_level(ARB_LOG_ERROR);
  return arbiter::test::run_doctest(argc, argv);
}
