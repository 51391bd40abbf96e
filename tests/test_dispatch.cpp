// Dispatch policy: overrides, on-miss, priorities, explain, and the selection cache.
#include "common/failure.hpp"
#include "problem/problem_text.hpp"
#include "dispatch/selection_cache.hpp"
#include "problem/ops/ops.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>

using namespace arbiter;

namespace {

std::unique_ptr<Context> shipped(const std::string& extra = "") {
  return test::make_context(test::config_loading(test::shipped_plugins(), extra));
}

std::string chosen(Context& context, const std::string& problem) {
  const Decision decision = context.dispatcher().decide(parse_problem(problem).problem, Dispatcher::Mode::dispatch);
  return decision.kernel ? decision.kernel->name : "none: " + decision.failure;
}

}  // namespace

TEST_CASE("heuristic: the highest-priority kernel that supports the problem") {
  const auto context = shipped();
  CHECK(chosen(*context, "gemm f32 m=8 n=8 k=8") == test::preferred_small_gemm());
  CHECK(chosen(*context, "rmsnorm bf16 rows=2 cols=4096") == "cpu.rmsnorm");
#ifdef ARBITER_TEST_HAVE_OPENBLAS
  CHECK(chosen(*context, "gemm f32 m=65 n=8 k=8") == "openblas.sgemm");  // gemm_small refuses m > 64
#else
  CHECK(chosen(*context, "gemm f32 m=65 n=8 k=8") == "reference.gemm");
#endif
}

TEST_CASE("config priorities reorder plugins") {
  const auto context = shipped("[plugins.priority]\nreference = 500\n");
  CHECK(chosen(*context, "gemm f32 m=8 n=8 k=8") == "reference.gemm");
  CHECK(test::plugin_named(*context, "reference")->priority == 500);
  CHECK(test::plugin_named(*context, "reference")->own_priority == 0);
}

TEST_CASE("overrides: first match wins, a missing or refusing kernel is skipped and explained") {
  const auto context = shipped(R"(
[[dispatch.override]]
op = "gemm"
dtype = "f32"
m = [1, 4]
kernel = "nosuch.kernel"
[[dispatch.override]]
op = "gemm"
m = [100, 200]
kernel = "cpu.gemm_small_avx2"
[[dispatch.override]]
op = "gemm"
dtype = "f32"
m = [1, 200]
kernel = "reference.gemm"
[[dispatch.override]]
op = "softmax"
cols = [1, 16]
kernel = "reference.softmax"
)");
  CHECK(chosen(*context, "gemm f32 m=2 n=8 k=8") == "reference.gemm");   // rule 1 skipped: no such kernel
  CHECK(chosen(*context, "gemm f32 m=150 n=8 k=8") == "reference.gemm");  // rule 2 skipped: kernel refuses
  CHECK(chosen(*context, "gemm f16 m=2 n=8 k=8") == test::preferred_small_gemm());    // no rule matches f16
  CHECK(chosen(*context, "softmax f32 rows=1 cols=16") == "reference.softmax");
  CHECK(chosen(*context, "softmax f32 rows=1 cols=17") == "cpu.softmax");

  const std::string report = context->dispatcher().explain(parse_problem("gemm f32 m=150 n=8 k=8").problem);
  CHECK(report.find("rule:    config override #3 at <test>:") != std::string::npos);
  CHECK(report.find("override #2 (<test>:") != std::string::npos);
  CHECK(report.find("kernel refused the problem (small shapes only") != std::string::npos);
  const std::string report2 = context->dispatcher().explain(parse_problem("gemm f32 m=2 n=8 k=8").problem);
  CHECK(report2.find("nosuch.kernel: no such kernel is loaded; rule skipped") != std::string::npos);
  // The rule decided: the candidates the heuristic would fall back to are still listed.
  const std::string report3 = context->dispatcher().explain(parse_problem("softmax f32 rows=1 cols=16").problem);
  CHECK(report3.find("fallback (the heuristic, if the rule above did not apply): cpu.softmax\n") != std::string::npos);
  CHECK(report3.find("  cpu.softmax (plugin priority") != std::string::npos);
}

TEST_CASE("an override naming a kernel of another op is skipped, never launched") {
  const auto context = shipped("[[dispatch.override]]\nop = \"gemm\"\nkernel = \"reference.softmax\"\n");
  CHECK(chosen(*context, "gemm f32 m=8 n=8 k=8") == test::preferred_small_gemm());
  const std::string report = context->dispatcher().explain(parse_problem("gemm f32 m=8 n=8 k=8").problem);
  CHECK(report.find("kernel computes softmax, not gemm; rule skipped") != std::string::npos);
}

TEST_CASE("on_miss = error: only overrides decide, a miss is ARB_ERR_UNSUPPORTED") {
  const auto context = shipped(R"(
[dispatch]
on_miss = "error"
[[dispatch.override]]
op = "softmax"
kernel = "cpu.softmax"
)");
  CHECK(chosen(*context, "softmax f16 rows=3 cols=5") == "cpu.softmax");
  CHECK(chosen(*context, "rmsnorm f16 rows=3 cols=5").find("dispatch.on_miss = \"error\"") != std::string::npos);
  try {
    context->dispatcher().select(parse_problem("rmsnorm f16 rows=3 cols=5").problem);
    FAIL("expected a failure");
  } catch (const Failure& e) {
    CHECK(e.status() == ARB_ERR_UNSUPPORTED);
    CHECK(std::string(e.what()).find("rmsnorm f16 rows=3 cols=5") != std::string::npos);
  }
}

TEST_CASE("no kernel for a device: a CUDA problem on a CPU-only build is unsupported, with reasons") {
  const auto context = shipped();
  const std::string report = context->dispatcher().explain(parse_problem("softmax f32 rows=1 cols=8 device=cuda").problem);
  CHECK(report.find("kernel:  none") != std::string::npos);
  CHECK(report.find("cpu.softmax (plugin priority 100, kernel priority 0): runs on cpu") != std::string::npos);
}

TEST_CASE("the selection cache remembers choices, a hit returns the same selection") {
  const auto context = shipped();
  Dispatcher& dispatcher = context->dispatcher();
  const size_t before = dispatcher.cached_selections();
  const arb_problem p = parse_problem("softmax f32 rows=4 cols=8").problem;
  const Selection& first = dispatcher.select(p);
  CHECK(dispatcher.cached_selections() == before + 1);
  const Selection& second = dispatcher.select(p);
  CHECK(&first == &second);
  CHECK(dispatcher.cached_selections() == before + 1);
}

TEST_CASE("selection cache: many keys, growth, every key found again") {
  SelectionCache<int> cache;
  std::vector<int> values(5000);
  std::vector<arb_problem> keys;
  for (int i = 0; i < 5000; ++i) {
    values[static_cast<size_t>(i)] = i;
    keys.push_back(parse_problem(fmt::format("gemm f32 m={} n={} k=3", 1 + i % 97, 1 + i / 97)).problem);
    const uint64_t h = problem_hash(keys.back());
    REQUIRE(cache.find(keys.back(), h) == nullptr);
    cache.insert(keys.back(), h, &values[static_cast<size_t>(i)]);
  }
  CHECK(cache.size() == 5000);
  for (int i = 0; i < 5000; ++i) {
    const int* v = cache.find(keys[static_cast<size_t>(i)], problem_hash(keys[static_cast<size_t>(i)]));
    REQUIRE(v != nullptr);
    CHECK(*v == i);
  }
  CHECK(cache.find(parse_problem("gemm f32 m=1 n=1 k=4").problem, problem_hash(parse_problem("gemm f32 m=1 n=1 k=4").problem)) == nullptr);

  // The same problems held as their call keys (the calls' fast path), hashed as such: the same
  // value, and the cache's copy of the problem, which is the problem byte for byte.
  SelectionCache<int> keyed;
  for (size_t i = 0; i < keys.size(); ++i)
    keyed.insert(keys[i], Dispatcher::hash(keys[i], gemm_op().problem_words()), &values[i]);
  const size_t words = call_key_words(ARB_OP_GEMM);
  for (int i = 0; i < 5000; i += 7) {
    const arb_problem& problem = keys[static_cast<size_t>(i)];
    CallKey key;
    REQUIRE(pack_call_key(problem, key));
    const auto hit = keyed.find(key, call_key_hash(key), words);
    REQUIRE(hit.value != nullptr);
    CHECK(*hit.value == i);
    CHECK(std::memcmp(hit.key, &problem, sizeof problem) == 0);
    key.word[2] += 1000;  // m: another problem
    CHECK(keyed.find(key, call_key_hash(key), words).value == nullptr);
  }
}

TEST_CASE("selection cache: problems that differ only in what the hash skips are told apart") {
  // The hash reads the op, dtype and sizes (kHashedProblemWords): these all share one hash, so
  // they share a neighbourhood of slots, and the compare alone tells them apart.
  const std::vector<std::string> texts = {
      "gemm f32 m=64 n=64 k=64",          "gemm f32 m=64 n=64 k=64 lda=80", "gemm f32 m=64 n=64 k=64 ldb=80",
      "gemm f32 m=64 n=64 k=64 ta=1",     "gemm f32 m=64 n=64 k=64 tb=1",   "gemm f32 m=64 n=64 k=64 act=relu",
      "gemm f32 m=64 n=64 k=64 beta=1",   "gemm f32 m=64 n=64 k=64 bias=1", "gemm f32 m=64 n=64 k=64 align=16",
      "gemm f32 m=64 n=64 k=64 device=cuda"};
  SelectionCache<size_t> cache;
  std::vector<size_t> values(texts.size());
  std::vector<arb_problem> keys;
  for (size_t i = 0; i < texts.size(); ++i) {
    keys.push_back(parse_problem(texts[i]).problem);
    CHECK_MESSAGE(problem_hash(keys[i]) == problem_hash(keys[0]), texts[i]);
    for (size_t j = 0; j < i; ++j) CHECK_MESSAGE(!same_problem(keys[i], keys[j]), texts[i] << " vs " << texts[j]);
    values[i] = i;
    REQUIRE(cache.find(keys[i], problem_hash(keys[i])) == nullptr);
    cache.insert(keys[i], problem_hash(keys[i]), &values[i]);
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    const size_t* v = cache.find(keys[i], problem_hash(keys[i]));
    REQUIRE(v != nullptr);
    CHECK_MESSAGE(*v == i, texts[i]);
  }
  // Attention's sizes are hashed: a decode loop's growing kv_len spreads over the table rather
  // than piling into one neighbourhood.
  CHECK(problem_hash(parse_problem("attention f32 q=1 kv=100 heads=8 dim=64").problem) !=
        problem_hash(parse_problem("attention f32 q=1 kv=101 heads=8 dim=64").problem));
}
