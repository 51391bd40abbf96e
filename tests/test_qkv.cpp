// The qkv op (the input of a Llama attention block, a composite op) end to end on the CPU: its
// problem text, the reference against the block written out here (both rope layouts, padded
// strides), the C call and its bad input, the gate against a gallery of cheating kernels
// (tests/fixtures/qkv_cheats.cpp), and the chain (chain.qkv): the application's own calls, bit
// for bit, shown by explain.
#include "common/failure.hpp"
#include "device/problem_buffers.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "problem/problem_text.hpp"
#include "test_support.hpp"
#include "verify/verifier.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace arbiter;
using arbiter::test::PublicContext;
using arbiter::test::Tensor;

namespace {

struct Shape {
  int64_t rows, hidden, heads, kv_heads, dim;
  int64_t out() const { return (heads + 2 * kv_heads) * dim; }
};

// y for packed f32 x [rows, hidden] and W [out, hidden], in double: rmsnorm, the projection,
// then q's and k's heads turned.
std::vector<double> block_by_definition(const Shape& s, const std::vector<float>& x, const std::vector<float>& norm,
                                        const std::vector<float>& w, const std::vector<int32_t>& positions, double theta,
                                        bool interleaved, double eps) {
  std::vector<double> y(static_cast<size_t>(s.rows * s.out()));
  for (int64_t r = 0; r < s.rows; ++r) {
    double sum_sq = 0.0;
    for (int64_t c = 0; c < s.hidden; ++c) sum_sq += double(x[r * s.hidden + c]) * x[r * s.hidden + c];
    const double scale = 1.0 / std::sqrt(sum_sq / double(s.hidden) + eps);
    double* row = y.data() + r * s.out();
    for (int64_t j = 0; j < s.out(); ++j) {
      double sum = 0.0;
      for (int64_t c = 0; c < s.hidden; ++c) sum += x[r * s.hidden + c] * scale * norm[c] * w[j * s.hidden + c];
      row[j] = sum;
    }
    const int64_t pairs = s.dim / 2;
    for (int64_t h = 0; h < s.heads + s.kv_heads; ++h)
      for (int64_t i = 0; i < pairs; ++i) {
        const double angle = positions[r] * std::pow(theta, -2.0 * double(i) / double(s.dim));
        double& a = row[h * s.dim + (interleaved ? 2 * i : i)];
        double& b = row[h * s.dim + (interleaved ? 2 * i + 1 : i + pairs)];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(angle) - b0 * std::sin(angle);
        b = b0 * std::cos(angle) + a0 * std::sin(angle);
      }
  }
  return y;
}

// One block's tensors, packed, f32.
struct Block {
  Shape s;
  std::vector<float> x, norm, w;
  std::vector<int32_t> positions;
  explicit Block(Shape shape)
      : s(shape), x(test::wave(s.rows * s.hidden, 0.37f, 1.5f)), norm(test::wave(s.hidden, 0.11f, 1.0f)),
        w(test::wave(s.out() * s.hidden, 0.013f, 0.25f)) {
    for (int64_t r = 0; r < s.rows; ++r) positions.push_back(static_cast<int32_t>(7 + 1000 * r));
  }
};

// arb_qkv's arguments on a block's tensors, y [rows, heads + 2 kv_heads, dim] filled with NaN.
struct QkvCall {
  explicit QkvCall(const Block& b)
      : y(static_cast<size_t>(b.s.rows * b.s.out()), NAN),
        x(const_cast<float*>(b.x.data()), {b.s.rows, b.s.hidden}),
        norm(const_cast<float*>(b.norm.data()), {b.s.hidden}),
        w(const_cast<float*>(b.w.data()), {b.s.out(), b.s.hidden}),
        out(y.data(), {b.s.rows, b.s.heads + 2 * b.s.kv_heads, b.s.dim}),
        positions(const_cast<int32_t*>(b.positions.data()), {b.s.rows}, DLDataType{kDLInt, 32, 1}) {
    args.x = &x.t;
    args.norm_weight = &norm.t;
    args.weight = &w.t;
    args.positions = &positions.t;
    args.y = &out.t;
    args.heads = b.s.heads;
    args.kv_heads = b.s.kv_heads;
  }
  std::vector<float> y;
  Tensor x, norm, w, out, positions;
  arb_qkv_args args = ARB_QKV_ARGS_INIT;
};

}  // namespace

TEST_CASE("qkv problems: keys round-trip, packed strides by default, errors name the field, cost") {
  for (const char* text : {"qkv bf16 rows=1 hidden=4096 heads=32 kvheads=8 dim=128",
                           "qkv f32 rows=3 hidden=7 heads=3 kvheads=1 dim=6 layout=interleaved theta=10000 eps=1e-5",
                           "qkv f16 rows=16 hidden=64 heads=4 kvheads=2 dim=16 ldx=80 ldw=72 ldy=130 maxpos=4096"}) {
    CAPTURE(text);
    const arb_problem p = parse_problem(text).problem;
    CHECK(same_problem(parse_problem(problem_key(p)).problem, p));
  }
  CHECK(problem_key(parse_problem("qkv f32 rows=2 hidden=8 heads=2 kvheads=1 dim=4").problem) ==
        "qkv f32 rows=2 hidden=8 heads=2 kvheads=1 dim=4 layout=half theta=500000 maxpos=8192 ldx=8 ldw=8 ldy=16 "
        "align=32 device=cpu");
  CHECK(parse_problem("qkv f32 rows=2 hidden=8 heads=2 dim=4").problem.kv_heads == 2);  // kvheads defaults to heads
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=2 dim=5").find("dim = 5 must be even") != std::string::npos);
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=0 dim=4").find("qkv sizes must be") != std::string::npos);
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=2 dim=4 ldy=10").find("ldy") != std::string::npos);
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=2 dim=4 ldw=7").find("ldw") != std::string::npos);
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=2 dim=4 theta=1").find("theta = 1 must be") != std::string::npos);
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=2 dim=4 maxpos=0").find("max_position = 0") != std::string::npos);
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=2 dim=4 layout=odd").find("expected half or interleaved") !=
        std::string::npos);
  CHECK(test::problem_text_error("qkv f32 rows=2 hidden=8 heads=2 dim=4 eps=-1").find("eps=-1 must be finite") != std::string::npos);
  // The projection: 2 rows hidden (heads + 2 kvheads) dim flops; W, x, y, the norm's weight and
  // the positions moved.
  CHECK(flop_count(parse_problem("qkv f32 rows=2 hidden=8 heads=2 kvheads=1 dim=4").problem) == 2.0 * 2 * 8 * 16);
  CHECK(bytes_moved(parse_problem("qkv bf16 rows=2 hidden=8 heads=2 kvheads=1 dim=4").problem) ==
        2.0 * (16 * 8 + 2 * (8 + 16) + 8) + 4.0 * 2);
}

TEST_CASE("the reference qkv matches the block written out: both layouts, padded strides") {
  Context& context = test::shipped_context();
  const KernelRecord* reference = context.registry().find("reference.qkv");
  REQUIRE(reference != nullptr);
  for (const char* layout : {"half", "interleaved"}) {
    const std::string text = fmt::format(
        "qkv f32 rows=3 hidden=20 heads=3 kvheads=2 dim=6 ldx=23 ldw=25 ldy=45 theta=10000 maxpos=64 eps=1e-5 layout={}",
        layout);
    CAPTURE(text);
    const ParsedProblem parsed = parse_problem(text);
    const arb_problem& p = parsed.problem;
    ProblemBuffers buffers(p, parsed.alpha, parsed.beta, parsed.eps);
    buffers.randomize(43, Distribution::normal);
    context.run_kernel(*reference, p, buffers.operands(), nullptr);
    const Shape s{p.rows, p.cols, p.heads, p.kv_heads, p.head_dim};
    auto packed = [&](const char* name, int64_t rows, int64_t cols) {
      std::vector<float> v(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = static_cast<float>(buffers.element(*buffers.find(name), r, c));
      return v;
    };
    std::vector<int32_t> positions(static_cast<size_t>(p.rows));
    std::memcpy(positions.data(), buffers.operands().positions, positions.size() * sizeof(int32_t));
    const auto expected = block_by_definition(s, packed("x", p.rows, p.cols), packed("weight", 1, p.cols),
                                              packed("b", s.out(), p.cols), positions, p.rope_theta,
                                              p.rope_layout == ARB_ROPE_INTERLEAVED, parsed.eps);
    for (int64_t r = 0; r < p.rows; ++r)
      for (int64_t j = 0; j < s.out(); ++j)
        CHECK(buffers.element(*buffers.find("y"), r, j) == doctest::Approx(expected[r * s.out() + j]).epsilon(1e-6));
  }
}

TEST_CASE("arb_qkv: the block's answer, q, k and v as views of y, and bad input a status and a message") {
  PublicContext pc;
  const Block b({2, 16, 4, 2, 8});
  const Shape& s = b.s;
  QkvCall call(b);
  std::vector<float>& y = call.y;
  const arb_qkv_args& a = call.args;
  REQUIRE_MESSAGE(arb_qkv(pc.ctx, &a, nullptr) == ARB_OK, arb_last_error());
  const auto expected = block_by_definition(s, b.x, b.norm, b.w, b.positions, a.theta, false, a.eps);
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(expected[i]).epsilon(1e-5).scale(1.0));

  CHECK_STATUS(arb_qkv(pc.ctx, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "arb_qkv: args is NULL");
  arb_qkv_args bad = a;
  bad.struct_size = 64;
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "struct_size = 64 is below the minimum");
  bad = a;
  bad.weight = nullptr;
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "weight is NULL");
  bad = a;
  bad.positions = nullptr;
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "positions is NULL");
  bad = a;
  bad.kv_heads = 0;
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "kv_heads (0) must be >= 1");
  bad = a;
  bad.kv_heads = 3;  // y's heads are 4 + 2 x 2
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "must be heads + 2 kv_heads = 10");
  {
    Tensor flat(y.data(), {s.rows, s.out()});
    bad = a;
    bad.y = &flat.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y must be [..., heads + 2 kv_heads, head_dim]");
  }
  {
    Tensor odd(y.data(), {s.rows, s.heads + 2 * s.kv_heads, 7});
    bad = a;
    bad.y = &odd.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "must be even");
  }
  {
    std::vector<float> wide(s.rows * s.out() * 2);  // heads apart: not views of one projection
    Tensor spread(wide.data(), {s.rows, s.heads + 2 * s.kv_heads, s.dim}, DLDataType{kDLFloat, 32, 1},
                  {s.out() * 2, 2 * s.dim, 1});
    bad = a;
    bad.y = &spread.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "the heads must lie side by side");
  }
  {
    Tensor fewer(const_cast<float*>(b.w.data()), {s.out() - 1, s.hidden});
    bad = a;
    bad.weight = &fewer.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "weight must be [64, 16], got [63, 16]");
  }
  {
    Tensor three(const_cast<float*>(b.w.data()), {1, s.out(), s.hidden});
    bad = a;
    bad.weight = &three.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "weight must be 2-D");
  }
  {
    Tensor as_float(const_cast<int32_t*>(b.positions.data()), {s.rows});
    bad = a;
    bad.positions = &as_float.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "positions must be int32");
  }
  {
    std::vector<int32_t> late = {7, 9000};  // max_position 8192
    Tensor beyond(late.data(), {s.rows}, DLDataType{kDLInt, 32, 1});
    bad = a;
    bad.positions = &beyond.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "positions[1] = 9000 is outside");
  }
  {
    Tensor onto_w(const_cast<float*>(b.w.data()), {s.rows, s.heads + 2 * s.kv_heads, s.dim});
    bad = a;
    bad.y = &onto_w.t;
    CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps weight in memory");
  }
  bad = a;
  bad.theta = 0.5;
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "theta = 0.5 must be a finite number above 1");
  bad = a;
  bad.layout = 7;
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "layout 7 is neither");
  bad = a;
  bad.eps = NAN;
  CHECK_STATUS(arb_qkv(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "eps must be finite and >= 0");
  {
    int stream_marker = 0;
    CHECK_STATUS(arb_qkv(pc.ctx, &a, &stream_marker), ARB_ERR_INVALID_ARGUMENT, "stream must be NULL");
  }
  {
    const std::vector<float> now = y;  // a refused call touched nothing
    bad = a;
    bad.theta = 0.5;
    CHECK(arb_qkv(pc.ctx, &bad, nullptr) == ARB_ERR_INVALID_ARGUMENT);
    CHECK(std::memcmp(now.data(), y.data(), y.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the gate rejects the qkv cheaters for accuracy, and passes the honest kernels and the chain's rounding") {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("qkv_cheats"));
  const auto context = test::make_context(test::config_loading(files));
  for (const char* cheated : {"qkv f32 rows=3 hidden=48 heads=4 kvheads=2 dim=16 layout=interleaved",
                              "qkv bf16 rows=4 hidden=64 heads=4 kvheads=2 dim=32 layout=interleaved"})
    for (const char* name : {"no_norm", "k_unturned", "v_turned", "layout_ignored"}) {
      CAPTURE(cheated);
      CAPTURE(name);
      const KernelRecord* record = context->registry().find(std::string("qkv_cheats.") + name);
      REQUIRE(record != nullptr);
      const Verdict v = context->gate().verdict(*record, parse_problem(cheated).problem);
      CAPTURE(v.detail);
      CHECK_FALSE(v.passed);
      CHECK(std::count(v.failed_checks.begin(), v.failed_checks.end(), "accuracy") == 1);
    }
  for (const char* honest : {"qkv f32 rows=3 hidden=48 heads=4 kvheads=2 dim=16", "qkv bf16 rows=1 hidden=256 heads=8 kvheads=2 dim=32",
                             "qkv f16 rows=5 hidden=64 heads=3 kvheads=1 dim=6 layout=interleaved",
                             "qkv bf16 rows=16 hidden=128 heads=4 kvheads=4 dim=64"}) {
    CAPTURE(honest);
    for (const char* kernel : {"chain.qkv", "reference.qkv", "qkv_cheats.chain_rounded", "cpu.qkv_fused",
                               "cpu.qkv_bf16_avx512"}) {
      CAPTURE(kernel);
      const KernelRecord* record = context->registry().find(kernel);
      if (record == nullptr) continue;  // a fused kernel this build does not have
      if (!kernel_supports(*record, parse_problem(honest).problem, nullptr)) continue;
      const Verdict v = context->gate().verdict(*record, parse_problem(honest).problem);
      CAPTURE(v.detail);
      CHECK(v.passed);
    }
  }
}

TEST_CASE("chain.qkv is the application's own chain of calls, bit for bit, and explain lists them") {
  const Block b({3, 40, 4, 2, 8});
  const Shape& s = b.s;
  // Dispatch forced onto the chain; its steps (and the hand-made calls) go where dispatch sends them.
  PublicContext pc("[[dispatch.override]]\nop = \"qkv\"\nkernel = \"chain.qkv\"\n");
  QkvCall call(b);
  const std::vector<float>& y = call.y;
  std::vector<float> expected(y.size(), NAN), normed(s.rows * s.hidden);
  Tensor &tx = call.x, &tn = call.norm, &tw = call.w, &tp = call.positions;
  arb_qkv_args& a = call.args;
  a.layout = ARB_ROPE_INTERLEAVED;
  a.theta = 10000.0;
  REQUIRE_MESSAGE(arb_qkv(pc.ctx, &a, nullptr) == ARB_OK, arb_last_error());

  // The same four steps by hand: rmsnorm, one gemm on the fused weight, rope on q's heads and on k's.
  Tensor t_normed(normed.data(), {s.rows, s.hidden}), t_projected(expected.data(), {s.rows, s.out()});
  arb_rmsnorm_args norm = ARB_RMSNORM_ARGS_INIT;
  norm.x = &tx.t;
  norm.weight = &tn.t;
  norm.y = &t_normed.t;
  norm.eps = a.eps;
  REQUIRE(arb_rmsnorm(pc.ctx, &norm, nullptr) == ARB_OK);
  arb_gemm_args project = ARB_GEMM_ARGS_INIT;
  project.a = &t_normed.t;
  project.b = &tw.t;
  project.trans_b = 1;
  project.d = &t_projected.t;
  REQUIRE(arb_gemm(pc.ctx, &project, nullptr) == ARB_OK);
  for (const auto& [first, heads] : {std::pair{int64_t{0}, s.heads}, std::pair{s.heads, s.kv_heads}}) {
    Tensor part(expected.data() + first * s.dim, {s.rows, heads, s.dim}, DLDataType{kDLFloat, 32, 1}, {s.out(), s.dim, 1});
    arb_rope_args turn = ARB_ROPE_ARGS_INIT;
    turn.x = &part.t;
    turn.positions = &tp.t;
    turn.theta = a.theta;
    turn.max_position = a.max_position;
    turn.layout = a.layout;
    REQUIRE_MESSAGE(arb_rope(pc.ctx, &turn, nullptr) == ARB_OK, arb_last_error());
  }
  CHECK(std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)) == 0);
  const auto reference = block_by_definition(s, b.x, b.norm, b.w, b.positions, a.theta, true, a.eps);
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(reference[i]).epsilon(1e-5).scale(1.0));

  // explain names the chain's calls and the kernel each would get.
  size_t length = 0;
  arb_explain(pc.ctx, ARB_OP_QKV, &a, nullptr, 0, &length);
  std::string text(length, '\0');
  REQUIRE(arb_explain(pc.ctx, ARB_OP_QKV, &a, text.data(), text.size(), &length) == ARB_OK);
  CAPTURE(text);
  CHECK(text.find("kernel:  chain.qkv") != std::string::npos);
  CHECK(text.find("the chain (chain.qkv) runs 4 calls, each dispatched as its own:") != std::string::npos);
  CHECK(text.find("1. rmsnorm f32 rows=3 cols=40 residual=0 ldx=40 ldy=40") != std::string::npos);
  CHECK(text.find("2. gemm f32 m=3 n=64 k=40 ta=0 tb=1") != std::string::npos);
  CHECK(text.find("3. rope f32 tokens=3 heads=4 dim=8 layout=interleaved theta=10000 maxpos=8192 ldhead=8 ldtoken=64") !=
        std::string::npos);
  CHECK(text.find("4. rope f32 tokens=3 heads=2 dim=8 layout=interleaved") != std::string::npos);
}
