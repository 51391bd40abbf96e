// The problem syntax and canonical keys.
#include "common/failure.hpp"
#include "problem/op.hpp"
#include "problem/op_table.hpp"
#include "problem/problem.hpp"
#include "problem/problem_cost.hpp"
#include "problem/problem_text.hpp"

#include <doctest/doctest.h>

using namespace arbiter;

TEST_CASE("parse: the issue's example and defaults") {
  const ParsedProblem parsed = parse_problem("gemm bf16 m=128 n=4096 k=4096 tb=1 act=gelu");
  const arb_problem& p = parsed.problem;
  CHECK(p.op == ARB_OP_GEMM);
  CHECK(p.dtype == ARB_DTYPE_BF16);
  CHECK(p.m == 128);
  CHECK(p.n == 4096);
  CHECK(p.k == 4096);
  CHECK(p.trans_a == 0);
  CHECK(p.trans_b == 1);
  CHECK(p.activation == ARB_ACT_GELU_ERF);  // "gelu" is the exact form, as in PyTorch
  CHECK(p.lda == 4096);
  CHECK(p.ldb == 4096);  // B stored [n, k]
  CHECK(p.ldd == 4096);
  CHECK(p.has_c == 0);
  CHECK(p.batch == 1);
  CHECK(p.alignment == 256);
  CHECK(p.device_type == kDLCPU);
  CHECK(parsed.alpha == 1.0f);
}

TEST_CASE("parse: alignment follows the row strides in bytes") {
  CHECK(parse_problem("gemm f32 m=3 n=5 k=7").problem.alignment == 4);
  CHECK(parse_problem("gemm f16 m=3 n=8 k=8").problem.alignment == 16);
  CHECK(parse_problem("softmax bf16 rows=2 cols=64").problem.alignment == 128);
  CHECK(parse_problem("softmax bf16 rows=2 cols=64 align=16").problem.alignment == 16);
  CHECK_THROWS_AS(parse_problem("softmax bf16 rows=2 cols=64 align=12"), Failure);
}

TEST_CASE("problem keys round-trip through the parser") {
  for (const char* text : {"gemm bf16 m=128 n=4096 k=4096 tb=1 act=gelu",
                           "gemm f32 m=3 n=5 k=7 ta=1 act=silu bias=1 beta=0.5 ldc=9",
                           "gemm f16 m=64 n=64 k=64 beta=1 inplace=1 act=gelu_tanh lda=72",
                           "rmsnorm f16 rows=32 cols=4096 residual=1 ldr=5000",
                           "rmsnorm f32 rows=1 cols=7", "softmax f32 rows=64 cols=32000 ldy=32008",
                           "softmax f32 rows=1 cols=8 device=cuda:1", "swiglu bf16 rows=4 cols=14336 fused=1",
                           "swiglu f16 rows=3 cols=7 ldgate=9 ldup=8 ldy=10",
                           "rope bf16 tokens=16 heads=32 dim=128", "rope f32 tokens=1 heads=8 dim=64 layout=interleaved "
                           "theta=10000.5 maxpos=131072 ldhead=80 ldtoken=1000"}) {
    CAPTURE(text);
    const arb_problem p = parse_problem(text).problem;
    const std::string key = problem_key(p);
    CAPTURE(key);
    const arb_problem again = parse_problem(key).problem;
    CHECK(same_problem(p, again));
    CHECK(problem_hash(p) == problem_hash(again));
    CHECK(problem_key(again) == key);
  }
  CHECK(problem_key(parse_problem("gemm f32 m=8 n=16 k=4").problem) ==
        "gemm f32 m=8 n=16 k=4 ta=0 tb=0 act=none bias=0 beta=0 lda=4 ldb=16 ldd=16 align=16 device=cpu");
}

TEST_CASE("different problems have different keys") {
  const arb_problem a = parse_problem("gemm f32 m=8 n=16 k=4").problem;
  for (const char* other : {"gemm f32 m=8 n=16 k=5", "gemm f16 m=8 n=16 k=4", "gemm f32 m=8 n=16 k=4 tb=1",
                            "gemm f32 m=8 n=16 k=4 act=relu", "gemm f32 m=8 n=16 k=4 bias=1",
                            "gemm f32 m=8 n=16 k=4 beta=2", "gemm f32 m=8 n=16 k=4 ldd=17",
                            "gemm f32 m=8 n=16 k=4 device=cuda"}) {
    CAPTURE(other);
    const arb_problem b = parse_problem(other).problem;
    CHECK_FALSE(same_problem(a, b));
    CHECK(problem_key(a) != problem_key(b));
  }
}

TEST_CASE("parse errors name the offending word") {
  auto message = [](const char* text) {
    try {
      parse_problem(text);
    } catch (const Failure& e) {
      CHECK(e.status() == ARB_ERR_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message("") .find("expected '<op> <dtype>") != std::string::npos);
  CHECK(message("gemm") .find("expected '<op> <dtype>") != std::string::npos);
  CHECK(message("gemm f32 m=1 n=1 k=1 m=2").find("'m' given twice") != std::string::npos);
  CHECK(message("gemm f32 m=1 n=1 k=1 act=tanh").find("unknown activation 'tanh'") != std::string::npos);
  CHECK(message("gemm f32 m=1 n=1 k=1 tb=2").find("'tb=2': expected 0 or 1") != std::string::npos);
  CHECK(message("gemm f32 m=1 n=1 k=1 beta=x").find("'beta=x': expected a number") != std::string::npos);
  CHECK(message("gemm f32 m=1 n=1 k=1 inplace=1").find("inplace=1 needs a non-zero beta") != std::string::npos);
  CHECK(message("gemm f32 m=0 n=1 k=1").find("sizes must be >= 1") != std::string::npos);
  CHECK(message("softmax f32 rows=2 cols=8 residual=1").find("unknown field 'residual'") != std::string::npos);
  CHECK(message("softmax f32 rows=2 cols=8 device=tpu").find("unknown device 'tpu'") != std::string::npos);
  CHECK(message("softmax f32 rows=2 cols=8 ldx=4").find("ldx = 4 is below") != std::string::npos);
  CHECK(message("gemm f32 m=1 n=1 k=1 bogus").find("'bogus': expected key=value") != std::string::npos);
  CHECK(message("softmax f32 rows=2 cols=8 beta=7").find("unknown field 'beta'") != std::string::npos);
  CHECK(message("gemm f32 m=1 n=1 k=1 eps=0.1").find("unknown field 'eps'") != std::string::npos);
  CHECK(message("rmsnorm f32 rows=2 cols=8 eps=-1").find("eps=-1 must be >= 0") != std::string::npos);
  CHECK(message("swiglu f32 rows=2 cols=8 ldup=7").find("ldup = 7 is below") != std::string::npos);
  CHECK(message("swiglu f32 rows=2 cols=8 ldx=8").find("unknown field 'ldx'") != std::string::npos);
  CHECK(message("swiglu f32 rows=2").find("cols") != std::string::npos);
  CHECK(problem_key(parse_problem("rope f16 tokens=2 heads=4 dim=8").problem) ==
        "rope f16 tokens=2 heads=4 dim=8 layout=half theta=500000 maxpos=8192 ldhead=8 ldtoken=32 align=16 device=cpu");
  CHECK(message("rope f32 tokens=2 heads=4 dim=7").find("dim = 7 must be even") != std::string::npos);
  CHECK(message("rope f32 tokens=2 heads=4 dim=8 ldhead=6").find("ldhead = 6 is below") != std::string::npos);
  CHECK(message("rope f32 tokens=2 heads=4 dim=8 ldtoken=30").find("ldtoken = 30 is below the row length 32") !=
        std::string::npos);
  CHECK(message("rope f32 tokens=2 heads=4 dim=8 layout=neox").find("expected half or interleaved") != std::string::npos);
  CHECK(message("rope f32 tokens=2 heads=4 dim=8 theta=0.5").find("theta = 0.5 must be") != std::string::npos);
  CHECK(message("rope f32 tokens=2 heads=4 dim=8 maxpos=0").find("max_position = 0") != std::string::npos);
  CHECK(message("rope f32 tokens=2 heads=4 dim=8 maxpos=16777217").find("max_position = 16777217") != std::string::npos);
  CHECK(message("rope f32 tokens=2 heads=4611686018427387904 dim=8").find("overflow") != std::string::npos);
}

TEST_CASE("the work of a problem: flops and the bytes every kernel must move") {
  auto problem = [](const char* text) { return parse_problem(text).problem; };
  CHECK(flop_count(problem("gemm bf16 m=16 n=4096 k=4096 tb=1")) == 2.0 * 16 * 4096 * 4096);
  CHECK(bytes_moved(problem("gemm bf16 m=16 n=4096 k=4096 tb=1")) == 2.0 * (16 * 4096 + 4096 * 4096 + 16 * 4096));
  // C is read (a separate C, or D itself in place), and the bias.
  CHECK(bytes_moved(problem("gemm f32 m=2 n=3 k=5 beta=1 bias=1")) == 4.0 * (2 * 5 + 5 * 3 + 2 * 3 + 2 * 3 + 3));
  CHECK(bytes_moved(problem("gemm f32 m=2 n=3 k=5 beta=1 inplace=1")) == 4.0 * (2 * 5 + 5 * 3 + 2 * 3 + 2 * 3));
  CHECK(flop_count(problem("softmax f16 rows=4 cols=1000")) == 0);
  CHECK(bytes_moved(problem("softmax f16 rows=4 cols=1000")) == 2.0 * 2 * 4000);
  CHECK(bytes_moved(problem("rmsnorm bf16 rows=4 cols=1000")) == 2.0 * (2 * 4000 + 1000));
  CHECK(bytes_moved(problem("rmsnorm f32 rows=4 cols=1000 residual=1")) == 4.0 * (4 * 4000 + 1000));
  CHECK(flop_count(problem("swiglu bf16 rows=4 cols=1000")) == 0);
  CHECK(bytes_moved(problem("swiglu bf16 rows=4 cols=1000 fused=1")) == 2.0 * 3 * 4000);
  CHECK(flop_count(problem("rope bf16 tokens=4 heads=8 dim=128")) == 0);
  CHECK(bytes_moved(problem("rope bf16 tokens=4 heads=8 dim=128 ldhead=200")) == 2.0 * 2 * 4 * 8 * 128 + 4 * 4);
}

TEST_CASE("swiglu's fused shorthand is the two halves of one [rows, 2 cols] output") {
  const arb_problem fused = parse_problem("swiglu f16 rows=3 cols=100 fused=1").problem;
  CHECK(fused.ld_gate == 200);
  CHECK(fused.ld_up == 200);
  CHECK(fused.ld_y == 100);
  CHECK(same_problem(fused, parse_problem("swiglu f16 rows=3 cols=100 ldgate=200 ldup=200").problem));
  CHECK_FALSE(same_problem(fused, parse_problem("swiglu f16 rows=3 cols=100").problem));
}

// The selection cache hashes and compares only an op's words (Op::problem_words()): every
// problem of the op, however built, must be zero outside them.
TEST_CASE("problems are zero outside their op's words") {
  std::vector<arb_problem> problems;
  for (const char* text : {"gemm bf16 m=128 n=4096 k=4096 tb=1 act=gelu",
                           "gemm f32 m=3 n=5 k=7 ta=1 act=silu bias=1 beta=0.5 ldc=9",
                           "gemm f16 m=64 n=64 k=64 beta=1 inplace=1 act=gelu_tanh lda=72",
                           "rmsnorm f16 rows=32 cols=4096 residual=1 ldr=5000", "rmsnorm f32 rows=1 cols=7",
                           "softmax f32 rows=64 cols=32000 ldy=32008", "softmax f32 rows=1 cols=8 device=cuda:1"})
    problems.push_back(parse_problem(text).problem);
  for (const Op* op : all_ops()) {
    CAPTURE(op->name());
    CHECK((op->problem_words() & kProblemHeaderWords) == kProblemHeaderWords);
    problems.push_back(empty_problem(*op));
    const arb_problem example = parse_problem(std::string(op->name()) + " f32 " + op->example_fields()).problem;
    problems.push_back(example);
    problems.push_back(parse_problem(problem_key(example)).problem);
    const Sizes verified = op->verification_sizes(example);
    problems.push_back(op->resized(example, verified));
    for (const SizedShape& shape : op->edge_shapes(verified)) problems.push_back(op->resized(example, shape.sizes));
  }
  for (const arb_problem& p : problems) {
    CAPTURE(problem_key(p));
    const ProblemWords words = find_op(p.op)->problem_words();
    CHECK(problem_within(p, words));
    CHECK(problem_hash(p, words) == problem_hash(p));  // zero words add nothing
    for (const arb_problem& q : problems) CHECK(same_problem(p, q, words) == same_problem(p, q));
  }
  // A word outside the op's is seen.
  arb_problem stray = parse_problem("softmax f32 rows=2 cols=8").problem;
  stray.m = 1;
  CHECK_FALSE(problem_within(stray, find_op(ARB_OP_SOFTMAX)->problem_words()));
  CHECK(problem_words(0, 1) == 1u);
  CHECK(problem_words(8, 24) == 6u);
  CHECK(problem_words(4, 12) == 3u);
}
