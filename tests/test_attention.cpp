// The attention op end to end on the CPU: its problem text, the reference against the formula
// written out here, cpu.attention against the reference (dtypes, grouped-query heads, causal
// decode and prefill, BSHD, BHSD and fused-QKV layouts), the C call and its bad input, and the
// gate against a gallery of cheating kernels (tests/fixtures/attention_cheats.cpp).
#include "common/failure.hpp"
#include "device/problem_buffers.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "problem/problem_text.hpp"
#include "test_support.hpp"
#include "verify/accuracy.hpp"
#include "verify/verifier.hpp"

#include <arbiter/float16.hpp>
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

using namespace arbiter;
using arbiter::test::PublicContext;
using arbiter::test::Tensor;

namespace {

// o from q, k and v by the definition, in double, for a problem in BSHD or any strides.
std::vector<double> attention_by_definition(const arb_problem& p, const ProblemBuffers& in, double scale) {
  const auto& q = *in.find("q");
  const auto& k = *in.find("k");
  const auto& v = *in.find("v");
  std::vector<double> out(static_cast<size_t>(p.batch * p.q_len * p.heads * p.cols));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < p.q_len; ++i) {
        const int64_t g = h / (p.heads / p.kv_heads);
        std::vector<double> w(static_cast<size_t>(p.kv_len), 0.0);
        double top = -INFINITY, total = 0.0;
        for (int64_t j = 0; j < p.kv_len; ++j) {
          if (p.causal && j > i + p.kv_len - p.q_len) continue;
          double s = 0.0;
          for (int64_t d = 0; d < p.cols; ++d)
            s += in.element(q, 0, b * p.ld_q_batch + i * p.ld_q_token + h * p.ld_q_head + d) *
                 in.element(k, 0, b * p.ld_k_batch + j * p.ld_k_token + g * p.ld_k_head + d);
          w[j] = scale * s;
          top = std::max(top, w[j]);
        }
        for (int64_t j = 0; j < p.kv_len; ++j) {
          if (p.causal && j > i + p.kv_len - p.q_len) {
            w[j] = 0.0;
            continue;
          }
          total += w[j] = std::exp(w[j] - top);
        }
        for (int64_t d = 0; d < p.cols; ++d) {
          double sum = 0.0;
          for (int64_t j = 0; j < p.kv_len; ++j)
            sum += w[j] * in.element(v, 0, b * p.ld_v_batch + j * p.ld_v_token + g * p.ld_v_head + d);
          out[static_cast<size_t>(((b * p.q_len + i) * p.heads + h) * p.cols + d)] = sum / total;
        }
      }
  return out;
}

}  // namespace

TEST_CASE("attention problems: keys round-trip, defaults are packed BSHD, errors name the field") {
  for (const char* text : {"attention bf16 batch=1 q=1 kv=4096 heads=32 kvheads=8 dim=128 causal=1",
                           "attention f32 batch=2 q=7 kv=7 heads=4 kvheads=4 dim=64",
                           "attention f16 batch=3 q=5 kv=9 heads=6 kvheads=2 dim=80 ldq=2000,300,50 ldk=1000,100,20 "
                           "ldv=1000,100,30 ldo=30000,1000,100"}) {
    CAPTURE(text);
    const arb_problem p = parse_problem(text).problem;
    CHECK(same_problem(parse_problem(problem_key(p)).problem, p));
  }
  CHECK(problem_key(parse_problem("attention f32 q=1 kv=16 heads=4 kvheads=2 dim=8").problem) ==
        "attention f32 batch=1 q=1 kv=16 heads=4 kvheads=2 dim=8 causal=0 ldq=0,0,8 ldk=0,16,8 ldv=0,16,8 ldo=0,0,8 "
        "align=32 device=cpu");
  // The scale defaults to 1 / sqrt(head_dim); scale= sets it.
  CHECK(parse_problem("attention f32 q=1 kv=16 heads=4 dim=64").alpha == doctest::Approx(0.125));
  CHECK(parse_problem("attention f32 q=1 kv=16 heads=4 dim=64 scale=0.5").alpha == 0.5f);
  CHECK(parse_problem("attention f32 q=1 kv=16 heads=4 dim=64 scale=0").alpha == doctest::Approx(0.125));  // as in the C call
  CHECK(test::problem_text_error("attention f32 q=1 kv=16 heads=4 dim=64 scale=inf").find("must be finite") != std::string::npos);
  CHECK(test::problem_text_error("attention f32 q=1 kv=16 heads=6 kvheads=4 dim=8").find("heads = 6 is not a multiple of kv_heads = 4") !=
        std::string::npos);
  CHECK(test::problem_text_error("attention f32 q=8 kv=4 heads=2 dim=8 causal=1").find("kv_len = 4 below q_len = 8") !=
        std::string::npos);
  CHECK(test::problem_text_error("attention f32 q=1 kv=4 heads=2 dim=1024").find("head_dim = 1024 is above 512") != std::string::npos);
  CHECK(test::problem_text_error("attention f32 q=1 kv=4 heads=2 dim=8 ldq=1,2").find("expected 3 comma-separated integers") !=
        std::string::npos);
  CHECK(test::problem_text_error("attention f32 q=2 kv=4 heads=2 dim=8 ldo=0,4,8").find("put two of its elements at one address") !=
        std::string::npos);
  CHECK(test::problem_text_error("attention f32 q=2 kv=4 heads=2 dim=8 ldk=0,-16,8").find("negative stride") != std::string::npos);
  CHECK(test::problem_text_error("attention f32 q=2 kv=4 heads=2 dim=8 ldq=0,4611686018427387904,8").find("span more memory") !=
        std::string::npos);
  CHECK(test::problem_text_error("attention f32 kv=4 heads=2 dim=8").find("'q='") != std::string::npos);
  // BHSD o (heads outermost) does not overlap itself: accepted.
  CHECK(test::problem_text_error("attention f32 q=3 kv=4 heads=2 dim=8 ldo=0,8,24") == "");
  // The work: two products per visible query-key pair and head_dim; causal counts the visible ones.
  CHECK(flop_count(parse_problem("attention f32 q=4 kv=10 heads=2 dim=8").problem) == 4.0 * 2 * 4 * 10 * 8);
  CHECK(flop_count(parse_problem("attention f32 q=4 kv=10 heads=2 dim=8 causal=1").problem) ==
        4.0 * 2 * (4 * 6 + 4 * 5 / 2) * 8);
  CHECK(bytes_moved(parse_problem("attention bf16 q=4 kv=10 heads=4 kvheads=2 dim=8").problem) ==
        2.0 * (2 * 4 * 4 + 2 * 10 * 2) * 8);
}

TEST_CASE("the reference attention matches the definition, GQA and causal, odd strides") {
  Context& context = test::shipped_context();
  for (const char* text : {"attention f32 batch=2 q=3 kv=5 heads=4 kvheads=2 dim=6 causal=1",
                           "attention f32 batch=1 q=4 kv=4 heads=3 kvheads=1 dim=5 ldq=0,7,31 ldk=0,9,1 ldo=0,40,10",
                           "attention f32 batch=2 q=1 kv=9 heads=2 kvheads=2 dim=4 scale=1.5"}) {
    CAPTURE(text);
    const ParsedProblem parsed = parse_problem(text);
    const arb_problem& p = parsed.problem;
    ProblemBuffers buffers(p, parsed.alpha, 0, 0);
    buffers.randomize(19);
    const ProblemBuffers inputs = buffers;
    context.run_kernel(*context.registry().find("reference.attention"), p, buffers.operands(), nullptr);
    const std::vector<double> want = attention_by_definition(p, inputs, parsed.alpha);
    const auto& o = *buffers.find("o");
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.heads; ++h)
          for (int64_t d = 0; d < p.cols; ++d)
            CHECK(buffers.element(o, 0, b * p.ld_o_batch + i * p.ld_o_token + h * p.ld_o_head + d) ==
                  doctest::Approx(want[static_cast<size_t>(((b * p.q_len + i) * p.heads + h) * p.cols + d)]).epsilon(1e-6));
  }
}

namespace {

// Each CPU kernel on every problem it takes (attention_bf16_avx512: bf16 on a CPU with
// AVX512-BF16; said skipped elsewhere).
void check_cpu_kernel_against_reference(const char* name, const char* example) {
  CAPTURE(name);
  Context& context = test::shipped_context();
  const KernelRecord* kernel = context.registry().find(name);
  REQUIRE(kernel != nullptr);
  std::string why;
  if (!kernel_supports(*kernel, parse_problem(example).problem, &why)) {
    MESSAGE("skipped: ", name, " cannot run here: ", why);
    return;
  }
  int checked = 0;
  struct Shape {
    int64_t batch, q, kv, heads, kv_heads, dim;
  };
  const std::vector<Shape> shapes = {{1, 1, 1, 1, 1, 8},    {1, 1, 300, 8, 2, 64}, {2, 3, 67, 4, 1, 128},
                                     {1, 17, 17, 2, 2, 40}, {1, 5, 130, 6, 3, 7},  {2, 20, 33, 2, 1, 16},
                                     {1, 3, 70, 4, 2, 200}, {1, 2, 40, 2, 1, 256}};
  uint64_t index = 0;
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const Shape& s : shapes)
      for (int layout = 0; layout < 3; ++layout, ++index) {
        const int causal = static_cast<int>(index % 2);
        std::string text = fmt::format("attention {} batch={} q={} kv={} heads={} kvheads={} dim={} causal={} scale={}",
                                       dtype, s.batch, s.q, s.kv, s.heads, s.kv_heads, s.dim, causal, 0.1 + 0.05 * (index % 5));
        const int64_t qkv = (s.heads + 2 * s.kv_heads) * s.dim;  // one token of a fused QKV projection
        if (layout == 1)  // BHSD, padded: heads outside tokens
          text += fmt::format(" ldq={},{},{} ldk={},{},{} ldv={},{},{} ldo={},{},{}", s.heads * s.q * (s.dim + 3),
                              s.dim + 3, s.q * (s.dim + 3), s.kv_heads * s.kv * (s.dim + 1), s.dim + 1, s.kv * (s.dim + 1),
                              s.kv_heads * s.kv * s.dim, s.dim, s.kv * s.dim, s.heads * s.q * s.dim, s.dim, s.q * s.dim);
        if (layout == 2)  // q, k and v inside one fused buffer's rows (kept apart here), o padded
          text += fmt::format(" ldq={},{},{} ldk={},{},{} ldv={},{},{} ldo={},{},{}", s.q * qkv, qkv, s.dim, s.kv * qkv, qkv,
                              s.dim, s.kv * qkv, qkv, s.dim, s.q * s.heads * (s.dim + 5), s.heads * (s.dim + 5), s.dim + 5);
        CAPTURE(text);
        const ParsedProblem parsed = parse_problem(text);
        if (!kernel_supports(*kernel, parsed.problem, nullptr)) continue;  // another dtype
        ++checked;
        ProblemBuffers buffers(parsed.problem, parsed.alpha, 0, 0);
        buffers.randomize(700 + index, input_draw(index % 2 ? Distribution::normal : Distribution::uniform), OutputFill::nan);
        ProblemBuffers expected = buffers;
        const ProblemBuffers before = buffers;
        context.run_kernel(*kernel, parsed.problem, buffers.operands(), nullptr);
        context.run_kernel(*context.registry().find("reference.attention"), parsed.problem, expected.operands(), nullptr);
        const Comparison c = compare_outputs(buffers, expected);
        CHECK(c.specials_match);  // o's gaps (NaN) left alone, every element written
        CHECK(c.finite);
        CHECK_MESSAGE(c.error <= tolerance_for(*kernel, parsed.problem), "relative error ", c.error);
        for (const char* input : {"q", "k", "v"})
          CHECK(std::memcmp(buffers.find(input)->buffer.data(), before.find(input)->buffer.data(),
                            before.find(input)->buffer.size()) == 0);
      }
  CHECK(checked >= 24);  // every shape and layout of each dtype it takes
}

}  // namespace

TEST_CASE("cpu.attention matches the reference: dtypes, GQA, causal decode and prefill, BSHD, BHSD and fused QKV") {
  check_cpu_kernel_against_reference("cpu.attention", "attention f32 q=1 kv=4 heads=1 dim=8");
}

TEST_CASE("cpu.attention_bf16_avx512 matches the reference: GQA, causal decode and prefill, head_dim 7 to 256, layouts") {
  check_cpu_kernel_against_reference("cpu.attention_bf16_avx512", "attention bf16 q=1 kv=4 heads=1 dim=8");
}

TEST_CASE("arb_attention: a decode step against a cache, GQA, and bad input with a status and a message") {
  PublicContext pc;
  // One sequence: 2 queries of 4 heads against 6 keys of 2 key/value heads, head_dim 8, causal.
  const int64_t q_len = 2, kv_len = 6, heads = 4, kv_heads = 2, dim = 8;
  std::vector<float> q(q_len * heads * dim), k(kv_len * kv_heads * dim), v(k.size()), o(q.size(), NAN);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::cos(0.21f * static_cast<float>(i));
    v[i] = 0.05f * static_cast<float>(i) - 1.0f;
  }
  Tensor tq(q.data(), {1, q_len, heads, dim}), tk(k.data(), {1, kv_len, kv_heads, dim}), tv(v.data(), {1, kv_len, kv_heads, dim}),
      to(o.data(), {1, q_len, heads, dim});
  arb_attention_args a = ARB_ATTENTION_ARGS_INIT;
  a.q = &tq.t;
  a.k = &tk.t;
  a.v = &tv.t;
  a.o = &to.t;
  a.causal = 1;
  REQUIRE_MESSAGE(arb_attention(pc.ctx, &a, nullptr) == ARB_OK, arb_last_error());
  // Query 0 sees keys 0..4, query 1 all 6; head h reads key/value head h / 2; scale 1/sqrt(8).
  for (int64_t i = 0; i < q_len; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / 2, seen = i + kv_len - q_len + 1;
      std::vector<double> w(static_cast<size_t>(seen));
      double top = -INFINITY, total = 0.0;
      for (int64_t j = 0; j < seen; ++j) {
        double s = 0.0;
        for (int64_t d = 0; d < dim; ++d) s += double(q[(i * heads + h) * dim + d]) * k[(j * kv_heads + g) * dim + d];
        w[j] = s / std::sqrt(8.0);
        top = std::max(top, w[j]);
      }
      for (double& x : w) total += x = std::exp(x - top);
      for (int64_t d = 0; d < dim; ++d) {
        double sum = 0.0;
        for (int64_t j = 0; j < seen; ++j) sum += w[j] * v[(j * kv_heads + g) * dim + d];
        CHECK(o[(i * heads + h) * dim + d] == doctest::Approx(sum / total).epsilon(1e-5));
      }
    }

  CHECK_STATUS(arb_attention(pc.ctx, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "arb_attention: args is NULL");
  arb_attention_args bad = a;
  bad.struct_size = 40;
  CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "struct_size = 40 is below the minimum 48");
  bad = a;
  bad.v = nullptr;
  CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "v is NULL");
  {
    Tensor three(q.data(), {q_len, heads, dim});
    bad = a;
    bad.q = &three.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "q must be 4-D");
  }
  {
    Tensor other_dim(k.data(), {1, kv_len, kv_heads * 2, dim / 2});
    bad = a;
    bad.k = &other_dim.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "with q's batch (1) and head_dim (8)");
  }
  {
    Tensor three_heads(k.data(), {1, 4, 3, dim});
    Tensor three_heads_v(v.data(), {1, 4, 3, dim});
    bad = a;
    bad.k = &three_heads.t;
    bad.v = &three_heads_v.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "heads = 4 is not a multiple of kv_heads = 3");
  }
  {
    Tensor shorter_v(v.data(), {1, kv_len - 1, kv_heads, dim});
    bad = a;
    bad.v = &shorter_v.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "v must have the shape of k");
  }
  {
    Tensor half(k.data(), {1, kv_len, kv_heads, dim}, DLDataType{kDLFloat, 16, 1});
    bad = a;
    bad.k = &half.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "k has dtype f16, but the first operand has f32");
  }
  {
    Tensor strided_dim(q.data(), {1, q_len, heads, dim / 2}, DLDataType{kDLFloat, 32, 1}, {64, 32, 8, 2});
    Tensor o_half(o.data(), {1, q_len, heads, dim / 2});
    Tensor k_half(k.data(), {1, kv_len, kv_heads, dim / 2}), v_half(v.data(), {1, kv_len, kv_heads, dim / 2});
    bad = a;
    bad.q = &strided_dim.t;
    bad.k = &k_half.t;
    bad.v = &v_half.t;
    bad.o = &o_half.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "the last dimension (head_dim) must be contiguous");
  }
  {
    Tensor negative(k.data() + 40, {1, kv_len, kv_heads, dim}, DLDataType{kDLFloat, 32, 1}, {0, -8, 8, 1});
    bad = a;
    bad.k = &negative.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "stride -8 of dimension 1 is negative");
  }
  {
    Tensor self_overlap(o.data(), {1, q_len, heads, dim}, DLDataType{kDLFloat, 32, 1}, {0, 8, 4, 1});
    bad = a;
    bad.o = &self_overlap.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "put two of its elements at one address");
  }
  {
    Tensor onto_v(v.data(), {1, q_len, heads, dim});
    bad = a;
    bad.o = &onto_v.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "o overlaps v in memory");
  }
  {
    // q, k and v inside one buffer (a fused QKV output): inputs may overlap one another.
    Tensor k_in_q(q.data(), {1, q_len, kv_heads, dim}, DLDataType{kDLFloat, 32, 1}, {0, heads * dim, dim, 1});
    Tensor v_in_q(q.data() + dim, {1, q_len, kv_heads, dim}, DLDataType{kDLFloat, 32, 1}, {0, heads * dim, dim, 1});
    bad = a;
    bad.k = &k_in_q.t;
    bad.v = &v_in_q.t;
    CHECK(arb_attention(pc.ctx, &bad, nullptr) == ARB_OK);
  }
  bad = a;
  bad.causal = 2;
  CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "causal must be 0 or 1, got 2");
  bad = a;
  bad.scale = INFINITY;
  CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "scale must be finite");
  {
    // Causal with more queries than keys: the first would see none.
    Tensor short_k(k.data(), {1, 1, kv_heads, dim}), short_v(v.data(), {1, 1, kv_heads, dim});
    bad = a;
    bad.k = &short_k.t;
    bad.v = &short_v.t;
    CHECK_STATUS(arb_attention(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "kv_len = 1 below q_len = 2");
  }
  {
    int stream_marker = 0;
    CHECK_STATUS(arb_attention(pc.ctx, &a, &stream_marker), ARB_ERR_INVALID_ARGUMENT, "stream must be NULL");
  }
  {
    const std::vector<float> now = o;  // a refused call touched nothing
    bad = a;
    bad.causal = 2;
    CHECK(arb_attention(pc.ctx, &bad, nullptr) == ARB_ERR_INVALID_ARGUMENT);
    CHECK(std::memcmp(now.data(), o.data(), o.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the gate rejects the attention cheaters, for the right reason, and passes the CPU kernels") {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("attention_cheats"));
  const auto context = test::make_context(test::config_loading(files));
  // Causal prefill of 3 queries against 40 keys, two query heads a key/value head.
  const char* problem = "attention f32 batch=2 q=3 kv=40 heads=4 kvheads=2 dim=16 causal=1";
  for (const char* name : {"no_max", "mask_from_start", "heads_modulo", "packed_layout", "fixed_scale", "clears_gaps"}) {
    CAPTURE(name);
    const KernelRecord* record = context->registry().find(std::string("attention_cheats.") + name);
    REQUIRE(record != nullptr);
    const Verdict v = context->gate().verdict(*record, parse_problem(problem).problem);
    CAPTURE(v.detail);
    CHECK_FALSE(v.passed);
    CHECK(std::count(v.failed_checks.begin(), v.failed_checks.end(), "accuracy") == 1);
  }
  for (const char* honest : {problem, "attention bf16 batch=1 q=1 kv=300 heads=8 kvheads=2 dim=128 causal=1",
                             "attention f16 batch=2 q=5 kv=9 heads=2 dim=64"}) {
    CAPTURE(honest);
    for (const char* kernel : {"cpu.attention", "cpu.attention_bf16_avx512", "reference.attention"}) {
      CAPTURE(kernel);
      const KernelRecord* record = context->registry().find(kernel);
      REQUIRE(record != nullptr);
      if (!kernel_supports(*record, parse_problem(honest).problem, nullptr)) continue;  // a dtype or CPU it does not take
      const Verdict v = context->gate().verdict(*record, parse_problem(honest).problem);
      CAPTURE(v.detail);
      CHECK(v.passed);
    }
  }
}
