// Every op x dtype x transpose x epilogue of each CPU plugin against the reference plugin
// on random data, with edge shapes (1, primes, non-multiples of the block sizes, padded
// leading dimensions). And the reference itself against a naive computation here.
#include "arbiter_base/abi_names.hpp"
#include "device/problem_buffers.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_text.hpp"
#include "activation.hpp"
#include "test_support.hpp"
#include "verify/accuracy.hpp"

#include <arbiter/float16.hpp>
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>

using namespace arbiter;

namespace {

struct Shape {
  int64_t m, n, k;
  int64_t pad;  // added to every leading dimension
};

// Small shapes (gemm_small handles up to 64): 1, primes, just under and at the limit,
// not multiples of the 6 x 16 register block.
const std::vector<Shape> kSmall = {{1, 1, 1, 0}, {7, 13, 5, 3}, {64, 64, 64, 0}, {17, 1, 31, 1},
                                   {6, 16, 8, 5}, {2, 64, 61, 0}, {64, 3, 64, 2}, {13, 47, 1, 0}};
const std::vector<Shape> kLarger = {{65, 97, 129, 0}, {1, 200, 67, 4}, {130, 1, 70, 1}};

// Runs `kernel` and the reference on the same random inputs and checks: the outputs agree
// within the dtype's tolerance, no input changed, nothing outside the outputs' rows x cols
// (the row padding) was written.
void check_against_reference(const std::string& kernel_name, const std::string& problem_text, uint64_t seed) {
  CAPTURE(kernel_name);
  CAPTURE(problem_text);
  Context& context = test::shipped_context();
  const KernelRecord* kernel = context.registry().find(kernel_name);
  REQUIRE(kernel != nullptr);
  const ParsedProblem parsed = parse_problem(problem_text);
  const KernelRecord* reference =
      context.registry().find("reference." + std::string(op_name(parsed.problem.op)));
  REQUIRE(reference != nullptr);

  ProblemBuffers buffers(parsed.problem, parsed.alpha, parsed.beta, parsed.eps);
  buffers.randomize(seed, seed % 2 ? Distribution::normal : Distribution::uniform);
  const ProblemBuffers before = buffers;
  ProblemBuffers expected = buffers;
  context.run_kernel(*kernel, parsed.problem, buffers.operands(), nullptr);
  context.run_kernel(*reference, parsed.problem, expected.operands(), nullptr);

  const Comparison c = compare_outputs(buffers, expected);
  CHECK(c.finite);
  CHECK_MESSAGE(c.error <= tolerance_for(parsed.problem.dtype), "relative error ", c.error, " in ", c.worst);

  const size_t element = dtype_size(parsed.problem.dtype);
  for (size_t i = 0; i < buffers.all().size(); ++i) {
    const auto& now = buffers.all()[i];
    const auto& then = before.all()[i];
    CAPTURE(now.name);
    if (!now.is_output) {
      CHECK(std::memcmp(now.buffer.data(), then.buffer.data(), now.buffer.size()) == 0);
      continue;
    }
    for (int64_t r = 0; r < now.rows; ++r) {  // the padding between rows is not the kernel's
      const size_t begin = static_cast<size_t>(r * now.ld + now.cols) * element;
      const size_t end = std::min(now.buffer.size(), static_cast<size_t>((r + 1) * now.ld) * element);
      if (begin < end) CHECK(std::memcmp(now.buffer.data() + begin, then.buffer.data() + begin, end - begin) == 0);
    }
  }
}

void check_gemm_kernel(const std::string& kernel, const std::vector<Shape>& shapes,
                       const std::vector<const char*>& dtypes = {"f32", "f16", "bf16"}) {
  uint64_t index = 0;
  for (const char* dtype : dtypes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "silu"}) {
          for (int bias = 0; bias < 2; ++bias) {
            for (int s = 0; s < 2; ++s, ++index) {  // two shapes per combination, rotating
              const Shape& shape = shapes[(index * 3 + static_cast<uint64_t>(s)) % shapes.size()];
              const int64_t lda = (ta ? shape.m : shape.k) + shape.pad;
              const int64_t ldb = (tb ? shape.k : shape.n) + shape.pad;
              const int64_t ldd = shape.n + shape.pad;
              std::string text = fmt::format("gemm {} m={} n={} k={} ta={} tb={} act={} bias={} lda={} ldb={} ldd={}",
                                             dtype, shape.m, shape.n, shape.k, ta, tb, act, bias, lda, ldb, ldd);
              switch (index % 3) {  // C: absent, a separate matrix, or D itself
                case 1: text += fmt::format(" beta=0.5 ldc={} alpha=1.5", shape.n + 2 * shape.pad); break;
                case 2: text += " beta=1 inplace=1 alpha=-1"; break;
                default: break;
              }
              check_against_reference(kernel, text, index);
            }
          }
        }
      }
    }
  }
}

void check_row_kernel(const std::string& kernel, const char* op) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {1, 7}, {3, 8}, {5, 17}, {2, 4099}, {16, 64}, {4, 1000}};
  uint64_t index = 0;
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    for (const auto& [rows, cols] : shapes) {
      for (int variant = 0; variant < 2; ++variant, ++index) {
        const int64_t pad = variant ? 3 : 0;
        std::string text = fmt::format("{} {} rows={} cols={} ldx={} ldy={}", op, dtype, rows, cols, cols + pad, cols + 2 * pad);
        if (std::string(op) == "rmsnorm") text += fmt::format(" eps=1e-5 residual={}", variant);
        if (std::string(op) == "rmsnorm" && variant) text += fmt::format(" ldr={}", cols + 1);
        check_against_reference(kernel, text, 1000 + index);
      }
    }
  }
}

}  // namespace

TEST_CASE("cpu.gemm_small_avx2 matches the reference: every dtype, transpose and epilogue, edge shapes") {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
    MESSAGE("skipped: this CPU lacks AVX2, FMA or F16C");
    return;
  }
  check_gemm_kernel("cpu.gemm_small_avx2", kSmall);
}

TEST_CASE("cpu.gemm_bf16_avx512 matches the reference: bf16, every transpose and epilogue, small to medium shapes") {
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl")) {
    MESSAGE("skipped: this CPU lacks AVX512-BF16, AVX-512BW or AVX-512VL");
    return;
  }
  // Odd k (the packed pair's zero half), n past a 32-column strip and m past a 12-row block,
  // and medium shapes that the small kernels refuse.
  std::vector<Shape> shapes = kSmall;
  shapes.insert(shapes.end(), kLarger.begin(), kLarger.end());
  shapes.insert(shapes.end(), {{128, 128, 128, 0}, {25, 257, 33, 3}, {200, 40, 301, 1}});
  check_gemm_kernel("cpu.gemm_bf16_avx512", shapes, {"bf16"});
}

TEST_CASE("cpu.gemm_bf16_amx matches the reference: bf16, every transpose and epilogue, small to medium shapes") {
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") || !__builtin_cpu_supports("avx512bf16")) {
    MESSAGE("skipped: this CPU lacks AMX-BF16 or AVX512-BF16");
    return;
  }
  // m and n past a 32 x 32 block, k past a 32-deep tile (odd, too), and medium shapes.
  std::vector<Shape> shapes = kSmall;
  shapes.insert(shapes.end(), kLarger.begin(), kLarger.end());
  shapes.insert(shapes.end(), {{128, 128, 128, 0}, {33, 257, 65, 3}, {200, 40, 301, 1}, {64, 96, 32, 0}});
  check_gemm_kernel("cpu.gemm_bf16_amx", shapes, {"bf16"});
}

TEST_CASE("cpu.gemm_small_avx512 matches the reference: every dtype, transpose and epilogue, edge shapes") {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl")) {
    MESSAGE("skipped: this CPU lacks AVX-512F or AVX-512VL");
    return;
  }
  check_gemm_kernel("cpu.gemm_small_avx512", kSmall);
}

#ifdef ARBITER_TEST_HAVE_OPENBLAS
TEST_CASE("openblas.sgemm matches the reference: every dtype, transpose and epilogue, edge shapes") {
  std::vector<Shape> shapes = kSmall;
  shapes.insert(shapes.end(), kLarger.begin(), kLarger.end());
  check_gemm_kernel("openblas.sgemm", shapes);
}
#endif

TEST_CASE("cpu.rmsnorm matches the reference, with and without the fused residual") {
  check_row_kernel("cpu.rmsnorm", "rmsnorm");
}

TEST_CASE("cpu.softmax matches the reference") { check_row_kernel("cpu.softmax", "softmax"); }

// Separate gate and up with their own padding, and the halves of one fused [rows, 2 cols] output.
namespace {
void check_swiglu_kernel(const std::string& kernel) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {1, 7}, {3, 8}, {5, 17}, {2, 33}, {2, 4099}, {16, 64}, {4, 1000}};
  uint64_t index = 0;
  for (const char* dtype : {"f32", "f16", "bf16"}) {
    for (const auto& [rows, cols] : shapes) {
      for (int variant = 0; variant < 2; ++variant, ++index) {
        const std::string text =
            variant ? fmt::format("swiglu {} rows={} cols={} fused=1", dtype, rows, cols)
                    : fmt::format("swiglu {} rows={} cols={} ldgate={} ldup={} ldy={}", dtype, rows, cols, cols + 3, cols + 1, cols + 5);
        check_against_reference(kernel, text, 2000 + index);
      }
    }
  }
}
}  // namespace

TEST_CASE("cpu.swiglu matches the reference: separate and fused gate/up, every dtype, vector tails") {
  check_swiglu_kernel("cpu.swiglu");
}

TEST_CASE("cpu.swiglu_avx512 matches the reference: separate and fused gate/up, every dtype, masked tails") {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512bw")) {
    MESSAGE("skipped: this CPU lacks AVX-512F, VL or BW");
    return;
  }
  check_swiglu_kernel("cpu.swiglu_avx512");
}

// Both layouts, every dtype, packed and padded heads and tokens, vector tails (pairs not a
// multiple of 8, a single pair, more pairs than one block of 64).
TEST_CASE("cpu.rope matches the reference: both layouts, every dtype, padded heads and tokens") {
  struct RopeShape {
    int64_t tokens, heads, dim;
  };
  const std::vector<RopeShape> shapes = {{1, 1, 2},  {1, 32, 128}, {3, 5, 6},   {2, 3, 18},
                                         {4, 8, 64}, {5, 2, 34},   {1, 1, 1022}, {7, 4, 130}};
  uint64_t index = 0;
  for (const char* dtype : {"f32", "f16", "bf16"})
    for (const char* layout : {"half", "interleaved"})
      for (const RopeShape& s : shapes)
        for (int padded = 0; padded < 2; ++padded, ++index) {
          std::string text = fmt::format("rope {} tokens={} heads={} dim={} layout={} theta={} maxpos=32768", dtype,
                                         s.tokens, s.heads, s.dim, layout, index % 3 ? 500000 : 10000);
          if (padded) text += fmt::format(" ldhead={} ldtoken={}", s.dim + 3, s.heads * (s.dim + 3) + 5);
          check_against_reference("cpu.rope", text, 3000 + index);
        }
}

// silu(g) for gates where e^-g overflows f32: the limit, not inf / inf.
TEST_CASE("swiglu is stable for gates far from zero") {
  Context& context = test::shipped_context();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  std::vector<const char*> kernels = {"cpu.swiglu", "reference.swiglu"};
  if (avx512) kernels.push_back("cpu.swiglu_avx512");
  for (const char* name : kernels) {
    CAPTURE(name);
    alignas(64) float gate[9] = {-1000.0f, -100.0f, -89.0f, -1.0f, 0.0f, 1.0f, 89.0f, 100.0f, 1000.0f};
    alignas(64) float up[9];
    alignas(64) float y[9];
    for (float& u : up) u = 2.0f;
    const ParsedProblem parsed = parse_problem("swiglu f32 rows=1 cols=9");
    arb_operands o{};
    o.struct_size = sizeof o;
    o.gate = gate;
    o.up = up;
    o.y = y;
    context.run_kernel(*context.registry().find(name), parsed.problem, o, nullptr);
    for (int i = 0; i < 9; ++i) {
      CAPTURE(i);
      const double g = gate[i];
      const double want = 2.0 * g / (1.0 + std::exp(-g));
      CHECK(std::isfinite(y[i]));
      CHECK(y[i] == doctest::Approx(want).epsilon(1e-5).scale(1e-30));
    }
  }
}

TEST_CASE("softmax is numerically stable: huge logits give no overflow") {
  Context& context = test::shipped_context();
  for (const char* name : {"cpu.softmax", "reference.softmax"}) {
    CAPTURE(name);
    alignas(64) float x[12];
    alignas(64) float y[12];
    for (int i = 0; i < 12; ++i) x[i] = 1000.0f + static_cast<float>(i);
    ParsedProblem parsed = parse_problem("softmax f32 rows=1 cols=12");
    arb_operands o{};
    o.struct_size = sizeof o;
    o.x = x;
    o.y = y;
    context.run_kernel(*context.registry().find(name), parsed.problem, o, nullptr);
    double sum = 0;
    for (float v : y) {
      CHECK(std::isfinite(v));
      sum += v;
    }
    CHECK(sum == doctest::Approx(1.0));
    CHECK(y[11] == doctest::Approx(1.0 / (1.0 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0) + std::exp(-4.0) +
                                          std::exp(-5.0) + std::exp(-6.0) + std::exp(-7.0) + std::exp(-8.0) +
                                          std::exp(-9.0) + std::exp(-10.0) + std::exp(-11.0)))
                          .epsilon(1e-5));
  }
}

// The reference is the oracle, so it is checked here against a naive computation written
// independently, in double, straight from the definitions.
TEST_CASE("the reference plugin matches a naive computation") {
  Context& context = test::shipped_context();
  SUBCASE("gemm") {
    for (const char* text : {"gemm f32 m=5 n=7 k=3 ta=1 act=gelu_tanh bias=1 beta=0.5 alpha=2",
                             "gemm bf16 m=4 n=9 k=11 tb=1 act=silu lda=12 ldb=13 ldd=10",
                             "gemm f16 m=3 n=3 k=17 act=gelu bias=1 beta=-1 inplace=1",
                             "gemm f32 m=6 n=2 k=5 ta=1 tb=1 act=relu"}) {
      CAPTURE(text);
      const ParsedProblem parsed = parse_problem(text);
      const arb_problem& p = parsed.problem;
      ProblemBuffers buffers(p, parsed.alpha, parsed.beta, parsed.eps);
      buffers.randomize(7);
      const ProblemBuffers inputs = buffers;
      context.run_kernel(*context.registry().find("reference.gemm"), p, buffers.operands(), nullptr);
      const auto& a = *inputs.find("a");
      const auto& b = *inputs.find("b");
      const auto* c = inputs.find(p.c_is_d ? "d" : "c");
      const auto* bias = inputs.find("bias");
      const auto& d = *buffers.find("d");
      for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < p.k; ++q)
            acc += (p.trans_a ? inputs.element(a, q, i) : inputs.element(a, i, q)) *
                   (p.trans_b ? inputs.element(b, j, q) : inputs.element(b, q, j));
          double v = parsed.alpha * acc;
          if (p.has_c) v += parsed.beta * inputs.element(*c, i, j);
          if (p.has_bias) v += inputs.element(*bias, 0, j);
          v = plugins::activate<double>(p.activation, v);
          CHECK(buffers.element(d, i, j) == doctest::Approx(v).epsilon(tolerance_for(p.dtype)));
        }
      }
    }
  }
  SUBCASE("rmsnorm with residual") {
    const ParsedProblem parsed = parse_problem("rmsnorm f32 rows=3 cols=5 residual=1 eps=0.01 ldx=6");
    const arb_problem& p = parsed.problem;
    ProblemBuffers buffers(p, 1, 0, parsed.eps);
    buffers.randomize(3);
    const ProblemBuffers inputs = buffers;
    context.run_kernel(*context.registry().find("reference.rmsnorm"), p, buffers.operands(), nullptr);
    for (int64_t r = 0; r < p.rows; ++r) {
      double h[5], ss = 0;
      for (int64_t c = 0; c < 5; ++c) {
        h[c] = inputs.element(*inputs.find("x"), r, c) + inputs.element(*inputs.find("residual"), r, c);
        ss += h[c] * h[c];
        CHECK(buffers.element(*buffers.find("x"), r, c) == doctest::Approx(h[c]));  // the sum written back
      }
      for (int64_t c = 0; c < 5; ++c) {
        const double want = h[c] / std::sqrt(ss / 5 + 0.01) * inputs.element(*inputs.find("weight"), 0, c);
        CHECK(buffers.element(*buffers.find("y"), r, c) == doctest::Approx(want).epsilon(1e-6));
      }
    }
  }
  SUBCASE("swiglu") {
    const ParsedProblem parsed = parse_problem("swiglu f32 rows=3 cols=5 ldgate=7 ldup=6");
    ProblemBuffers buffers(parsed.problem, 1, 0, 0);
    buffers.randomize(11);
    const ProblemBuffers inputs = buffers;
    context.run_kernel(*context.registry().find("reference.swiglu"), parsed.problem, buffers.operands(), nullptr);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 5; ++c) {
        const double g = inputs.element(*inputs.find("gate"), r, c);
        const double want = g / (1.0 + std::exp(-g)) * inputs.element(*inputs.find("up"), r, c);
        CHECK(buffers.element(*buffers.find("y"), r, c) == doctest::Approx(want).epsilon(1e-6));
      }
  }
  SUBCASE("rope") {
    // Pairs turned by position * theta^(-2i / dim), written out for dim 4: pairs (0, 2) and
    // (1, 3) split-half, (0, 1) and (2, 3) interleaved.
    for (const bool interleaved : {false, true}) {
      CAPTURE(interleaved);
      const ParsedProblem parsed = parse_problem(fmt::format(
          "rope f32 tokens=2 heads=2 dim=4 theta=100 ldhead=5 layout={}", interleaved ? "interleaved" : "half"));
      ProblemBuffers buffers(parsed.problem, 1, 0, 0);
      buffers.randomize(13);
      const ProblemBuffers inputs = buffers;
      const auto* positions = static_cast<const int32_t*>(inputs.operands().positions);
      context.run_kernel(*context.registry().find("reference.rope"), parsed.problem, buffers.operands(), nullptr);
      const auto& x_in = *inputs.find("x");
      const auto& x_out = *buffers.find("x");
      for (int64_t t = 0; t < 2; ++t)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < 2; ++i) {
            const double angle = positions[t] * (i == 0 ? 1.0 : 0.1);  // 100^(-2i/4)
            const int64_t a = h * 5 + (interleaved ? 2 * i : i), b = h * 5 + (interleaved ? 2 * i + 1 : i + 2);
            const double x1 = inputs.element(x_in, t, a), x2 = inputs.element(x_in, t, b);
            CHECK(buffers.element(x_out, t, a) == doctest::Approx(x1 * std::cos(angle) - x2 * std::sin(angle)).epsilon(1e-6));
            CHECK(buffers.element(x_out, t, b) == doctest::Approx(x2 * std::cos(angle) + x1 * std::sin(angle)).epsilon(1e-6));
          }
      CHECK(buffers.element(x_out, 0, 4) == inputs.element(x_in, 0, 4));  // the gap between heads is left alone
    }
  }
  SUBCASE("softmax") {
    const ParsedProblem parsed = parse_problem("softmax f32 rows=2 cols=4 ldy=9");
    ProblemBuffers buffers(parsed.problem, 1, 0, 0);
    buffers.randomize(5);
    context.run_kernel(*context.registry().find("reference.softmax"), parsed.problem, buffers.operands(), nullptr);
    for (int64_t r = 0; r < 2; ++r) {
      double e[4], sum = 0;
      for (int64_t c = 0; c < 4; ++c) sum += (e[c] = std::exp(buffers.element(*buffers.find("x"), r, c)));
      for (int64_t c = 0; c < 4; ++c)
        CHECK(buffers.element(*buffers.find("y"), r, c) == doctest::Approx(e[c] / sum).epsilon(1e-6));
    }
  }
}
