// cpu.qkv_fused and cpu.qkv_bf16_avx512 (the attention block's input fused for decode: rmsnorm,
// the QKV projection and rope on q and k in one pass) against reference.qkv: every dtype each
// takes, decode and small batches, odd sizes, both rope layouts, padded strides; their refusals;
// and the gate's verdict on them.
#include "fused_kernel_checks.hpp"
#include "plugin/kernel_call.hpp"
#include "problem/problem.hpp"
#include "test_support.hpp"
#include "verify/verifier.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace arbiter;

namespace {

// A fused qkv kernel, or nullptr (said skipped) on a CPU without its ISA: `example` is a
// problem it takes wherever it runs.
const KernelRecord* kernel_here(const char* name, const char* example) {
  const KernelRecord* kernel = test::shipped_context().registry().find(name);
  REQUIRE(kernel != nullptr);
  std::string why;
  if (kernel_supports(*kernel, parse_problem(example).problem, &why)) return kernel;
  MESSAGE("skipped: ", name, " cannot run here: ", why);
  return nullptr;
}

const KernelRecord* qkv_fused_here() { return kernel_here("cpu.qkv_fused", "qkv f32 rows=1 hidden=8 heads=1 dim=2"); }
const KernelRecord* qkv_bf16_avx512_here() {
  return kernel_here("cpu.qkv_bf16_avx512", "qkv bf16 rows=1 hidden=8 heads=1 dim=2");
}

struct Shape {
  int64_t rows, hidden, heads, kv_heads, dim;
};

// hidden 7 and 33 leave tails of the 8-lane steps of the norm and the dots (and of the 16- and
// 32-lane ones); head_dim 2 and 6 tails of the turn, 130 more than its 64-pair block; heads + 2
// kv_heads above 16 span several chunks of weight rows; 3 rows a block remainder, 64 rows the
// most the kernels take.
const std::vector<Shape> kShapes = {{1, 7, 1, 1, 2},   {3, 64, 3, 1, 6},  {1, 256, 8, 2, 32}, {64, 256, 4, 2, 32},
                                    {3, 7, 8, 8, 128}, {64, 64, 2, 1, 6}, {5, 33, 2, 2, 34},  {2, 64, 1, 1, 130},
                                    {1, 256, 5, 3, 128}};

// `kernel` against the reference on each shape in each of `dtypes`, both layouts, packed and
// padded; the inputs drawn from seed + the problem's index. Returns the problems checked.
int check_against_reference(const KernelRecord& kernel, const std::vector<const char*>& dtypes,
                            const std::vector<Shape>& shapes, uint64_t seed) {
  int checked = 0;
  uint64_t index = 0;
  for (const char* dtype : dtypes)
    for (const Shape& s : shapes)
      for (const char* layout : {"half", "interleaved"})
        for (int padded = 0; padded < 2; ++padded, ++index) {
          std::string text = fmt::format("qkv {} rows={} hidden={} heads={} kvheads={} dim={} layout={} eps=1e-5", dtype,
                                         s.rows, s.hidden, s.heads, s.kv_heads, s.dim, layout);
          if (padded) {
            const int64_t out = (s.heads + 2 * s.kv_heads) * s.dim;
            text += fmt::format(" ldx={} ldw={} ldy={} theta=10000 maxpos=4096", s.hidden + 3, s.hidden + 5, out + 7);
          }
          CAPTURE(text);
          ++checked;
          test::check_problem_against_reference(test::shipped_context(), kernel, parse_problem(text), seed + index);
        }
  return checked;
}

}  // namespace

TEST_CASE("cpu.qkv_fused matches the reference: every dtype, decode and small batches, odd sizes, both layouts, padded strides") {
  const KernelRecord* kernel = qkv_fused_here();
  if (kernel == nullptr) return;
  CHECK(check_against_reference(*kernel, {"f32", "f16", "bf16"}, kShapes, 700) == 3 * 9 * 2 * 2);
}

TEST_CASE("cpu.qkv_bf16_avx512 matches the reference: decode and small batches, tails of the 32-pair steps, both layouts, "
          "padded strides") {
  const KernelRecord* kernel = qkv_bf16_avx512_here();
  if (kernel == nullptr) return;
  // hidden 8, 40 and 72: a masked tail of vdpbf16ps's 32 pairs, alone and after one or two whole
  // steps; 6 and 17 rows leave blocks of two and one after the blocks of four; 30 weight rows end
  // in a chunk of 14, single rows after the passes of 8 and of 4.
  std::vector<Shape> shapes = kShapes;
  for (const Shape& tail : {Shape{6, 8, 3, 1, 6}, Shape{2, 40, 4, 2, 8}, Shape{17, 72, 4, 2, 16}}) shapes.push_back(tail);
  CHECK(check_against_reference(*kernel, {"bf16"}, shapes, 800) == 12 * 2 * 2);
  std::string why;
  CHECK_FALSE(kernel_supports(*kernel, parse_problem("qkv f32 rows=1 hidden=8 heads=1 dim=2").problem, &why));
  CHECK(why.find("bf16 only") != std::string::npos);
  CHECK_FALSE(kernel_supports(*kernel, parse_problem("qkv bf16 rows=65 hidden=8 heads=2 kvheads=1 dim=4").problem, &why));
  CHECK(why.find("rows above 64") != std::string::npos);
  for (const char* problem : {"qkv bf16 rows=1 hidden=256 heads=8 kvheads=2 dim=32",
                              "qkv bf16 rows=17 hidden=255 heads=5 kvheads=3 dim=130 layout=interleaved ldx=260 ldw=256 ldy=1500"}) {
    CAPTURE(problem);
    const Verdict v = test::shipped_context().gate().verdict(*kernel, parse_problem(problem).problem);
    CAPTURE(v.detail);
    CHECK(v.passed);
  }
}

TEST_CASE("cpu.qkv_fused refuses more than 64 rows, and the gate passes it on decode and odd shapes") {
  const KernelRecord* kernel = qkv_fused_here();
  if (kernel == nullptr) return;
  std::string why;
  CHECK(kernel_supports(*kernel, parse_problem("qkv bf16 rows=64 hidden=8 heads=2 kvheads=1 dim=4").problem, &why));
  CHECK_FALSE(kernel_supports(*kernel, parse_problem("qkv bf16 rows=65 hidden=8 heads=2 kvheads=1 dim=4").problem, &why));
  CHECK(why.find("rows above 64") != std::string::npos);
  for (const char* problem :
       {"qkv bf16 rows=1 hidden=256 heads=8 kvheads=2 dim=32", "qkv f32 rows=3 hidden=7 heads=3 kvheads=1 dim=6 layout=interleaved",
        "qkv f16 rows=5 hidden=33 heads=2 kvheads=2 dim=34 ldx=40 ldw=37 ldy=210",
        "qkv bf16 rows=17 hidden=255 heads=5 kvheads=3 dim=130 layout=interleaved ldx=260 ldw=256 ldy=1500"}) {
    CAPTURE(problem);
    const Verdict v = test::shipped_context().gate().verdict(*kernel, parse_problem(problem).problem);
    CAPTURE(v.detail);
    CHECK(v.passed);
  }
}
