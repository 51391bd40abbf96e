// The call key (core/problem/ops/call_key.hpp): lossless on its domain (unpacking a packed problem
// gives the problem back, so distinct problems have distinct keys), refused outside it, and
// zero past its op's words.
#include "dispatch/dispatcher.hpp"
#include "dispatch/selection_cache.hpp"
#include "problem/ops/call_key.hpp"
#include "problem/op_table.hpp"
#include "problem/problem_text.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace arbiter;

namespace {

bool round_trips(const arb_problem& p, CallKey& key) {
  if (!pack_call_key(p, key)) return false;
  const arb_problem back = unpack_call_key(key);
  return std::memcmp(&back, &p, sizeof p) == 0;
}

}  // namespace

TEST_CASE("call key: every problem of its domain packs and unpacks to itself") {
  const std::vector<std::string> texts = {
      "gemm f32 m=1 n=1 k=1",
      "gemm bf16 m=4096 n=14336 k=4096 lda=4100 ldb=14400 ldd=14336",
      "gemm f16 m=3 n=5 k=7 ta=1 tb=1 act=silu beta=1 bias=1 align=16 device=cuda:3",
      "gemm f32 m=8 n=8 k=8 beta=1 inplace=1 act=gelu align=4",
      "gemm f32 m=1073741824 n=1 k=1",
      "rmsnorm bf16 rows=16 cols=4096 ldx=4100 ldy=4096 residual=1 ldr=4104 align=8",
      "rmsnorm f32 rows=1 cols=8",
      "softmax f16 rows=7 cols=33 ldx=40 align=2 device=cuda",
      "swiglu bf16 rows=4 cols=14336 ldgate=28672 ldup=28672 ldy=14336",
  };
  std::vector<CallKey> keys;
  for (const std::string& text : texts) {
    INFO(text);
    const arb_problem p = parse_problem(text).problem;
    CallKey key;
    REQUIRE(round_trips(p, key));
    for (size_t i = call_key_words(static_cast<arb_op>(p.op)); i < kCallKeyWords; ++i) CHECK(key.word[i] == 0);
    for (const CallKey& other : keys) CHECK(std::memcmp(&other, &key, sizeof key) != 0);
    keys.push_back(key);
  }
}

TEST_CASE("call key: each field of a gemm problem changes the key") {
  const arb_problem base = parse_problem("gemm f32 m=64 n=64 k=64").problem;
  CallKey base_key;
  REQUIRE(pack_call_key(base, base_key));
  const auto differs = [&](auto&& change) {
    arb_problem p = base;
    change(p);
    CallKey key;
    return round_trips(p, key) && !same_call_key(key, base_key, call_key_words(ARB_OP_GEMM));
  };
  CHECK(differs([](arb_problem& p) { p.m = 65; }));
  CHECK(differs([](arb_problem& p) { p.n = 65; }));
  CHECK(differs([](arb_problem& p) { p.k = 65; }));
  CHECK(differs([](arb_problem& p) { p.lda = 80; }));
  CHECK(differs([](arb_problem& p) { p.ldb = 80; }));
  CHECK(differs([](arb_problem& p) { p.ldc = 80; }));
  CHECK(differs([](arb_problem& p) { p.ldd = 80; }));
  CHECK(differs([](arb_problem& p) { p.trans_a = 1; }));
  CHECK(differs([](arb_problem& p) { p.trans_b = 1; }));
  CHECK(differs([](arb_problem& p) { p.activation = ARB_ACT_RELU; }));
  CHECK(differs([](arb_problem& p) { p.has_c = 1; }));
  CHECK(differs([](arb_problem& p) { p.c_is_d = 1; }));
  CHECK(differs([](arb_problem& p) { p.has_bias = 1; }));
  CHECK(differs([](arb_problem& p) { p.alignment = 16; }));
  CHECK(differs([](arb_problem& p) { p.dtype = ARB_DTYPE_BF16; }));
  CHECK(differs([](arb_problem& p) { p.device_type = kDLCUDA; }));
  CHECK(differs([](arb_problem& p) { p.device_id = 1; }));
}

TEST_CASE("call key: problems outside its domain have none, and the cache hashes them as problems") {
  // A problem from text with one field changed: no key.
  const auto refused = [](const char* text, auto&& change) {
    arb_problem p = parse_problem(text).problem;
    change(p);
    CallKey key;
    return !pack_call_key(p, key);
  };
  const char* gemm = "gemm f32 m=8 n=8 k=8";
  CHECK(refused(gemm, [](arb_problem& p) { p.batch = 2; }));
  CHECK(refused(gemm, [](arb_problem& p) { p.m = int64_t{1} << 32; }));
  CHECK(refused(gemm, [](arb_problem& p) { p.lda = -1; }));
  CHECK(refused(gemm, [](arb_problem& p) { p.trans_a = 2; }));
  CHECK(refused(gemm, [](arb_problem& p) { p.flags = 1; }));
  CHECK(refused(gemm, [](arb_problem& p) { p.alignment = 512; }));
  CHECK(refused(gemm, [](arb_problem& p) { p.dtype = 9; }));
  CHECK(refused("softmax f32 rows=2 cols=8", [](arb_problem& p) { p.has_residual = 1; }));
  CHECK(refused("rmsnorm f32 rows=2 cols=8", [](arb_problem& p) { p.reserved = 1; }));
  for (const char* text : {"rope f32 tokens=2 heads=2 dim=8", "mlp f32 rows=1 hidden=8 inter=8"}) {
    INFO(text);
    const arb_problem other = parse_problem(text).problem;
    CHECK(refused(text, [](arb_problem&) {}));
    const Op* op = find_op(other.op);
    REQUIRE(op != nullptr);
    CHECK(Dispatcher::hash(other, op->problem_words()) == problem_hash(other, op->problem_words()));
  }
}

TEST_CASE("call key: problems of one size share a hash and the cache's compare tells them apart") {
  // The key's hash reads its sizes alone: these share one, so they share a neighbourhood of
  // slots, and each is found again by its key (the calls' fast path) and by its problem.
  const std::vector<std::string> texts = {
      "gemm f32 m=1 n=4096 k=4096",        "gemm f32 m=1 n=4096 k=14336", "gemm bf16 m=1 n=4096 k=4096",
      "gemm f32 m=1 n=4096 k=4096 tb=1",   "gemm f32 m=1 n=4096 k=4096 bias=1",
      "gemm f32 m=1 n=4096 k=4096 beta=1", "gemm f32 m=1 n=4096 k=4096 beta=1 inplace=1",
      "gemm f32 m=1 n=4096 k=4096 align=16", "gemm f32 m=1 n=4096 k=4096 device=cuda:1",
      "rmsnorm f32 rows=1 cols=4096",      "rmsnorm f32 rows=1 cols=4096 residual=1", "softmax f32 rows=1 cols=4096",
      "swiglu f32 rows=1 cols=4096"};
  SelectionCache<size_t> cache;
  std::vector<size_t> values(texts.size());
  std::vector<arb_problem> problems;
  std::vector<CallKey> keys;
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(texts[i]);
    problems.push_back(parse_problem(texts[i]).problem);
    keys.emplace_back();
    REQUIRE(pack_call_key(problems[i], keys[i]));
    const ProblemWords words = find_op(problems[i].op)->problem_words();
    CHECK(Dispatcher::hash(problems[i], words) == call_key_hash(keys[0]));
    values[i] = i;
    cache.insert(problems[i], Dispatcher::hash(problems[i], words), &values[i]);
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(texts[i]);
    const auto hit = cache.find(keys[i], call_key_hash(keys[i]), call_key_words(static_cast<arb_op>(problems[i].op)));
    REQUIRE(hit.value != nullptr);
    CHECK(*hit.value == i);
    CHECK(std::memcmp(hit.key, &problems[i], sizeof problems[i]) == 0);
    const ProblemWords words = find_op(problems[i].op)->problem_words();
    const size_t* found = cache.find(problems[i], Dispatcher::hash(problems[i], words), words);
    REQUIRE(found != nullptr);
    CHECK(*found == i);
  }
}
