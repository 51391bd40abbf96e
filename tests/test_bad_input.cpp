// Bad input to every public function: the right status and a message that names the
// problem. Nothing aborts, nothing is written.
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using arbiter::test::PublicContext;
using arbiter::test::Tensor;

namespace {

// Operands of a valid 4x6x5 f32 gemm with bias, and of rmsnorm/softmax on 3x5.
struct Operands {
  std::vector<float> a = std::vector<float>(20, 0.5f), b = std::vector<float>(30, 0.25f), d = std::vector<float>(24, NAN),
                     c = std::vector<float>(24, 1.0f), bias = std::vector<float>(6, 0.1f), x = std::vector<float>(15, 1.0f),
                     y = std::vector<float>(15, NAN), w = std::vector<float>(5, 1.0f);
};

}  // namespace

TEST_CASE("status strings and the last error") {
  for (int s = ARB_OK; s <= ARB_ERR_TABLE; ++s) CHECK(std::string(arb_status_string(static_cast<arb_status>(s))).rfind("ARB_", 0) == 0);
  CHECK(std::string(arb_status_string(1234)) == "ARB_ERR_UNKNOWN");
  CHECK(arb_gemm(nullptr, nullptr, nullptr) == ARB_ERR_INVALID_ARGUMENT);
  CHECK(std::string(arb_last_error()) != "");
  CHECK(arb_context_destroy(nullptr) == ARB_OK);
  CHECK(std::string(arb_last_error()).empty());  // cleared by a success
  CHECK(std::string(arb_library_version()).find('.') != std::string::npos);
}

TEST_CASE("arb_context_create rejects bad options") {
  arb_context ctx = reinterpret_cast<arb_context>(0x1);
  CHECK_STATUS(arb_context_create(nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "context (the output) is NULL");
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.struct_size = 4;
  CHECK_STATUS(arb_context_create(&options, &ctx), ARB_ERR_INVALID_ARGUMENT, "struct_size");
  CHECK(ctx == nullptr);
  options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_path = "a.toml";
  options.config_toml = "";
  CHECK_STATUS(arb_context_create(&options, &ctx), ARB_ERR_INVALID_ARGUMENT, "not both");
  options.config_toml = nullptr;
  options.config_path = "/nonexistent/arbiter.toml";
  CHECK_STATUS(arb_context_create(&options, &ctx), ARB_ERR_CONFIG, "/nonexistent/arbiter.toml");
  options.config_path = nullptr;
  options.config_toml = "log_level = 3";
  CHECK_STATUS(arb_context_create(&options, &ctx), ARB_ERR_CONFIG, "<config_toml>:1:13");
  CHECK(ctx == nullptr);
}

TEST_CASE("arb_gemm: null, dtype, shape, stride and value errors") {
  PublicContext pc;
  Operands o;
  Tensor a(o.a.data(), {4, 5}), b(o.b.data(), {5, 6}), d(o.d.data(), {4, 6}), c(o.c.data(), {4, 6}), bias(o.bias.data(), {6});
  auto args = [&] {
    arb_gemm_args g = ARB_GEMM_ARGS_INIT;
    g.a = &a.t;
    g.b = &b.t;
    g.d = &d.t;
    return g;
  };
  arb_gemm_args g = args();
  REQUIRE(arb_gemm(pc.ctx, &g, nullptr) == ARB_OK);  // the valid baseline
  CHECK(o.d[0] == doctest::Approx(0.625f));

  CHECK_STATUS(arb_gemm(nullptr, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "context is NULL");
  CHECK_STATUS(arb_gemm(pc.ctx, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "args is NULL");
  g.struct_size = 16;
  CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "struct_size");
  g = args();
  g.a = nullptr;
  CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "a is NULL");
  g = args();
  g.d = nullptr;
  CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "d is NULL");
  {
    Tensor no_data(nullptr, {4, 5});
    g = args();
    g.a = &no_data.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "a.data is NULL");
  }
  {
    Tensor ints(o.a.data(), {4, 5}, DLDataType{kDLInt, 32, 1});
    g = args();
    g.a = &ints.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "unsupported dtype");
  }
  {
    Tensor half(o.b.data(), {5, 6}, DLDataType{kDLFloat, 16, 1});
    g = args();
    g.b = &half.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "b has dtype f16, but the first operand has f32");
  }
  {
    Tensor wrong_k(o.b.data(), {4, 6});
    g = args();
    g.b = &wrong_k.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "b must be [5, 6], got [4, 6]");
  }
  {
    Tensor wrong_d(o.d.data(), {6, 4});
    g = args();
    g.d = &wrong_d.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "d must be [4, 6]");
  }
  {
    Tensor column_major(o.a.data(), {4, 5}, DLDataType{kDLFloat, 32, 1}, {1, 4});
    g = args();
    g.a = &column_major.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "last dimension must be contiguous");
  }
  {
    Tensor overlapping_rows(o.a.data(), {4, 5}, DLDataType{kDLFloat, 32, 1}, {3, 1});
    g = args();
    g.a = &overlapping_rows.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "row stride 3 is below the row length 5");
  }
  {
    Tensor batched(o.a.data(), {1, 4, 5});
    g = args();
    g.a = &batched.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_UNSUPPORTED, "batched gemm");
  }
  {
    Tensor empty(o.a.data(), {0, 5});
    g = args();
    g.a = &empty.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "sizes must be >= 1");
  }
  {
    Tensor gpu(o.d.data(), {4, 6});
    gpu.t.device = {kDLCUDA, 0};
    g = args();
    g.d = &gpu.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "d is on cuda:0");
  }
  {
    Tensor unknown_device(o.a.data(), {4, 5});
    const int32_t opencl_or_worse = 99;  // not a DLDeviceType value at all
    std::memcpy(&unknown_device.t.device.device_type, &opencl_or_worse, sizeof opencl_or_worse);
    g = args();
    g.a = &unknown_device.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_UNSUPPORTED, "device type 99 is not supported");
  }
  {
    Tensor lanes(o.a.data(), {4, 5}, DLDataType{kDLFloat, 32, 4});
    g = args();
    g.a = &lanes.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "lanes");
  }
  g = args();
  g.beta = 1.0f;
  CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "beta != 0 but c is NULL");
  {
    Tensor short_bias(o.bias.data(), {5});
    g = args();
    g.bias = &short_bias.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "bias must be 1-D of size n = 6");
  }
  g = args();
  g.activation = 99;
  CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "unknown activation");
  g = args();
  g.trans_a = 2;
  CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "trans_a must be 0 or 1");
  {
    Tensor c_same_memory(o.d.data(), {4, 6}, DLDataType{kDLFloat, 32, 1}, {5, 1});
    g = args();
    g.beta = 1.0f;
    g.c = &c_same_memory.t;  // c shares d's memory: only exactly d (same strides) is allowed
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "row stride 5 is below");
    Tensor c_other_stride(o.d.data(), {2, 6}, DLDataType{kDLFloat, 32, 1}, {12, 1});
    Tensor d_two_rows(o.d.data(), {2, 6});
    Tensor a_two_rows(o.a.data(), {2, 5});
    g.a = &a_two_rows.t;
    g.d = &d_two_rows.t;
    g.c = &c_other_stride.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &g, nullptr), ARB_ERR_INVALID_ARGUMENT, "c and d share memory but have different row strides");
  }
  for (float v : o.c) CHECK(v == 1.0f);  // no failed call wrote anything it should not
  g = args();
  g.c = &c.t;
  g.beta = 0.5f;
  g.bias = &bias.t;
  CHECK(arb_gemm(pc.ctx, &g, nullptr) == ARB_OK);
  CHECK(o.d[0] == doctest::Approx(0.625f + 0.5f + 0.1f));
}

TEST_CASE("arb_rmsnorm and arb_softmax: shape, stride and aliasing errors") {
  PublicContext pc;
  Operands o;
  Tensor x(o.x.data(), {3, 5}), y(o.y.data(), {3, 5}), w(o.w.data(), {5});
  arb_rmsnorm_args r = ARB_RMSNORM_ARGS_INIT;
  r.x = &x.t;
  r.weight = &w.t;
  r.y = &y.t;
  REQUIRE(arb_rmsnorm(pc.ctx, &r, nullptr) == ARB_OK);
  CHECK(o.y[0] == doctest::Approx(1.0f).epsilon(1e-5));

  CHECK_STATUS(arb_rmsnorm(pc.ctx, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "args is NULL");
  arb_rmsnorm_args bad = r;
  bad.weight = nullptr;
  CHECK_STATUS(arb_rmsnorm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "weight is NULL");
  {
    Tensor w4(o.w.data(), {4});
    bad = r;
    bad.weight = &w4.t;
    CHECK_STATUS(arb_rmsnorm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "weight must be 1-D of size 5");
  }
  {
    Tensor y_wrong(o.y.data(), {5, 3});
    bad = r;
    bad.y = &y_wrong.t;
    CHECK_STATUS(arb_rmsnorm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y must have the shape of x");
  }
  bad = r;
  bad.y = &x.t;
  CHECK_STATUS(arb_rmsnorm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps x in memory");
  bad = r;
  bad.eps = -1.0f;
  CHECK_STATUS(arb_rmsnorm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "eps must be >= 0");
  {
    // 3-D [3, 1, 5] whose leading dims cannot collapse into one row stride.
    std::vector<float> big(64, 1.0f);
    Tensor x3(big.data(), {3, 2, 5}, DLDataType{kDLFloat, 32, 1}, {20, 6, 1});
    Tensor y3(o.y.data(), {3, 5});
    bad = r;
    bad.x = &x3.t;
    CHECK_STATUS(arb_rmsnorm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "do not collapse into rows");
  }
  {
    Tensor r_wrong(o.c.data(), {3, 4});
    bad = r;
    bad.residual = &r_wrong.t;
    CHECK_STATUS(arb_rmsnorm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "residual must have the shape of x");
  }

  arb_softmax_args s = ARB_SOFTMAX_ARGS_INIT;
  s.x = &x.t;
  s.y = &y.t;
  REQUIRE(arb_softmax(pc.ctx, &s, nullptr) == ARB_OK);
  CHECK(o.y[0] == doctest::Approx(0.2f));
  CHECK_STATUS(arb_softmax(nullptr, &s, nullptr), ARB_ERR_INVALID_ARGUMENT, "context is NULL");
  arb_softmax_args sbad = s;
  sbad.y = nullptr;
  CHECK_STATUS(arb_softmax(pc.ctx, &sbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y is NULL");
  sbad = s;
  sbad.y = &x.t;
  CHECK_STATUS(arb_softmax(pc.ctx, &sbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps x in memory");
  {
    Tensor bf(o.y.data(), {3, 5}, DLDataType{kDLBfloat, 16, 1});
    sbad = s;
    sbad.y = &bf.t;
    CHECK_STATUS(arb_softmax(pc.ctx, &sbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y has dtype bf16");
  }
  {
    Tensor scalar(o.x.data(), {});
    sbad = s;
    sbad.x = &scalar.t;
    CHECK_STATUS(arb_softmax(pc.ctx, &sbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "at least one dimension");
  }
  sbad = s;
  sbad.struct_size = 8;
  CHECK_STATUS(arb_softmax(pc.ctx, &sbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "struct_size");
}

TEST_CASE("arb_swiglu: separate and fused gate/up, shapes and aliasing") {
  PublicContext pc;
  std::vector<float> gate(30), up(15, 2.0f), y(15, NAN), fused_y(15, NAN);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = 0.25f * static_cast<float>(i) - 3.0f;
  Tensor g(gate.data(), {3, 5}), u(up.data(), {3, 5}), out(y.data(), {3, 5});
  arb_swiglu_args a = ARB_SWIGLU_ARGS_INIT;
  a.gate = &g.t;
  a.up = &u.t;
  a.y = &out.t;
  REQUIRE(arb_swiglu(pc.ctx, &a, nullptr) == ARB_OK);
  for (size_t i = 0; i < 15; ++i)
    CHECK(y[i] == doctest::Approx(gate[i] / (1.0 + std::exp(-gate[i])) * 2.0).epsilon(1e-5));

  // One [3, 10] tensor: the gate is each row's first 5 columns, up its last 5.
  Tensor both(gate.data(), {3, 10}), fused_out(fused_y.data(), {3, 5});
  arb_swiglu_args f = ARB_SWIGLU_ARGS_INIT;
  f.gate = &both.t;
  f.y = &fused_out.t;
  REQUIRE(arb_swiglu(pc.ctx, &f, nullptr) == ARB_OK);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) {
      const double gv = gate[r * 10 + c], uv = gate[r * 10 + 5 + c];
      CHECK(fused_y[r * 5 + c] == doctest::Approx(gv / (1.0 + std::exp(-gv)) * uv).epsilon(1e-5).scale(1e-6));
    }

  CHECK_STATUS(arb_swiglu(pc.ctx, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "arb_swiglu: args is NULL");
  CHECK_STATUS(arb_swiglu(nullptr, &a, nullptr), ARB_ERR_INVALID_ARGUMENT, "context is NULL");
  arb_swiglu_args bad = a;
  bad.struct_size = 24;
  CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "struct_size = 24 is below the minimum 32");
  bad = a;
  bad.gate = nullptr;
  CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "gate is NULL");
  bad = a;
  bad.y = nullptr;
  CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y is NULL");
  {
    Tensor u_wrong(up.data(), {5, 3});
    bad = a;
    bad.up = &u_wrong.t;
    CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "up must have the shape of gate");
  }
  {
    Tensor bf(up.data(), {3, 5}, DLDataType{kDLBfloat, 16, 1});
    bad = a;
    bad.up = &bf.t;
    CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "up has dtype bf16");
  }
  bad = a;
  bad.y = &g.t;
  CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps gate in memory");
  bad = a;
  bad.y = &u.t;
  CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps up in memory");
  {
    // In place into the fused tensor's up half: y's span lies inside gate's.
    Tensor into_up(gate.data() + 5, {3, 5}, DLDataType{kDLFloat, 32, 1}, {10, 1});
    bad = f;
    bad.y = &into_up.t;
    CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps gate in memory");
  }
  {
    Tensor odd(gate.data(), {3, 9});
    bad = f;
    bad.gate = &odd.t;
    CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "must be even when up is NULL");
  }
  {
    bad = f;  // y [3, 10]: it must be gate's shape with the last dimension halved
    std::vector<float> other(30);
    Tensor wide(other.data(), {3, 10});
    bad.y = &wide.t;
    CHECK_STATUS(arb_swiglu(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "last dimension halved");
  }
  {
    // A CPU call with a stream.
    int stream_marker = 0;
    CHECK_STATUS(arb_swiglu(pc.ctx, &a, &stream_marker), ARB_ERR_INVALID_ARGUMENT, "stream must be NULL");
  }
  CHECK(std::all_of(y.begin(), y.end(), [](float v) { return std::isfinite(v); }));
}

// Sizes and addresses are checked before anything is touched: every product of shape,
// stride and element size is checked for overflow, and an output may share no memory with
// an input (but c = d exactly). A failed call writes nothing.
TEST_CASE("arb_gemm, arb_rmsnorm and arb_softmax: overflowing sizes, wild addresses and overlapping operands") {
  PublicContext pc;
  Operands o;
  Tensor a(o.a.data(), {4, 5}), b(o.b.data(), {5, 6}), d(o.d.data(), {4, 6}), bias(o.bias.data(), {6});
  arb_gemm_args g = ARB_GEMM_ARGS_INIT;
  g.a = &a.t;
  g.b = &b.t;
  g.d = &d.t;
  g.bias = &bias.t;
  REQUIRE(arb_gemm(pc.ctx, &g, nullptr) == ARB_OK);
  std::fill(o.d.begin(), o.d.end(), -7.0f);
  arb_gemm_args bad = g;
  {
    // m = 2^61: the rows of a fit an int64, their bytes do not.
    Tensor huge(o.a.data(), {int64_t(1) << 61, 5});
    Tensor huge_d(o.d.data(), {int64_t(1) << 61, 6});
    bad = g;
    bad.a = &huge.t;
    bad.d = &huge_d.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "span more memory than an address can reach");
  }
  {
    Tensor max_rows(o.a.data(), {INT64_MAX, 5});
    bad = g;
    bad.a = &max_rows.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "a:");
  }
  {
    Tensor max_stride(o.a.data(), {4, 5}, DLDataType{kDLFloat, 32, 1}, {INT64_MAX, 1});
    bad = g;
    bad.a = &max_stride.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "span more memory than an address can reach");
  }
  {
    // Leading dimensions whose product overflows (rmsnorm collapses them into rows).
    std::vector<float> one(5, 1.0f), out(5);
    Tensor x(one.data(), {int64_t(1) << 40, int64_t(1) << 40, 5}), y(out.data(), {int64_t(1) << 40, int64_t(1) << 40, 5});
    arb_softmax_args s = ARB_SOFTMAX_ARGS_INIT;
    s.x = &x.t;
    s.y = &y.t;
    CHECK_STATUS(arb_softmax(pc.ctx, &s, nullptr), ARB_ERR_INVALID_ARGUMENT, "the product of its sizes overflows");
  }
  {
    Tensor wrapped(o.a.data(), {4, 5});
    wrapped.t.byte_offset = ~uint64_t(0) - 8;
    bad = g;
    bad.a = &wrapped.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "byte_offset");
  }
  {
    Tensor misaligned(o.a.data(), {4, 4});
    misaligned.t.byte_offset = 2;  // f32 at an odd half-word
    bad = g;
    bad.a = &misaligned.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "not aligned for its dtype (address % 4 = 2)");
  }
  {
    Tensor many(o.a.data(), {4, 5});
    many.t.ndim = 1000;
    bad = g;
    bad.a = &many.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "ndim = 1000");
    many.t.ndim = -1;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "ndim = -1");
  }
  bad = g;
  bad.reserved = 1;
  CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "reserved must be 0");

  // Overlaps: d with b exactly, d with a partly, d with bias, c partly over d.
  {
    std::vector<float> shared(64, 0.5f);
    Tensor b_in(shared.data(), {5, 6}), d_on_b(shared.data(), {4, 6});
    bad = g;
    bad.b = &b_in.t;
    bad.d = &d_on_b.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "d overlaps b in memory");
    Tensor a_in(shared.data(), {4, 5}), d_past_a(shared.data() + 10, {4, 6});
    bad = g;
    bad.a = &a_in.t;
    bad.d = &d_past_a.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "d overlaps a in memory");
    Tensor bias_in_d(o.d.data() + 18, {6});
    bad = g;
    bad.bias = &bias_in_d.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "d overlaps bias in memory");
    Tensor c_shifted(o.d.data() + 1, {4, 6}, DLDataType{kDLFloat, 32, 1}, {6, 1});
    bad = g;
    bad.beta = 1.0f;
    bad.c = &c_shifted.t;
    bad.d = &d.t;
    CHECK_STATUS(arb_gemm(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "d overlaps c in memory");
  }
  for (float v : o.d) CHECK(v == -7.0f);  // no failed call wrote anything

  // rmsnorm: y over weight, x (written in place with a residual) over the residual.
  Tensor x(o.x.data(), {3, 5}), y(o.y.data(), {3, 5}), w(o.w.data(), {5});
  arb_rmsnorm_args r = ARB_RMSNORM_ARGS_INIT;
  r.x = &x.t;
  r.weight = &w.t;
  r.y = &y.t;
  REQUIRE(arb_rmsnorm(pc.ctx, &r, nullptr) == ARB_OK);
  {
    Tensor w_in_y(o.y.data() + 10, {5});
    arb_rmsnorm_args rbad = r;
    rbad.weight = &w_in_y.t;
    CHECK_STATUS(arb_rmsnorm(pc.ctx, &rbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps weight in memory");
    Tensor residual_on_x(o.x.data(), {3, 5});
    rbad = r;
    rbad.residual = &residual_on_x.t;
    CHECK_STATUS(arb_rmsnorm(pc.ctx, &rbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "x overlaps residual in memory");
    rbad = r;
    rbad.reserved = 3;
    CHECK_STATUS(arb_rmsnorm(pc.ctx, &rbad, nullptr), ARB_ERR_INVALID_ARGUMENT, "reserved must be 0");
  }
  {
    // softmax: y one row into x.
    std::vector<float> rows(30, 1.0f);
    Tensor x_rows(rows.data(), {3, 5}), y_rows(rows.data() + 5, {3, 5});
    arb_softmax_args s = ARB_SOFTMAX_ARGS_INIT;
    s.x = &x_rows.t;
    s.y = &y_rows.t;
    CHECK_STATUS(arb_softmax(pc.ctx, &s, nullptr), ARB_ERR_INVALID_ARGUMENT, "y overlaps x in memory");
    for (float v : rows) CHECK(v == 1.0f);
  }
}

TEST_CASE("arb_explain and arb_explain_problem: buffer sizes and bad problems") {
  PublicContext pc;
  size_t length = 0;
  CHECK_STATUS(arb_explain_problem(pc.ctx, "gemm f32 m=8 n=8 k=8", nullptr, 0, &length), ARB_ERR_BUFFER_TOO_SMALL,
               "bytes");
  CHECK(length > 20);
  std::string text(length, '\0');
  CHECK(arb_explain_problem(pc.ctx, "gemm f32 m=8 n=8 k=8", text.data(), 10, &length) == ARB_ERR_BUFFER_TOO_SMALL);
  REQUIRE(arb_explain_problem(pc.ctx, "gemm f32 m=8 n=8 k=8", text.data(), text.size(), &length) == ARB_OK);
  CHECK(text.find(arbiter::test::preferred_small_gemm()) != std::string::npos);
  CHECK(text.back() == '\0');

  CHECK_STATUS(arb_explain_problem(pc.ctx, nullptr, nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "problem is NULL");
  CHECK_STATUS(arb_explain_problem(pc.ctx, "conv f32 m=1", nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "unknown op 'conv'");
  CHECK_STATUS(arb_explain_problem(pc.ctx, "gemm f64 m=1 n=1 k=1", nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "unknown dtype 'f64'");
  CHECK_STATUS(arb_explain_problem(pc.ctx, "gemm f32 m=1 n=1", nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "needs 'k='");
  CHECK_STATUS(arb_explain_problem(pc.ctx, "gemm f32 m=1 n=1 k=1 wat=3", nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "unknown field 'wat'");
  CHECK_STATUS(arb_explain_problem(pc.ctx, "gemm f32 m=x n=1 k=1", nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "expected an integer");
  CHECK_STATUS(arb_explain_problem(pc.ctx, "gemm f32 m=4 n=4 k=4 lda=2", nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "lda = 2 is below");
  CHECK_STATUS(arb_explain_problem(nullptr, "gemm f32 m=1 n=1 k=1", nullptr, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "context is NULL");

  Operands o;
  Tensor x(o.x.data(), {3, 5}), y(o.y.data(), {3, 5});
  arb_softmax_args s = ARB_SOFTMAX_ARGS_INIT;
  s.x = &x.t;
  s.y = &y.t;
  char report[4096];
  REQUIRE(arb_explain(pc.ctx, ARB_OP_SOFTMAX, &s, report, sizeof report, &length) == ARB_OK);
  CHECK(std::string(report).find("cpu.softmax") != std::string::npos);
  CHECK_STATUS(arb_explain(pc.ctx, 42, &s, report, sizeof report, &length), ARB_ERR_INVALID_ARGUMENT, "unknown op 42");
  CHECK_STATUS(arb_explain(pc.ctx, ARB_OP_GEMM, nullptr, report, sizeof report, &length), ARB_ERR_INVALID_ARGUMENT, "args is NULL");
}

TEST_CASE("introspection: indices and info structs are checked") {
  PublicContext pc;
  size_t count = 0;
  CHECK_STATUS(arb_plugin_count(pc.ctx, nullptr), ARB_ERR_INVALID_ARGUMENT, "count is NULL");
  REQUIRE(arb_plugin_count(pc.ctx, &count) == ARB_OK);
  arb_plugin_info info = ARB_PLUGIN_INFO_INIT;
  CHECK_STATUS(arb_plugin_get_info(pc.ctx, count, &info), ARB_ERR_INVALID_ARGUMENT, "out of range");
  CHECK_STATUS(arb_plugin_get_info(pc.ctx, 0, nullptr), ARB_ERR_INVALID_ARGUMENT, "info is NULL");
  info.struct_size = 8;
  CHECK_STATUS(arb_plugin_get_info(pc.ctx, 0, &info), ARB_ERR_INVALID_ARGUMENT, "struct_size");
  arb_kernel_info kernel = ARB_KERNEL_INFO_INIT;
  CHECK_STATUS(arb_kernel_get_info(pc.ctx, 0, 1000, &kernel), ARB_ERR_INVALID_ARGUMENT, "kernel index 1000 out of range");
  CHECK_STATUS(arb_plugin_count(nullptr, &count), ARB_ERR_INVALID_ARGUMENT, "context is NULL");
}

TEST_CASE("arb_rope: in place on [tokens, heads, head_dim], positions checked on the CPU") {
  PublicContext pc;
  // Two tokens of three heads of four elements, head stride 5 (one element of gap), as the K
  // columns of a fused output would have; positions 3 and 0.
  std::vector<float> x(2 * 15);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 1.0f;
  const std::vector<float> before = x;
  std::vector<int32_t> pos = {3, 0};
  Tensor xt(x.data(), {2, 3, 4}, DLDataType{kDLFloat, 32, 1}, {15, 5, 1});
  Tensor pt(pos.data(), {2}, DLDataType{kDLInt, 32, 1});
  arb_rope_args a = ARB_ROPE_ARGS_INIT;
  a.x = &xt.t;
  a.positions = &pt.t;
  a.theta = 100.0;
  a.max_position = 16;
  REQUIRE(arb_rope(pc.ctx, &a, nullptr) == ARB_OK);
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 2; ++i) {
      const double angle = 3.0 * (i == 0 ? 1.0 : 0.1);
      const int first = h * 5 + i, second = first + 2;
      CHECK(x[first] == doctest::Approx(before[first] * std::cos(angle) - before[second] * std::sin(angle)).epsilon(1e-5));
      CHECK(x[second] == doctest::Approx(before[second] * std::cos(angle) + before[first] * std::sin(angle)).epsilon(1e-5));
      CHECK(x[15 + first] == before[15 + first]);  // position 0: unturned
    }
  CHECK(x[4] == before[4]);  // the gap between heads

  CHECK_STATUS(arb_rope(pc.ctx, nullptr, nullptr), ARB_ERR_INVALID_ARGUMENT, "arb_rope: args is NULL");
  arb_rope_args bad = a;
  bad.struct_size = 40;
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "struct_size = 40 is below the minimum 48");
  bad = a;
  bad.positions = nullptr;
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "positions is NULL");
  {
    Tensor flat(x.data(), {2, 12});
    bad = a;
    bad.x = &flat.t;
    CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "x must be [..., heads, head_dim]");
  }
  {
    Tensor odd(x.data(), {2, 3, 3}, DLDataType{kDLFloat, 32, 1}, {15, 5, 1});
    bad = a;
    bad.x = &odd.t;
    CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "must be even");
  }
  {
    Tensor overlapping_heads(x.data(), {2, 3, 4}, DLDataType{kDLFloat, 32, 1}, {15, 3, 1});
    bad = a;
    bad.x = &overlapping_heads.t;
    CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "head stride 3 is below head_dim 4");
  }
  {
    Tensor as_float(pos.data(), {2});
    bad = a;
    bad.positions = &as_float.t;
    CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "positions must be int32");
  }
  {
    Tensor short_positions(pos.data(), {1}, DLDataType{kDLInt, 32, 1});
    bad = a;
    bad.positions = &short_positions.t;
    CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "positions must have x's leading shape");
  }
  {
    // positions inside x's memory
    Tensor inside(x.data() + 4, {2}, DLDataType{kDLInt, 32, 1});
    bad = a;
    bad.positions = &inside.t;
    CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "x overlaps positions in memory");
  }
  bad = a;
  bad.max_position = 3;  // position 3 is outside [0, 3)
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "positions[0] = 3 is outside [0, max_position = 3)");
  bad = a;
  bad.max_position = 0;
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "max_position = 0 must be from 1");
  bad = a;
  bad.theta = 1.0;
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "theta = 1 must be a finite number above 1");
  bad = a;
  bad.theta = NAN;
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "must be a finite number above 1");
  bad = a;
  bad.layout = 7;
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "layout 7 is neither");
  bad = a;
  bad.reserved = 1;
  CHECK_STATUS(arb_rope(pc.ctx, &bad, nullptr), ARB_ERR_INVALID_ARGUMENT, "reserved must be 0");
  {
    int stream_marker = 0;
    CHECK_STATUS(arb_rope(pc.ctx, &a, &stream_marker), ARB_ERR_INVALID_ARGUMENT, "stream must be NULL");
  }
  {
    // A refused call touched nothing: positions 3 with max_position 3 again, on fresh data.
    const std::vector<float> now = x;
    bad = a;
    bad.max_position = 3;
    CHECK(arb_rope(pc.ctx, &bad, nullptr) == ARB_ERR_INVALID_ARGUMENT);
    CHECK(x == now);
  }
}
