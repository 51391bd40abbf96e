// The mlp op (the Llama MLP block, a composite op) end to end on the CPU: its problem text, the
// reference against the block written out here, cpu.mlp_fused against the reference (dtypes,
// decode and small batches, padded strides), the C call (fused and separate gate/up weights)
// and its bad input, plans of the block (runs equal to the call, refusals), the gate against a
// gallery of cheating kernels (tests/fixtures/mlp_cheats.cpp), and the chain (chain.mlp): the
// application's own calls bit for bit, shown by explain, tuned against the fused kernel with
// its steps tuned inside.
#include "common/failure.hpp"
#include "device/problem_buffers.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "problem/problem_text.hpp"
#include "table/table_file.hpp"
#include "tune/tuner.hpp"
#include "fused_kernel_checks.hpp"
#include "test_support.hpp"
#include "verify/accuracy.hpp"
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

double silu(double g) { return g / (1.0 + std::exp(-g)); }

// y for row-major f32 x [rows, hidden], gate/up [inter, hidden], down [hidden, inter], in double.
std::vector<double> block_by_definition(const std::vector<float>& x, const std::vector<float>& norm,
                                        const std::vector<float>& gate, const std::vector<float>& up,
                                        const std::vector<float>& down, int64_t rows, int64_t hidden, int64_t inter,
                                        double eps) {
  std::vector<double> y(static_cast<size_t>(rows * hidden));
  for (int64_t r = 0; r < rows; ++r) {
    double sum_sq = 0.0;
    for (int64_t c = 0; c < hidden; ++c) sum_sq += double(x[r * hidden + c]) * x[r * hidden + c];
    const double scale = 1.0 / std::sqrt(sum_sq / double(hidden) + eps);
    std::vector<double> h(static_cast<size_t>(inter));
    for (int64_t j = 0; j < inter; ++j) {
      double g = 0.0, u = 0.0;
      for (int64_t c = 0; c < hidden; ++c) {
        const double n = x[r * hidden + c] * scale * norm[c];
        g += n * gate[j * hidden + c];
        u += n * up[j * hidden + c];
      }
      h[j] = silu(g) * u;
    }
    for (int64_t c = 0; c < hidden; ++c) {
      double sum = x[r * hidden + c];
      for (int64_t j = 0; j < inter; ++j) sum += h[j] * down[c * inter + j];
      y[r * hidden + c] = sum;
    }
  }
  return y;
}

}  // namespace

TEST_CASE("mlp problems: keys round-trip, packed strides by default, errors name the field, cost") {
  for (const char* text : {"mlp bf16 rows=1 hidden=4096 inter=14336", "mlp f32 rows=3 hidden=7 inter=5 eps=1e-5",
                           "mlp f16 rows=16 hidden=64 inter=176 ldx=80 ldy=72 ldgate=70 ldup=66 lddown=200"}) {
    CAPTURE(text);
    const arb_problem p = parse_problem(text).problem;
    CHECK(same_problem(parse_problem(problem_key(p)).problem, p));
  }
  CHECK(problem_key(parse_problem("mlp f32 rows=2 hidden=8 inter=24").problem) ==
        "mlp f32 rows=2 hidden=8 inter=24 ldx=8 ldy=8 ldgate=8 ldup=8 lddown=24 align=32 device=cpu");
  CHECK(parse_problem("mlp f32 rows=2 hidden=8 inter=24 eps=1e-5").eps == 1e-5f);
  CHECK(test::problem_text_error("mlp f32 rows=2 hidden=8 inter=24 eps=-1").find("eps=-1 must be finite and >= 0") != std::string::npos);
  CHECK(test::problem_text_error("mlp f32 rows=2 hidden=8").find("'inter='") != std::string::npos);
  CHECK(test::problem_text_error("mlp f32 rows=2 hidden=8 inter=0").find("mlp sizes must be >= 1") != std::string::npos);
  CHECK(test::problem_text_error("mlp f32 rows=2 hidden=8 inter=24 lddown=20").find("lddown") != std::string::npos);
  CHECK(test::problem_text_error("mlp f32 rows=2 hidden=8 inter=24 ldgate=7").find("ldgate") != std::string::npos);
  // Three products of 2 rows hidden inter flops; the weights, x, y and the norm's weight moved.
  CHECK(flop_count(parse_problem("mlp f32 rows=2 hidden=8 inter=24").problem) == 6.0 * 2 * 8 * 24);
  CHECK(bytes_moved(parse_problem("mlp bf16 rows=2 hidden=8 inter=24").problem) == 2.0 * (3 * 8 * 24 + 2 * 2 * 8 + 8));
}

TEST_CASE("the reference mlp matches the block written out, with padded strides") {
  Context& context = test::shipped_context();
  const KernelRecord* reference = context.registry().find("reference.mlp");
  REQUIRE(reference != nullptr);
  const ParsedProblem parsed = parse_problem("mlp f32 rows=3 hidden=20 inter=36 ldx=23 ldy=21 ldgate=25 ldup=20 lddown=40 eps=1e-5");
  const arb_problem& p = parsed.problem;
  ProblemBuffers buffers(p, parsed.alpha, parsed.beta, parsed.eps);
  buffers.randomize(41, Distribution::normal);
  context.run_kernel(*reference, p, buffers.operands(), nullptr);
  // The operands packed, to compare with the block written out on packed arrays.
  auto packed = [&](const char* name, int64_t rows, int64_t cols) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = static_cast<float>(buffers.element(*buffers.find(name), r, c));
    return v;
  };
  const auto expected = block_by_definition(packed("x", p.rows, p.cols), packed("weight", 1, p.cols),
                                            packed("gate", p.inter, p.cols), packed("up", p.inter, p.cols),
                                            packed("down", p.cols, p.inter), p.rows, p.cols, p.inter, parsed.eps);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c)
      CHECK(buffers.element(*buffers.find("y"), r, c) == doctest::Approx(expected[r * p.cols + c]).epsilon(1e-6));
}

namespace {

// A fused CPU kernel on every problem it takes of the shapes below (mlp_bf16_avx512: bf16 on a
// CPU with AVX512-BF16; said skipped elsewhere), each packed and with padded strides
// (fused_kernel_checks.hpp: y's gaps NaN and left alone, every element written, the inputs
// untouched).
void check_cpu_kernel_against_reference(const char* name, const char* example, int expected_checks) {
  CAPTURE(name);
  Context& context = test::shipped_context();
  const KernelRecord* kernel = context.registry().find(name);
  REQUIRE(kernel != nullptr);
  std::string why;
  if (!kernel_supports(*kernel, parse_problem(example).problem, &why)) {
    MESSAGE("skipped: ", name, " cannot run here: ", why);
    return;
  }
  struct Shape {
    int64_t rows, hidden, inter;
  };
  // 31, 33 and 65 leave tails of every length in the 32-element steps; 300 is past a chunk of
  // weight rows; 64 rows is the most a fused kernel takes.
  const std::vector<Shape> shapes = {{1, 1, 1},    {1, 64, 176}, {3, 7, 5},   {4, 33, 65},
                                     {5, 130, 40}, {9, 16, 300}, {64, 24, 48}, {2, 31, 97}};
  int checked = 0;
  uint64_t index = 0;
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const Shape& s : shapes)
      for (int padded = 0; padded < 2; ++padded, ++index) {
        std::string text = fmt::format("mlp {} rows={} hidden={} inter={} eps=1e-5", dtype, s.rows, s.hidden, s.inter);
        if (padded)
          text += fmt::format(" ldx={} ldy={} ldgate={} ldup={} lddown={}", s.hidden + 3, s.hidden + 1, s.hidden + 5,
                              s.hidden + 8, s.inter + 2);
        CAPTURE(text);
        const ParsedProblem parsed = parse_problem(text);
        if (!kernel_supports(*kernel, parsed.problem, nullptr)) continue;  // another dtype
        ++checked;
        test::check_problem_against_reference(context, *kernel, parsed, 900 + index);
      }
  CHECK(checked == expected_checks);
  CHECK_FALSE(kernel_supports(*kernel, parse_problem("mlp bf16 rows=65 hidden=8 inter=8").problem, &why));
  CHECK(why.find("rows above 64") != std::string::npos);
}

}  // namespace

TEST_CASE("cpu.mlp_fused matches the reference: every dtype, decode and small batches, odd sizes, padded strides") {
  check_cpu_kernel_against_reference("cpu.mlp_fused", "mlp f32 rows=1 hidden=8 inter=8", 48);
}

TEST_CASE("cpu.mlp_bf16_avx512 matches the reference: decode and small batches, tails of every 32-element step, padded strides") {
  check_cpu_kernel_against_reference("cpu.mlp_bf16_avx512", "mlp bf16 rows=1 hidden=8 inter=8", 16);
  std::string why;
  const KernelRecord* kernel = test::shipped_context().registry().find("cpu.mlp_bf16_avx512");
  REQUIRE(kernel != nullptr);
  CHECK_FALSE(kernel_supports(*kernel, parse_problem("mlp f32 rows=1 hidden=8 inter=8").problem, &why));
  CHECK(!why.empty());
}

TEST_CASE("arb_mlp: fused and separate gate/up weights give one answer, the block's, and bad input a status and a message") {
  PublicContext pc;
  const int64_t rows = 2, hidden = 16, inter = 40;
  std::vector<float> x = test::wave(rows * hidden, 0.37f, 1.5f), norm = test::wave(hidden, 0.11f, 1.0f);
  std::vector<float> gate_up = test::wave(2 * inter * hidden, 0.013f, 0.25f), down = test::wave(hidden * inter, 0.029f, 0.2f);
  std::vector<float> gate(gate_up.begin(), gate_up.begin() + inter * hidden), up(gate_up.begin() + inter * hidden, gate_up.end());
  std::vector<float> y(rows * hidden, NAN), y_fused(rows * hidden, NAN);
  Tensor tx(x.data(), {rows, hidden}), tn(norm.data(), {hidden}), tg(gate.data(), {inter, hidden}), tu(up.data(), {inter, hidden}),
      tgu(gate_up.data(), {2 * inter, hidden}), td(down.data(), {hidden, inter}), ty(y.data(), {rows, hidden}),
      tyf(y_fused.data(), {rows, hidden});
  arb_mlp_args a = ARB_MLP_ARGS_INIT;
  a.x = &tx.t;
  a.norm_weight = &tn.t;
  a.gate = &tg.t;
  a.up = &tu.t;
  a.down = &td.t;
  a.y = &ty.t;
  REQUIRE_MESSAGE(arb_mlp(pc.ctx, &a, nullptr) == ARB_OK, arb_last_error());
  arb_mlp_args fused = a;
  fused.gate = &tgu.t;
  fused.up = nullptr;
  fused.y = &tyf.t;
  REQUIRE_MESSAGE(arb_mlp(pc.ctx, &fused, nullptr) == ARB_OK, arb_last_error());
  const auto expected = block_by_definition(x, norm, gate, up, down, rows, hidden, inter, a.eps);
  for (size_t i = 0; i < y.size(); ++i) {
    CHECK(y[i] == doctest::Approx(expected[i]).epsilon(1e-5));
    CHECK(y_fused[i] == doctest::Approx(expected[i]).epsilon(1e-5));
  }

  CHECK_STATUS(arb_mlp(pc.ctx, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "arb_mlp: args is NULL");
  arb_mlp_args bad = a;
  bad.struct_size = 56;
  CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "struct_size = 56 is below the minimum 64");
  bad = a;
  bad.down = nullptr;
  CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "down is NULL");
  bad = a;
  bad.norm_weight = nullptr;
  CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "norm_weight is NULL");
  {
    Tensor odd(gate_up.data(), {2 * inter - 1, hidden});
    bad = fused;
    bad.gate = &odd.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "must be even when up is NULL");
  }
  {
    Tensor wrong(gate_up.data(), {inter, hidden + 1});
    bad = a;
    bad.gate = &wrong.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "gate must be [40, 16], got [40, 17]");
  }
  {
    Tensor fewer(up.data(), {inter - 1, hidden});
    bad = a;
    bad.up = &fewer.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "up must be [40, 16], got [39, 16]");
  }
  {
    Tensor as_linear_in(down.data(), {inter, hidden});  // down given as [inter, hidden]
    bad = a;
    bad.down = &as_linear_in.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "down must be [16, 40], got [40, 16]");
  }
  {
    Tensor longer(norm.data(), {hidden - 1});
    bad = a;
    bad.norm_weight = &longer.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "norm_weight must be 1-D of size 16");
  }
  {
    Tensor half(down.data(), {hidden, inter}, DLDataType{kDLBfloat, 16, 1});
    bad = a;
    bad.down = &half.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "down has dtype bf16, but the first operand has f32");
  }
  {
    Tensor other_rows(y.data(), {rows + 1, hidden});
    bad = a;
    bad.y = &other_rows.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y must have the shape of x");
  }
  {
    Tensor onto_x(x.data(), {rows, hidden});  // in place is refused: y must not overlap an input
    bad = a;
    bad.y = &onto_x.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps x in memory");
  }
  {
    Tensor onto_down(down.data(), {rows, hidden});
    bad = a;
    bad.y = &onto_down.t;
    CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps down in memory");
  }
  bad = a;
  bad.eps = -1.0f;
  CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "eps must be finite and >= 0");
  bad = a;
  bad.eps = NAN;
  CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "eps must be finite and >= 0");
  bad = a;
  bad.reserved = 3;
  CHECK_STATUS(arb_mlp(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "reserved must be 0, got 3");
  {
    int stream_marker = 0;
    CHECK_STATUS(arb_mlp(pc.ctx, &a, &stream_marker), ARB_ERR_INVALID_ARGUMENT, "stream must be NULL");
  }
  {
    const std::vector<float> now = y;  // a refused call touched nothing
    bad = a;
    bad.eps = -1.0f;
    CHECK(arb_mlp(pc.ctx, &bad, nullptr) == ARB_ERR_INVALID_ARGUMENT);
    CHECK(std::memcmp(now.data(), y.data(), y.size() * sizeof(float)) == 0);
  }
  {
    arb_plan plan = nullptr;  // a plan's creation checks as the call does
    CHECK_STATUS(arb_plan_create(pc.ctx, ARB_OP_MLP, &bad, &plan), ARB_ERR_INVALID_ARGUMENT, "eps must be finite and >= 0");
    CHECK(plan == nullptr);
  }
}

namespace {

// One block's tensors (rows 2, hidden 16, inter 40, f32), each at a 256-byte aligned address
// of one pool, so that a plan's runs and the calls they are compared with are of one alignment
// class (the same kernel). gate_up holds gate's rows, then up's: the fused weight.
struct BlockData {
  static constexpr int64_t rows = 2, hidden = 16, inter = 40;
  // Room for the seven tensors, each rounded up to 64 floats, and for the first one's alignment.
  explicit BlockData(float step) : pool(64 + 3 * 64 + 5 * inter * hidden) {
    float* next = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(pool.data()) + 255) / 256 * 256);
    const auto take = [&](int64_t count, float scale) {
      float* start = next;
      const std::vector<float> values = test::wave(static_cast<size_t>(count), step, scale);
      std::copy(values.begin(), values.end(), start);
      next += (count + 63) / 64 * 64;
      return start;
    };
    x = take(rows * hidden, 1.5f);
    norm = take(hidden, 1.0f);
    gate = take(inter * hidden, 0.25f);
    up = take(inter * hidden, 0.25f);
    gate_up = take(2 * inter * hidden, 0.0f);
    std::copy(gate, gate + inter * hidden, gate_up);
    std::copy(up, up + inter * hidden, gate_up + inter * hidden);
    down = take(hidden * inter, 0.2f);
    y = take(rows * hidden, 0.0f);
    std::fill(y, y + rows * hidden, NAN);
  }
  BlockData(const BlockData&) = delete;
  std::vector<float> pool;
  float *x, *norm, *gate, *up, *gate_up, *down, *y;
};

// arb_mlp_args over a BlockData, with separate gate and up weights or the fused one (up NULL).
struct BlockArgs {
  BlockArgs(BlockData& d, bool fused)
      : x(d.x, {d.rows, d.hidden}), norm(d.norm, {d.hidden}), gate(d.gate, {d.inter, d.hidden}), up(d.up, {d.inter, d.hidden}),
        gate_up(d.gate_up, {2 * d.inter, d.hidden}), down(d.down, {d.hidden, d.inter}), y(d.y, {d.rows, d.hidden}) {
    args.x = &x.t;
    args.norm_weight = &norm.t;
    args.gate = fused ? &gate_up.t : &gate.t;
    args.up = fused ? nullptr : &up.t;
    args.down = &down.t;
    args.y = &y.t;
  }
  Tensor x, norm, gate, up, gate_up, down, y;
  arb_mlp_args args = ARB_MLP_ARGS_INIT;
};

// A plan of the block over `made`, destroyed with it.
struct BlockPlan {
  BlockPlan(arb_context ctx, BlockData& made, bool fused) : args(made, fused) {
    REQUIRE_MESSAGE(arb_plan_create(ctx, ARB_OP_MLP, &args.args, &plan) == ARB_OK, arb_last_error());
  }
  ~BlockPlan() { arb_plan_destroy(plan); }
  BlockArgs args;
  arb_plan plan = nullptr;
};

// check(data, plan, fused) on a plan made over `data`: with separate gate and up weights, then
// with the fused one.
template <typename Check>
void for_each_block_plan(arb_context ctx, Check&& check) {
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    BlockData data(0.13f);
    const BlockPlan planned(ctx, data, fused);
    check(data, planned.plan, fused);
  }
}

// A run's operands in arb_mlp_args' order: x, norm_weight, gate, up (NULL with the fused weight), down, y.
arb_plan_operands block_operands(BlockData& d, bool fused) {
  arb_plan_operands o = ARB_PLAN_OPERANDS_INIT;
  o.tensors[0] = d.x;
  o.tensors[1] = d.norm;
  o.tensors[2] = fused ? d.gate_up : d.gate;
  o.tensors[3] = fused ? nullptr : d.up;
  o.tensors[4] = d.down;
  o.tensors[5] = d.y;
  return o;
}

}  // namespace

TEST_CASE("mlp plans: each run on fresh data is arb_mlp on that data, bit for bit, with separate or fused gate/up weights") {
  PublicContext pc;
  for_each_block_plan(pc.ctx, [&](BlockData&, arb_plan plan, bool fused) {
    for (int run = 0; run < 3; ++run) {
      CAPTURE(run);
      BlockData fresh(0.29f + 0.17f * static_cast<float>(run));
      arb_plan_operands o = block_operands(fresh, fused);
      REQUIRE_MESSAGE(arb_plan_run(plan, &o, nullptr) == ARB_OK, arb_last_error());
      const std::vector<float> planned(fresh.y, fresh.y + BlockData::rows * BlockData::hidden);
      CHECK(std::none_of(planned.begin(), planned.end(), [](float v) { return std::isnan(v); }));
      std::fill(fresh.y, fresh.y + planned.size(), NAN);
      BlockArgs call(fresh, fused);
      REQUIRE_MESSAGE(arb_mlp(pc.ctx, &call.args, nullptr) == ARB_OK, arb_last_error());
      CHECK(std::memcmp(planned.data(), fresh.y, planned.size() * sizeof(float)) == 0);
    }
    CHECK(arbiter::test::plan_explanation(plan).find("plan: runs ") == 0);
  });
}

TEST_CASE("mlp plans: operands of 1.3-1.7 (five tensors) are refused, and so are y over an input and an up beside a fused gate") {
  PublicContext pc;
  for_each_block_plan(pc.ctx, [&](BlockData& data, arb_plan plan, bool fused) {
    const arb_plan_operands good = block_operands(data, fused);
    auto refused = [&](const arb_plan_operands& o, const char* needle) {
      std::fill(data.y, data.y + BlockData::rows * BlockData::hidden, -7.0f);
      CHECK_STATUS(arb_plan_run(plan, &o, nullptr), ARB_ERR_INVALID_ARGUMENT, needle);
      CHECK(std::all_of(data.y, data.y + BlockData::rows * BlockData::hidden, [](float v) { return v == -7.0f; }));
    };
    arb_plan_operands bad = good;
    bad.struct_size = ARB_PLAN_OPERANDS_STRUCT_SIZE;  // 48: a caller built against 1.3-1.7
    refused(bad, "operands->struct_size = 48 is too small for mlp's 6 tensors");
    bad.struct_size = ARB_STRUCT_SIZE(arb_plan_operands, tensors[5]);  // 56: holds the six, and is enough
    CHECK_MESSAGE(arb_plan_run(plan, &bad, nullptr) == ARB_OK, arb_last_error());
    bad = good;
    bad.tensors[6] = data.x;  // past the op's six: never read
    CHECK_MESSAGE(arb_plan_run(plan, &bad, nullptr) == ARB_OK, arb_last_error());

    // y onto each input (into the second, up's, half of a fused weight too).
    const char* const names[] = {"x", "norm_weight", "gate", "up", "down"};
    for (int input = 0; input < 5; ++input) {
      if (good.tensors[input] == nullptr) continue;
      CAPTURE(input);
      bad = good;
      bad.tensors[5] = good.tensors[input];
      refused(bad, fmt::format("tensors[5] (y) overlaps tensors[{}] ({})", input, names[input]).c_str());
    }
    bad = good;
    if (fused) {
      bad.tensors[5] = data.gate_up + (2 * BlockData::inter - 1) * BlockData::hidden;  // on up's last row
      refused(bad, "tensors[5] (y) overlaps tensors[2] (gate)");
      bad = good;
      bad.tensors[3] = data.up;
      refused(bad, "tensors[3] (up) must be NULL: the plan's tensors[2] (gate) holds it");
    } else {
      bad.tensors[3] = nullptr;
      refused(bad, "tensors[3] (up) is NULL");
    }
    CHECK_MESSAGE(arb_plan_run(plan, &good, nullptr) == ARB_OK, arb_last_error());  // and the plan still runs
  });
}

TEST_CASE("the gate rejects the mlp cheaters for accuracy, and passes the honest kernels and the chain's rounding") {
  std::vector<std::string> files = test::shipped_plugins();
  files.push_back(test::fixture_file("mlp_cheats"));
  const auto context = test::make_context(test::config_loading(files));
  const char* problem = "mlp f32 rows=3 hidden=48 inter=80 eps=1e-5";
  // bf16 too, whose tolerance (6.4e-2) leaves room for the chain's rounding of silu's argument.
  for (const char* cheated : {problem, "mlp bf16 rows=4 hidden=64 inter=176"})
    for (const char* name : {"no_residual", "no_norm", "relu_gate", "swapped_halves", "down_transposed"}) {
      CAPTURE(cheated);
      CAPTURE(name);
      const KernelRecord* record = context->registry().find(std::string("mlp_cheats.") + name);
      REQUIRE(record != nullptr);
      const Verdict v = context->gate().verdict(*record, parse_problem(cheated).problem);
      CAPTURE(v.detail);
      CHECK_FALSE(v.passed);
      CHECK(std::count(v.failed_checks.begin(), v.failed_checks.end(), "accuracy") == 1);
    }
  for (const char* honest : {problem, "mlp bf16 rows=1 hidden=256 inter=688", "mlp f16 rows=5 hidden=64 inter=176",
                             "mlp bf16 rows=16 hidden=128 inter=344"}) {
    CAPTURE(honest);
    for (const char* kernel :
         {"cpu.mlp_fused", "cpu.mlp_bf16_avx512", "chain.mlp", "reference.mlp", "mlp_cheats.chain_rounded"}) {
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

namespace {

// The block's tensors, packed, f32: x [rows, hidden], the weights separate or fused.
struct Block {
  int64_t rows, hidden, inter;
  std::vector<float> x, norm, gate_up, down;
  Block(int64_t r, int64_t h, int64_t i)
      : rows(r), hidden(h), inter(i), x(test::wave(r * h, 0.37f, 1.5f)), norm(test::wave(h, 0.11f, 1.0f)),
        gate_up(test::wave(2 * i * h, 0.013f, 0.25f)), down(test::wave(h * i, 0.029f, 0.2f)) {}
};

}  // namespace

TEST_CASE("chain.mlp is the application's own chain of calls, bit for bit, with fused or separate gate/up weights") {
  const Block b(3, 40, 72);
  // Dispatch forced onto the chain; its steps (and the hand-made calls) go where dispatch sends them.
  PublicContext pc("[[dispatch.override]]\nop = \"mlp\"\nkernel = \"chain.mlp\"\n");
  std::vector<float> y(b.rows * b.hidden, NAN), y_separate(y.size(), NAN);
  std::vector<float> gate(b.gate_up.begin(), b.gate_up.begin() + b.inter * b.hidden);
  std::vector<float> up(b.gate_up.begin() + b.inter * b.hidden, b.gate_up.end());
  Tensor tx(const_cast<float*>(b.x.data()), {b.rows, b.hidden}), tn(const_cast<float*>(b.norm.data()), {b.hidden}),
      tgu(const_cast<float*>(b.gate_up.data()), {2 * b.inter, b.hidden}), tg(gate.data(), {b.inter, b.hidden}),
      tu(up.data(), {b.inter, b.hidden}), td(const_cast<float*>(b.down.data()), {b.hidden, b.inter}),
      ty(y.data(), {b.rows, b.hidden}), tys(y_separate.data(), {b.rows, b.hidden});
  arb_mlp_args a = ARB_MLP_ARGS_INIT;
  a.x = &tx.t;
  a.norm_weight = &tn.t;
  a.gate = &tgu.t;
  a.down = &td.t;
  a.y = &ty.t;
  REQUIRE_MESSAGE(arb_mlp(pc.ctx, &a, nullptr) == ARB_OK, arb_last_error());
  arb_mlp_args separate = a;
  separate.gate = &tg.t;
  separate.up = &tu.t;
  separate.y = &tys.t;
  REQUIRE_MESSAGE(arb_mlp(pc.ctx, &separate, nullptr) == ARB_OK, arb_last_error());

  // The same four steps by hand: rmsnorm, one gemm on the fused weight, swiglu, gemm with c = x.
  std::vector<float> normed(b.rows * b.hidden), projected(b.rows * 2 * b.inter), activated(b.rows * b.inter);
  std::vector<float> expected(y.size(), NAN);
  Tensor t_normed(normed.data(), {b.rows, b.hidden}), t_projected(projected.data(), {b.rows, 2 * b.inter}),
      t_activated(activated.data(), {b.rows, b.inter}), t_expected(expected.data(), {b.rows, b.hidden});
  arb_rmsnorm_args norm = ARB_RMSNORM_ARGS_INIT;
  norm.x = &tx.t;
  norm.weight = &tn.t;
  norm.y = &t_normed.t;
  norm.eps = a.eps;
  REQUIRE(arb_rmsnorm(pc.ctx, &norm, nullptr) == ARB_OK);
  arb_gemm_args project = ARB_GEMM_ARGS_INIT;
  project.a = &t_normed.t;
  project.b = &tgu.t;
  project.trans_b = 1;
  project.d = &t_projected.t;
  REQUIRE(arb_gemm(pc.ctx, &project, nullptr) == ARB_OK);
  arb_swiglu_args activate = ARB_SWIGLU_ARGS_INIT;
  activate.gate = &t_projected.t;
  activate.y = &t_activated.t;
  REQUIRE(arb_swiglu(pc.ctx, &activate, nullptr) == ARB_OK);
  arb_gemm_args down = ARB_GEMM_ARGS_INIT;
  down.a = &t_activated.t;
  down.b = &td.t;
  down.trans_b = 1;
  down.c = &tx.t;
  down.beta = 1.0f;
  down.d = &t_expected.t;
  REQUIRE(arb_gemm(pc.ctx, &down, nullptr) == ARB_OK);
  CHECK(std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)) == 0);
  // Separate weights: two projections into the halves of one buffer, the same numbers.
  CHECK(std::memcmp(y_separate.data(), expected.data(), y.size() * sizeof(float)) == 0);
  const auto reference = block_by_definition(b.x, b.norm, gate, up, b.down, b.rows, b.hidden, b.inter, a.eps);
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(reference[i]).epsilon(1e-5));

  // explain names the chain's calls and the kernel each would get.
  size_t length = 0;
  arb_explain(pc.ctx, ARB_OP_MLP, &a, nullptr, 0, &length);
  std::string text(length, '\0');
  REQUIRE(arb_explain(pc.ctx, ARB_OP_MLP, &a, text.data(), text.size(), &length) == ARB_OK);
  CAPTURE(text);
  CHECK(text.find("kernel:  chain.mlp") != std::string::npos);
  CHECK(text.find("the chain (chain.mlp) runs 4 calls, each dispatched as its own:") != std::string::npos);
  CHECK(text.find("1. rmsnorm f32 rows=3 cols=40 residual=0 ldx=40 ldy=40") != std::string::npos);
  CHECK(text.find("2. gemm f32 m=3 n=144 k=40 ta=0 tb=1") != std::string::npos);
  CHECK(text.find("3. swiglu f32 rows=3 cols=72 ldgate=144 ldup=144 ldy=72") != std::string::npos);
  CHECK(text.find("4. gemm f32 m=3 n=40 k=72 ta=0 tb=1 act=none bias=0 beta=1") != std::string::npos);
  CHECK(text.find("the chain (chain.mlp) runs 5 calls") == std::string::npos);
}

TEST_CASE("the chain is a candidate like the fused kernel: tuned at dispatch, its own steps tuned inside, both recorded") {
  test::TempDir dir;
  const std::string path = dir.file("table.toml");
  const auto context = test::make_context(test::config_loading(
      test::shipped_plugins(), "[table]\npath = \"" + path + "\"\npolicy = \"tune-missing\"\n[tune]\nbudget_ms = 20\n"));
  const arb_problem problem = parse_problem("mlp f32 rows=2 hidden=64 inter=176").problem;
  // The mlp miss tunes; the chain's warm-up dispatches its steps, which miss and tune in turn
  // on this thread (the dispatcher's miss lock is recursive).
  const Decision d = context->dispatcher().decide(problem, Dispatcher::Mode::dispatch);
  REQUIRE(d.kernel != nullptr);
  CHECK(d.rule.find("tuned now") == 0);
  const TuningTable written = load_table_file(path);
  std::vector<std::string> ops;
  for (const auto& entry : written.entries()) ops.push_back(entry.key.substr(0, entry.key.find(' ')));
  CAPTURE(ops);
  CHECK(std::count(ops.begin(), ops.end(), "mlp") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "rmsnorm") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "swiglu") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "gemm") >= 2);  // the projection and the down gemm
  // Tuned again: the chain is timed against the fused kernel (measured, or screened out as the
  // slower after its warm-up), never refused.
  const TuneResult result = context->tuner().tune(problem, nullptr);
  bool chain_timed = false;
  for (const auto& c : result.candidates)
    if (c.kernel->name == "chain.mlp") {
      CAPTURE(c.status);
      chain_timed = c.measured || c.status.find("screened out") == 0;
#ifdef NDEBUG
      // Warmed past its steps' checked calls. Only in an optimised build: unoptimised and under
      // ASan (CI's sanitizer run), four dispatched calls do lose 30x to one fused kernel here.
      CHECK(c.status.find("after one launch") == std::string::npos);
#endif
    }
  CHECK(chain_timed);
}
