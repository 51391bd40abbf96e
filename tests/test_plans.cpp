// Plans (arb_plan_create / arb_plan_run, core/plan.hpp): a run computes what the op's call
// computes on the same data, takes new addresses, refuses bad ones before touching memory,
// runs from many threads, and follows dispatch when a kernel is quarantined.
#include "common/failure.hpp"
#include "plan.hpp"
#include "problem/ops/ops.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using arbiter::test::PublicContext;
using arbiter::test::Tensor;

namespace {

// Storage aligned to 64 bytes, so that every run's fresh buffers are aligned at least as the
// plan's first ones were (the plan's alignment class comes from its addresses).
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  friend bool operator==(const Aligned64&, const Aligned64&) { return true; }
};
using Floats = std::vector<float, Aligned64<float>>;

Floats random_floats(size_t n, uint32_t seed) {
  Floats v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
  return v;
}

// The buffers of one gemm m x n x k with bias (row-major, 64-byte aligned storage).
struct GemmData {
  static constexpr int64_t m = 12, n = 16, k = 8;
  explicit GemmData(uint32_t seed)
      : a(random_floats(m * k, seed)), b(random_floats(k * n, seed + 1)), bias(random_floats(n, seed + 2)),
        d(m * n, NAN) {}
  Floats a, b, bias, d;
};

struct GemmArgs {
  explicit GemmArgs(GemmData& data)
      : a(data.a.data(), {GemmData::m, GemmData::k}), b(data.b.data(), {GemmData::k, GemmData::n}),
        bias(data.bias.data(), {GemmData::n}), d(data.d.data(), {GemmData::m, GemmData::n}) {
    args.a = &a.t;
    args.b = &b.t;
    args.bias = &bias.t;
    args.d = &d.t;
    args.activation = ARB_ACT_RELU;
    args.alpha = 0.5f;
  }
  Tensor a, b, bias, d;
  arb_gemm_args args = ARB_GEMM_ARGS_INIT;
};

arb_plan_operands gemm_operands(GemmData& data) {
  arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
  o.tensors[0] = data.a.data();
  o.tensors[1] = data.b.data();
  o.tensors[3] = data.bias.data();
  o.tensors[4] = data.d.data();
  return o;
}

struct Plan {
  Plan(arb_context ctx, int32_t op, const void* args) { REQUIRE_MESSAGE(arb_plan_create(ctx, op, args, &plan) == ARB_OK, arb_last_error()); }
  ~Plan() { arb_plan_destroy(plan); }
  std::string explain() const { return arbiter::test::plan_explanation(plan); }
  arb_plan plan = nullptr;
};

}  // namespace

TEST_CASE("plans: a gemm plan computes what arb_gemm computes, on the data of each run") {
  PublicContext context;
  GemmData first(1), again(1);
  GemmArgs args(first);
  Plan plan(context.ctx, ARB_OP_GEMM, &args.args);
  arb_plan_operands operands = gemm_operands(first);
  REQUIRE(arb_plan_run(plan.plan, &operands, nullptr) == ARB_OK);
  GemmArgs call(again);
  REQUIRE(arb_gemm(context.ctx, &call.args, nullptr) == ARB_OK);
  CHECK(std::memcmp(first.d.data(), again.d.data(), first.d.size() * sizeof(float)) == 0);

  // New data at new addresses (aligned as the plan's): the plan's shapes and scalars with it.
  for (uint32_t seed = 2; seed < 6; ++seed) {
    GemmData fresh(seed), expected(seed);
    arb_plan_operands o = gemm_operands(fresh);
    REQUIRE(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
    GemmArgs reference(expected);
    REQUIRE(arb_gemm(context.ctx, &reference.args, nullptr) == ARB_OK);
    CHECK(std::memcmp(fresh.d.data(), expected.d.data(), fresh.d.size() * sizeof(float)) == 0);
    for (float v : fresh.d) CHECK(std::isfinite(v));
  }
  const std::string text = plan.explain();
  CHECK(text.rfind("plan: runs ", 0) == 0);
  CHECK(text.find("problem: gemm f32 m=12 n=16 k=8") != std::string::npos);
}

TEST_CASE("plans: rmsnorm with a residual and softmax plans compute what their calls compute") {
  PublicContext context;
  const int64_t rows = 3, cols = 40;
  Floats x = random_floats(rows * cols, 7), r = random_floats(rows * cols, 8), w = random_floats(cols, 9),
                     y(rows * cols, NAN);
  Floats x2 = x, y2(rows * cols, NAN);
  Tensor tx(x.data(), {rows, cols}), tr(r.data(), {rows, cols}), tw(w.data(), {cols}), ty(y.data(), {rows, cols});
  arb_rmsnorm_args args = ARB_RMSNORM_ARGS_INIT;
  args.x = &tx.t;
  args.residual = &tr.t;
  args.weight = &tw.t;
  args.y = &ty.t;
  args.eps = 1e-5f;
  Plan rmsnorm(context.ctx, ARB_OP_RMSNORM, &args);
  arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
  o.tensors[0] = x2.data();
  o.tensors[1] = r.data();
  o.tensors[2] = w.data();
  o.tensors[3] = y2.data();
  REQUIRE(arb_plan_run(rmsnorm.plan, &o, nullptr) == ARB_OK);
  REQUIRE(arb_rmsnorm(context.ctx, &args, nullptr) == ARB_OK);
  CHECK(std::memcmp(x.data(), x2.data(), x.size() * sizeof(float)) == 0);  // x += residual, in place
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0);

  Floats s(rows * cols, NAN), s2(rows * cols, NAN);
  Tensor ts(s.data(), {rows, cols});
  arb_softmax_args softmax_args = ARB_SOFTMAX_ARGS_INIT;
  softmax_args.x = &tx.t;
  softmax_args.y = &ts.t;
  Plan softmax(context.ctx, ARB_OP_SOFTMAX, &softmax_args);
  arb_plan_operands so = ARB_PLAN_OPERANDS_INIT;
  so.tensors[0] = x.data();
  so.tensors[1] = s2.data();
  REQUIRE(arb_plan_run(softmax.plan, &so, nullptr) == ARB_OK);
  REQUIRE(arb_softmax(context.ctx, &softmax_args, nullptr) == ARB_OK);
  CHECK(std::memcmp(s.data(), s2.data(), s.size() * sizeof(float)) == 0);
}

TEST_CASE("plans: swiglu on two tensors, or on the two halves of one fused gate/up output") {
  PublicContext context;
  const int64_t rows = 3, cols = 24;
  Floats gate = random_floats(rows * cols, 11), up = random_floats(rows * cols, 12), y(rows * cols, NAN), y2(rows * cols, NAN);
  Tensor tg(gate.data(), {rows, cols}), tu(up.data(), {rows, cols}), ty(y.data(), {rows, cols});
  arb_swiglu_args args = ARB_SWIGLU_ARGS_INIT;
  args.gate = &tg.t;
  args.up = &tu.t;
  args.y = &ty.t;
  {
    Plan plan(context.ctx, ARB_OP_SWIGLU, &args);
    arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
    o.tensors[0] = gate.data();
    o.tensors[1] = up.data();
    o.tensors[2] = y2.data();
    REQUIRE(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
    REQUIRE(arb_swiglu(context.ctx, &args, nullptr) == ARB_OK);
    CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0);
    o.tensors[2] = up.data();  // the output onto an input
    CHECK(arb_plan_run(plan.plan, &o, nullptr) == ARB_ERR_INVALID_ARGUMENT);
    CHECK(std::string(arb_last_error()).find("overlaps") != std::string::npos);
  }

  // The halves of [rows, 2 cols] as views with row stride 2 cols: planned once, run on the
  // halves of another fused output, equal to the fused call on it.
  Floats both = random_floats(rows * 2 * cols, 13), other = random_floats(rows * 2 * cols, 14);
  Tensor left(both.data(), {rows, cols}, DLDataType{kDLFloat, 32, 1}, {2 * cols, 1});
  Tensor right(both.data() + cols, {rows, cols}, DLDataType{kDLFloat, 32, 1}, {2 * cols, 1});
  arb_swiglu_args halves = ARB_SWIGLU_ARGS_INIT;
  halves.gate = &left.t;
  halves.up = &right.t;
  halves.y = &ty.t;
  Plan plan(context.ctx, ARB_OP_SWIGLU, &halves);
  arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
  o.tensors[0] = other.data();
  o.tensors[1] = other.data() + cols;
  o.tensors[2] = y2.data();
  REQUIRE(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
  Tensor fused(other.data(), {rows, 2 * cols});
  arb_swiglu_args call = ARB_SWIGLU_ARGS_INIT;
  call.gate = &fused.t;
  call.y = &ty.t;
  REQUIRE(arb_swiglu(context.ctx, &call, nullptr) == ARB_OK);
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0);

  // One fused tensor cannot be planned: a run would have to derive up from each gate.
  arb_plan refused = nullptr;
  CHECK(arb_plan_create(context.ctx, ARB_OP_SWIGLU, &call, &refused) == ARB_ERR_UNSUPPORTED);
  CHECK(refused == nullptr);
  CHECK(std::string(arb_last_error()).find("two halves as views") != std::string::npos);
}

TEST_CASE("plans: bad addresses are refused with the reason, before any memory is written") {
  PublicContext context;
  GemmData data(3);
  GemmArgs args(data);
  Plan plan(context.ctx, ARB_OP_GEMM, &args.args);
  auto refused = [&](arb_plan_operands o, const char* needle, void* stream = nullptr) {
    Floats before = data.d;
    std::fill(data.d.begin(), data.d.end(), -7.0f);
    CHECK_STATUS(arb_plan_run(plan.plan, &o, stream), ARB_ERR_INVALID_ARGUMENT, needle);
    for (float v : data.d) CHECK(v == -7.0f);
    data.d = before;
  };
  arb_plan_operands o = gemm_operands(data);
  CHECK_STATUS(arb_plan_run(nullptr, &o, nullptr), ARB_ERR_INVALID_ARGUMENT, "plan is NULL");
  CHECK_STATUS(arb_plan_run(plan.plan, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "operands is NULL");
  arb_plan_operands bad = o;
  bad.struct_size = 8;
  refused(bad, "struct_size");
  bad = o;
  bad.tensors[1] = nullptr;
  refused(bad, "tensors[1] (b) is NULL");
  bad = o;
  bad.tensors[2] = data.d.data();  // c: beta was 0 at the plan's creation
  refused(bad, "tensors[2] (c) must be NULL");
  bad = o;
  bad.tensors[0] = reinterpret_cast<char*>(data.a.data()) + 2;  // not even aligned for f32
  refused(bad, "tensors[0] (a) is not aligned for its dtype");
  bad = o;
  bad.tensors[4] = data.a.data() + 4;  // d over a's elements
  Floats big(GemmData::m * GemmData::n + 64, 1.0f);
  bad.tensors[0] = big.data();
  bad.tensors[4] = big.data() + 16;
  {
    Floats before = big;
    CHECK_STATUS(arb_plan_run(plan.plan, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "tensors[4] (d) overlaps tensors[0] (a)");
    CHECK(big == before);
  }
  int stream_object = 0;
  refused(o, "stream must be NULL for CPU tensors", &stream_object);
  CHECK(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);  // and the plan still runs

  // Creation fails as the call would.
  arb_plan none = nullptr;
  CHECK_STATUS(arb_plan_create(context.ctx, ARB_OP_GEMM, &args.args, nullptr), ARB_ERR_INVALID_ARGUMENT, "plan (the output) is NULL");
  CHECK_STATUS(arb_plan_create(context.ctx, 99, &args.args, &none), ARB_ERR_INVALID_ARGUMENT, "unknown op 99");
  CHECK(none == nullptr);
  CHECK_STATUS(arb_plan_create(context.ctx, ARB_OP_GEMM, nullptr, &none), ARB_ERR_INVALID_ARGUMENT, "arb_gemm");
  CHECK_STATUS(arb_plan_create(nullptr, ARB_OP_GEMM, &args.args, &none), ARB_ERR_INVALID_ARGUMENT, "context is NULL");
  GemmArgs overlapping(data);
  overlapping.d.t.data = data.a.data();
  CHECK_STATUS(arb_plan_create(context.ctx, ARB_OP_GEMM, &overlapping.args, &none), ARB_ERR_INVALID_ARGUMENT, "overlaps");
  CHECK(arb_plan_destroy(nullptr) == ARB_OK);
  CHECK_STATUS(arb_plan_explain(nullptr, nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "plan is NULL");
}

TEST_CASE("plans: a caller built against 1.3-1.7 (five tensors, struct_size 48) runs a gemm plan, read only within its struct") {
  PublicContext context;
  GemmData data(8);
  GemmArgs args(data);
  Plan plan(context.ctx, ARB_OP_GEMM, &args.args);
  // The old struct ends where a page nobody may read begins: a read past its 48 bytes faults.
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(pages != MAP_FAILED);
  REQUIRE(mprotect(static_cast<char*>(pages) + page, page, PROT_NONE) == 0);
  auto* old = reinterpret_cast<arb_plan_operands*>(static_cast<char*>(pages) + page - ARB_PLAN_OPERANDS_STRUCT_SIZE);
  old->struct_size = ARB_PLAN_OPERANDS_STRUCT_SIZE;
  old->tensors[0] = data.a.data();
  old->tensors[1] = data.b.data();
  old->tensors[2] = nullptr;
  old->tensors[3] = data.bias.data();
  old->tensors[4] = data.d.data();
  CHECK_MESSAGE(arb_plan_run(plan.plan, old, nullptr) == ARB_OK, arb_last_error());
  GemmData reference(8);
  GemmArgs call(reference);
  REQUIRE(arb_gemm(context.ctx, &call.args, nullptr) == ARB_OK);
  CHECK(std::memcmp(data.d.data(), reference.d.data(), reference.d.size() * sizeof(float)) == 0);
  old->tensors[1] = nullptr;  // and its refusals are as before
  CHECK_STATUS(arb_plan_run(plan.plan, old, nullptr), ARB_ERR_INVALID_ARGUMENT, "tensors[1] (b) is NULL");
  munmap(pages, 2 * page);
}

TEST_CASE("plans: an output is refused exactly when its span meets an input's, at every offset around both ends") {
  // The run tests overlap as one unsigned comparison of the two addresses' distance
  // (core/plan.hpp, Pair); here d slides over a, one element at a time, from wholly before it
  // to wholly after it, and each run must be refused exactly when the spans intersect.
  PublicContext context;
  GemmData data(7);
  GemmArgs args(data);
  Plan plan(context.ctx, ARB_OP_GEMM, &args.args);
  constexpr int64_t a_elements = GemmData::m * GemmData::k, d_elements = GemmData::m * GemmData::n;
  // One buffer: [d's room before a][a][d's room after a], a 64-byte aligned in it.
  Floats buffer(d_elements + a_elements + d_elements, 0.0f);
  float* a = buffer.data() + d_elements;
  std::copy(data.a.begin(), data.a.end(), a);
  int refusals = 0, runs = 0;
  for (int64_t start = 0; start + d_elements <= static_cast<int64_t>(buffer.size()); start += 16) {  // 64-byte steps
    float* d = buffer.data() + start;
    const bool overlaps = d < a + a_elements && a < d + d_elements;
    std::copy(data.a.begin(), data.a.end(), a);  // a run before may have written over a's room
    arb_plan_operands o = gemm_operands(data);
    o.tensors[0] = a;
    o.tensors[4] = d;
    const arb_status status = arb_plan_run(plan.plan, &o, nullptr);
    CAPTURE(start);
    if (overlaps) {
      CHECK(status == ARB_ERR_INVALID_ARGUMENT);
      CHECK(std::string(arb_last_error()).find("tensors[4] (d) overlaps tensors[0] (a)") != std::string::npos);
      ++refusals;
    } else {
      CHECK_MESSAGE(status == ARB_OK, arb_last_error());
      ++runs;
    }
  }
  CHECK(refusals > 0);  // both sides of the boundary were reached
  CHECK(runs >= 2);     // d wholly before a and wholly after it
}

TEST_CASE("plans: addresses less aligned than the plan's run through dispatch for their alignment") {
  PublicContext context;
  GemmData data(6);  // 64-byte aligned: the plan's class is the row strides' (32 bytes)
  GemmArgs args(data);
  Plan plan(context.ctx, ARB_OP_GEMM, &args.args);
  // The same values one float further on: aligned for f32, not to 32 bytes.
  Floats a(data.a.size() + 1), d(data.d.size() + 1, NAN), expected(data.d.size(), NAN);
  std::copy(data.a.begin(), data.a.end(), a.begin() + 1);
  arb_plan_operands o = gemm_operands(data);
  o.tensors[0] = a.data() + 1;
  o.tensors[4] = d.data() + 1;
  REQUIRE(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
  GemmData reference(6);
  GemmArgs call(reference);
  REQUIRE(arb_gemm(context.ctx, &call.args, nullptr) == ARB_OK);
  CHECK(std::memcmp(d.data() + 1, reference.d.data(), reference.d.size() * sizeof(float)) == 0);
  CHECK(plan.explain().find("aligned to 32 bytes") != std::string::npos);
}

TEST_CASE("plans: a gemm planned in place takes c == d, and only that") {
  PublicContext context;
  GemmData data(4);
  Floats c = random_floats(GemmData::m * GemmData::n, 40);
  data.d = c;
  GemmArgs args(data);
  args.args.c = &args.d.t;  // c is d
  args.args.beta = 1.0f;
  Plan plan(context.ctx, ARB_OP_GEMM, &args.args);
  arb_plan_operands o = gemm_operands(data);
  o.tensors[2] = data.d.data();
  CHECK(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
  Floats other(data.d.size(), 0.0f);
  o.tensors[2] = other.data();
  CHECK_STATUS(arb_plan_run(plan.plan, &o, nullptr), ARB_ERR_INVALID_ARGUMENT, "tensors[2] (c) must be the same address as tensors[4] (d)");
}

TEST_CASE("plans: one plan runs from many threads at once") {
  PublicContext context;
  GemmData shape(5);
  GemmArgs args(shape);
  Plan plan(context.ctx, ARB_OP_GEMM, &args.args);
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 50; ++i) {
        GemmData mine(100 * t + i), expected(100 * t + i);
        arb_plan_operands o = gemm_operands(mine);
        if (arb_plan_run(plan.plan, &o, nullptr) != ARB_OK) ++wrong[t];
        GemmArgs reference(expected);
        if (arb_gemm(context.ctx, &reference.args, nullptr) != ARB_OK) ++wrong[t];
        if (std::memcmp(mine.d.data(), expected.d.data(), mine.d.size() * sizeof(float)) != 0) ++wrong[t];
      }
    });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) CHECK(wrong[t] == 0);
}

TEST_CASE("plans: a kernel quarantined by a shadow check is replaced in the plan at its next run") {
  // late_cheats.softmax_backdoor answers wrongly when x[0] is 42; every call shadow-checked.
  std::vector<std::string> files = arbiter::test::shipped_plugins();
  files.push_back(arbiter::test::fixture_file("late_cheats"));
  const std::string toml = arbiter::test::config_loading(
      files, "[verify]\nshadow_one_in = 1\n[[dispatch.override]]\nop = \"softmax\"\nkernel = \"late_cheats.softmax_backdoor\"\n");
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml.c_str();
  arb_context ctx = nullptr;
  REQUIRE(arb_context_create(&options, &ctx) == ARB_OK);
  const int64_t rows = 4, cols = 64;
  Floats x = random_floats(rows * cols, 11), y(rows * cols, NAN);
  Tensor tx(x.data(), {rows, cols}), ty(y.data(), {rows, cols});
  arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
  args.x = &tx.t;
  args.y = &ty.t;
  {
    Plan plan(ctx, ARB_OP_SOFTMAX, &args);
    CHECK(plan.explain().rfind("plan: runs late_cheats.softmax_backdoor", 0) == 0);
    arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
    o.tensors[0] = x.data();
    o.tensors[1] = y.data();
    x[0] = 42.0f;  // the backdoor's trigger: caught, quarantined, the call served by the fallback
    REQUIRE(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(x[j]) - 42.0);
    CHECK(y[0] == doctest::Approx(1.0 / sum).epsilon(1e-5));
    // explain chooses nothing: it says the next run chooses again; that run does.
    CHECK(plan.explain().rfind("plan: chooses again at its next run; it ran late_cheats.softmax_backdoor", 0) == 0);
    CHECK(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
    const std::string after = plan.explain();
    CHECK_MESSAGE(after.rfind("plan: runs ", 0) == 0, after);
    CHECK_MESSAGE(after.find("late_cheats") > after.find('\n'), after);  // not in the first line
  }
  arb_context_destroy(ctx);
}

TEST_CASE("plans: rope in place, positions checked against x") {
  PublicContext context;
  const int64_t tokens = 3, heads = 4, dim = 16;
  Floats x = random_floats(tokens * heads * dim, 21), x2 = x;
  std::vector<int32_t> pos = {5, 0, 4000}, pos2 = {7, 7, 1};
  Tensor tx(x.data(), {tokens, heads, dim}), tp(pos.data(), {tokens}, DLDataType{kDLInt, 32, 1});
  arb_rope_args args = ARB_ROPE_ARGS_INIT;
  args.x = &tx.t;
  args.positions = &tp.t;
  args.layout = ARB_ROPE_INTERLEAVED;
  Plan plan(context.ctx, ARB_OP_ROPE, &args);
  // A run on other memory and other positions equals the call on them.
  arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
  o.tensors[0] = x2.data();
  o.tensors[1] = pos2.data();
  REQUIRE(arb_plan_run(plan.plan, &o, nullptr) == ARB_OK);
  Tensor tp2(pos2.data(), {tokens}, DLDataType{kDLInt, 32, 1});
  args.positions = &tp2.t;
  REQUIRE(arb_rope(context.ctx, &args, nullptr) == ARB_OK);
  CHECK(std::memcmp(x.data(), x2.data(), x.size() * sizeof(float)) == 0);
  // The positions inside x, which the run writes: refused before anything is touched.
  const Floats kept = x2;
  o.tensors[1] = x2.data() + 8;
  CHECK(arb_plan_run(plan.plan, &o, nullptr) == ARB_ERR_INVALID_ARGUMENT);
  CHECK(std::string(arb_last_error()).find("overlaps") != std::string::npos);
  CHECK(x2 == kept);
  o.tensors[1] = nullptr;
  CHECK(arb_plan_run(plan.plan, &o, nullptr) == ARB_ERR_INVALID_ARGUMENT);
}

TEST_CASE("plans: attention, a run on other memory equals the call on it") {
  PublicContext context;
  const int64_t q_len = 3, kv_len = 37, heads = 4, kv_heads = 2, dim = 16;
  Floats q = random_floats(q_len * heads * dim, 31), k = random_floats(kv_len * kv_heads * dim, 32),
         v = random_floats(kv_len * kv_heads * dim, 33), o(q_len * heads * dim), o2(o.size());
  Floats q2 = random_floats(q.size(), 34), k2 = random_floats(k.size(), 35), v2 = random_floats(v.size(), 36);
  Tensor tq(q.data(), {1, q_len, heads, dim}), tk(k.data(), {1, kv_len, kv_heads, dim}),
      tv(v.data(), {1, kv_len, kv_heads, dim}), to(o.data(), {1, q_len, heads, dim});
  arb_attention_args args = ARB_ATTENTION_ARGS_INIT;
  args.q = &tq.t;
  args.k = &tk.t;
  args.v = &tv.t;
  args.o = &to.t;
  args.causal = 1;
  args.scale = 0.3f;
  Plan plan(context.ctx, ARB_OP_ATTENTION, &args);
  arb_plan_operands run = ARB_PLAN_OPERANDS_INIT;
  run.tensors[0] = q2.data();
  run.tensors[1] = k2.data();
  run.tensors[2] = v2.data();
  run.tensors[3] = o2.data();
  REQUIRE(arb_plan_run(plan.plan, &run, nullptr) == ARB_OK);
  Tensor tq2(q2.data(), {1, q_len, heads, dim}), tk2(k2.data(), {1, kv_len, kv_heads, dim}),
      tv2(v2.data(), {1, kv_len, kv_heads, dim});
  args.q = &tq2.t;
  args.k = &tk2.t;
  args.v = &tv2.t;
  REQUIRE(arb_attention(context.ctx, &args, nullptr) == ARB_OK);
  CHECK(std::memcmp(o.data(), o2.data(), o.size() * sizeof(float)) == 0);
  // o onto an input: refused before anything runs.
  run.tensors[3] = k2.data() + 8;
  CHECK(arb_plan_run(plan.plan, &run, nullptr) == ARB_ERR_INVALID_ARGUMENT);
  CHECK(std::string(arb_last_error()).find("overlaps") != std::string::npos);
}

namespace {

// What a run of `plan` did: "ok", or the status and message it threw.
template <int kLayout>
std::string run_outcome(arbiter::Plan& plan, const arb_plan_operands& data) {
  try {
    plan.run<kLayout>(data, nullptr);
    return "ok";
  } catch (const arbiter::Failure& e) {
    return std::string(arb_status_string(e.status())) + ": " + e.what();
  }
}
template <int... kLayout>
std::string run_as_layout(arbiter::Plan& plan, const arb_plan_operands& data, std::integer_sequence<int, kLayout...>) {
  std::string outcome = "no layout";
  ((plan.layout() == kLayout ? void(outcome = run_outcome<kLayout>(plan, data)) : void()), ...);
  return outcome;
}

}  // namespace

TEST_CASE("plans: every op's plan runs through its listed layout, which accepts and refuses as the general binder does") {
  auto context = arbiter::test::make_context(arbiter::test::config_loading(arbiter::test::shipped_plugins(), ""));
  const int64_t rows = 4, cols = 16;
  // One 64-byte aligned buffer per slot, of 2 cols x cols floats (mlp's fused gate/up weight, the
  // largest) and 16 more: a run below puts a tensor 4 floats into another's buffer, where the
  // whole tensor must still lie inside it (the shadow checks read it all).
  const int64_t buffer_floats = 2 * cols * cols + 16;
  std::vector<Floats> buffers;
  for (uint32_t i = 0; i < 6; ++i) buffers.push_back(random_floats(buffer_floats, 50 + i));
  auto matrix = [&](int i) { return std::make_unique<Tensor>(buffers[static_cast<size_t>(i)].data(), std::vector<int64_t>{rows, cols}); };
  auto row = [&](int i) { return std::make_unique<Tensor>(buffers[static_cast<size_t>(i)].data(), std::vector<int64_t>{cols}); };
  struct Case {
    std::string name;
    const arbiter::Op* op;
    const void* args;
  };
  // gemm rows x cols x cols with and without c (separate or d itself) and bias.
  auto a = matrix(0), b = std::make_unique<Tensor>(buffers[1].data(), std::vector<int64_t>{cols, cols}), c = matrix(2),
       bias = row(3), d = matrix(4);
  std::vector<arb_gemm_args> gemms;
  for (int variant = 0; variant < 6; ++variant) {
    arb_gemm_args g = ARB_GEMM_ARGS_INIT;
    g.a = &a->t;
    g.b = &b->t;
    g.d = &d->t;
    if (variant & 1) g.bias = &bias->t;
    if (variant >= 2) {
      g.beta = 0.5f;
      g.c = variant >= 4 ? &d->t : &c->t;
    }
    gemms.push_back(g);
  }
  auto x = matrix(0), residual = matrix(1), weight = row(2), y = matrix(3), up = matrix(1), gate = matrix(0);
  arb_rmsnorm_args norm = ARB_RMSNORM_ARGS_INIT;
  norm.x = &x->t;
  norm.weight = &weight->t;
  norm.y = &y->t;
  arb_rmsnorm_args norm_residual = norm;
  norm_residual.residual = &residual->t;
  arb_softmax_args softmax = ARB_SOFTMAX_ARGS_INIT;
  softmax.x = &x->t;
  softmax.y = &y->t;
  auto swiglu_y = matrix(2);
  arb_swiglu_args swiglu = ARB_SWIGLU_ARGS_INIT;
  swiglu.gate = &gate->t;
  swiglu.up = &up->t;
  swiglu.y = &swiglu_y->t;
  std::vector<Case> cases;
  for (size_t i = 0; i < gemms.size(); ++i) cases.push_back({"gemm " + std::to_string(i), &arbiter::gemm_op(), &gemms[i]});
  cases.push_back({"rmsnorm", &arbiter::rmsnorm_op(), &norm});
  cases.push_back({"rmsnorm with a residual", &arbiter::rmsnorm_op(), &norm_residual});
  cases.push_back({"softmax", &arbiter::softmax_op(), &softmax});
  cases.push_back({"swiglu", &arbiter::swiglu_op(), &swiglu});
  // rope: x as rows tokens of 2 heads of cols / 2, and int32 positions in a buffer of their own.
  Floats position_buffer(buffer_floats);  // as large as the others: a run may put x into it
  for (int32_t t = 0; t < rows; ++t) std::memcpy(position_buffer.data() + t, &t, sizeof t);
  auto heads = std::make_unique<Tensor>(buffers[0].data(), std::vector<int64_t>{rows, 2, cols / 2});
  auto positions = std::make_unique<Tensor>(position_buffer.data(), std::vector<int64_t>{rows}, DLDataType{kDLInt, 32, 1});
  arb_rope_args rope = ARB_ROPE_ARGS_INIT;
  rope.x = &heads->t;
  rope.positions = &positions->t;
  cases.push_back({"rope", &arbiter::rope_op(), &rope});
  // attention: q and o [1, rows, 2, cols / 2], k and v [1, rows, 1, cols / 2] (two query heads
  // a key/value head), causal.
  auto q4 = std::make_unique<Tensor>(buffers[0].data(), std::vector<int64_t>{1, rows, 2, cols / 2});
  auto k4 = std::make_unique<Tensor>(buffers[1].data(), std::vector<int64_t>{1, rows, 1, cols / 2});
  auto v4 = std::make_unique<Tensor>(buffers[2].data(), std::vector<int64_t>{1, rows, 1, cols / 2});
  auto o4 = std::make_unique<Tensor>(buffers[3].data(), std::vector<int64_t>{1, rows, 2, cols / 2});
  arb_attention_args attention = ARB_ATTENTION_ARGS_INIT;
  attention.q = &q4->t;
  attention.k = &k4->t;
  attention.v = &v4->t;
  attention.o = &o4->t;
  attention.causal = 1;
  cases.push_back({"attention", &arbiter::attention_op(), &attention});
  // mlp: hidden = inter = cols, with separate gate and up weights or one fused [2 cols, cols]
  // weight (up NULL: each run derives it from gate).
  auto square = [&](int i) { return std::make_unique<Tensor>(buffers[static_cast<size_t>(i)].data(), std::vector<int64_t>{cols, cols}); };
  auto mlp_x = matrix(0), mlp_norm = row(1), mlp_gate = square(2), mlp_up = square(3), mlp_down = square(4), mlp_y = matrix(5);
  auto mlp_gate_up = std::make_unique<Tensor>(buffers[2].data(), std::vector<int64_t>{2 * cols, cols});
  arb_mlp_args mlp = ARB_MLP_ARGS_INIT;
  mlp.x = &mlp_x->t;
  mlp.norm_weight = &mlp_norm->t;
  mlp.gate = &mlp_gate->t;
  mlp.up = &mlp_up->t;
  mlp.down = &mlp_down->t;
  mlp.y = &mlp_y->t;
  arb_mlp_args mlp_fused = mlp;
  mlp_fused.gate = &mlp_gate_up->t;
  mlp_fused.up = nullptr;
  cases.push_back({"mlp", &arbiter::mlp_op(), &mlp});
  cases.push_back({"mlp with a fused gate/up weight", &arbiter::mlp_op(), &mlp_fused});

  for (const Case& test : cases) {
    CAPTURE(test.name);
    arbiter::Plan plan(*context, *test.op, test.args);
    REQUIRE(plan.layout() >= 0);  // every op's plans are listed in kPlanLayouts
    arb_plan_operands good = ARB_PLAN_OPERANDS_INIT;
    std::vector<int> used;
    // The plan's tensors, slot by slot, as plan_slots lists them.
    arbiter::PlanSlots slots;
    test.op->plan_slots(test.args, plan.problem(), slots);
    int tensors = 0;  // the op's
    for (int slot = 0; slot < ARB_PLAN_MAX_TENSORS; ++slot) {
      if (slots[static_cast<size_t>(slot)].name != nullptr) tensors = slot + 1;
      if (slots[static_cast<size_t>(slot)].tensor != nullptr) {
        good.tensors[slot] = slots[static_cast<size_t>(slot)].tensor->data;
        used.push_back(slot);
      }
    }
    const int slots_read = std::max(tensors, 5);  // 1.3's five, or more for an op with more (mlp)
    const auto layouts = std::make_integer_sequence<int, arbiter::kPlanLayoutCount>{};
    auto same = [&](const arb_plan_operands& data, const char* what) {
      CAPTURE(what);
      const std::string general = run_outcome<-1>(plan, data), listed = run_as_layout(plan, data, layouts);
      CHECK(general == listed);
      return general;
    };
    CHECK(same(good, "the plan's own tensors") == "ok");
    arb_plan_operands bad = good;
    bad.struct_size = 8;
    same(bad, "struct_size");
    bad.struct_size = ARB_PLAN_OPERANDS_STRUCT_SIZE;  // a caller built against 1.3-1.7: five tensors
    CHECK((same(bad, "struct_size of 1.3") == "ok") == (tensors <= 5));
    Floats spare = random_floats(buffer_floats, 60);
    for (int slot = 0; slot < ARB_PLAN_MAX_TENSORS; ++slot) {
      CAPTURE(slot);
      bad = good;
      if (slot >= slots_read) {  // never read
        bad.tensors[slot] = spare.data();
        CHECK(same(bad, "a slot past those the op reads") == "ok");
        continue;
      }
      if (good.tensors[slot] == nullptr) {
        bad.tensors[slot] = spare.data();
        CHECK(same(bad, "a stray tensor") != "ok");
        continue;
      }
      bad.tensors[slot] = nullptr;
      CHECK(same(bad, "NULL") != "ok");
      bad.tensors[slot] = reinterpret_cast<char*>(spare.data()) + 2;
      CHECK(same(bad, "not aligned for the dtype") != "ok");
      bad.tensors[slot] = spare.data() + 1;
      same(bad, "less aligned than the plan's");
      bad.tensors[slot] = reinterpret_cast<void*>(UINTPTR_MAX - 64);
      CHECK(same(bad, "past the end of the address space") != "ok");
      for (int other : used) {  // onto each other tensor, and 4 floats past its start
        if (other == slot) continue;
        bad.tensors[slot] = good.tensors[other];
        same(bad, "onto another tensor");
        bad.tensors[slot] = static_cast<float*>(good.tensors[other]) + 4;
        same(bad, "into another tensor");
      }
    }
  }
}
