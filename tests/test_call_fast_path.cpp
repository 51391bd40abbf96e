// The calls' fast path (core/problem/ops/call_fast_path.hpp) against each op's detailed
// build_call: whatever the fast path accepts, build_call accepts too and builds the same
// problem and operands byte for byte (the selection cache compares those bytes); whatever
// build_call refuses, the fast path refuses, so the detailed checks give every message.
// The common cases must take the fast path. Arguments are drawn from a fixed seed over good
// and bad values of every field. Every problem either path builds is zero outside its op's
// words (Op::problem_words()), and the fast path's call key is the one the selection cache
// packs from the problem (call_key.hpp).
#include "common/failure.hpp"
#include "dispatch/dispatcher.hpp"
#include "problem/ops/call_fast_path.hpp"
#include "problem/ops/ops.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace arbiter;

namespace {

struct Paths {
  bool fast = false;      // build_call_fast accepted
  bool detailed = false;  // build_call accepted
  bool same = false;      // and both built the same bytes
  bool within = true;     // every problem built is zero outside its op's words
  std::string error;      // build_call's message when it refused
};

template <typename Args>
Paths both_paths(const Op& op, const Args& args) {
  Paths paths;
  Call fast, detailed;
  std::memset(&fast, 0xA5, sizeof fast);  // every byte must be written
  CallKey key;
  std::memset(&key, 0xA5, sizeof key);
  paths.fast = build_call_fast(&args, fast, key);
  try {
    op.build_call(&args, detailed);
    paths.detailed = true;
    paths.within = problem_within(detailed.problem, op.problem_words());
  } catch (const Failure& e) {
    paths.error = e.what();
  }
  if (paths.fast) {
    // The key is the problem's, as the selection cache packs and hashes it, and zero past its
    // op's words.
    CallKey packed;
    paths.within = paths.within && problem_within(fast.problem, op.problem_words()) &&
                   pack_call_key(fast.problem, packed) && std::memcmp(&packed, &key, sizeof key) == 0 &&
                   fast_key_words(&args) == call_key_words(op.code()) &&
                   Dispatcher::hash(fast.problem, op.problem_words()) == call_key_hash(key);
    for (size_t i = fast_key_words(&args); i < kCallKeyWords; ++i) paths.within = paths.within && key.word[i] == 0;
  }
  paths.same = paths.fast && paths.detailed &&
               std::memcmp(&fast.problem, &detailed.problem, sizeof fast.problem) == 0 &&
               std::memcmp(&fast.operands, &detailed.operands, sizeof fast.operands) == 0;
  return paths;
}

// What the fast path accepted, build_call accepted the same way.
void check_agree(const Paths& paths, const std::string& what) {
  INFO(what);
  CHECK(paths.within);
  if (paths.fast) {
    INFO("build_call refused: " << paths.error);
    CHECK(paths.detailed);
    CHECK(paths.same);
  }
}

constexpr DLDataType kF32{kDLFloat, 32, 1}, kF16{kDLFloat, 16, 1}, kBF16{kDLBfloat, 16, 1};

// A tensor whose shape and strides live with it.
struct Operand {
  DLTensor t{};
  int64_t shape[4] = {};
  int64_t strides[4] = {};
  Operand() = default;
  Operand(const Operand&) = delete;
  void set(void* data, std::vector<int64_t> dims, DLDataType dtype, std::vector<int64_t> steps = {}) {
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(dims.size());
    t.dtype = dtype;
    for (size_t i = 0; i < dims.size(); ++i) shape[i] = dims[i];
    for (size_t i = 0; i < steps.size(); ++i) strides[i] = steps[i];
    t.shape = shape;
    t.strides = steps.empty() ? nullptr : strides;
    t.byte_offset = 0;
  }
};

alignas(256) float memory[1 << 14];

// Draws operands: mostly well-formed, each field bent now and then to a value at or past a
// limit the checks draw.
class Draw {
 public:
  explicit Draw(uint32_t seed) : rng_(seed) {}

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  T pick(std::initializer_list<T> values) {
    return values.begin()[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng_)];
  }
  int64_t size() { return pick<int64_t>({1, 1, 2, 3, 5, 8, 16}); }
  DLDataType dtype() { return pick({kF32, kF32, kF16, kBF16}); }
  char* address(DLDataType dtype) {
    return reinterpret_cast<char*>(memory) + std::uniform_int_distribution<size_t>(0, 2048)(rng_) * (dtype.bits / 8);
  }

  // A rows x cols matrix (or a vector when rows is 0) of the dtype, then perhaps bent.
  void operand(Operand& o, int64_t rows, int64_t cols, DLDataType dtype) {
    char* data = address(dtype);
    if (rows == 0) {
      o.set(data, {cols}, dtype, chance(0.3) ? std::vector<int64_t>{1} : std::vector<int64_t>{});
    } else if (chance(0.5)) {
      o.set(data, {rows, cols}, dtype);
    } else {
      o.set(data, {rows, cols}, dtype, {cols + pick<int64_t>({0, 0, 1, 7}), 1});
    }
    if (chance(0.15)) bend(o);
  }

  void bend(Operand& o) {
    constexpr int64_t kBig = int64_t(1) << 30;
    const int64_t huge[] = {0, -1, kBig, kBig + 1, int64_t(1) << 40, std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min()};
    const auto any_huge = [&] { return huge[std::uniform_int_distribution<int>(0, 6)(rng_)]; };
    switch (std::uniform_int_distribution<int>(0, 14)(rng_)) {
      case 0: o.t.ndim = pick({-1, 0, 1, 2, 3, 17}); break;
      case 1: o.shape[0] = any_huge(); break;
      case 2: o.shape[o.t.ndim > 1 ? 1 : 0] = any_huge(); break;
      case 3: o.strides[0] = pick<int64_t>({0, -1, 1, 2}); o.strides[1] = 1; o.t.strides = o.strides; break;
      case 4: o.strides[0] = any_huge(); o.strides[1] = 1; o.t.strides = o.strides; break;
      case 5: o.strides[0] = o.shape[o.t.ndim > 1 ? 1 : 0]; o.strides[1] = pick<int64_t>({0, 2, -1}); o.t.strides = o.strides; break;
      case 6: o.t.dtype = pick<DLDataType>({kF16, kBF16, {kDLInt, 32, 1}, {kDLFloat, 64, 1}, {kDLFloat, 32, 2}, {kDLBfloat, 32, 1}}); break;
      case 7: o.t.device = pick<DLDevice>({{kDLCUDA, 0}, {kDLCUDA, 1}, {kDLCPU, 1}, {kDLCUDA, -1}, {kDLCUDAHost, 0}}); break;
      case 8: o.t.data = nullptr; break;
      case 9: o.t.byte_offset = pick<uint64_t>({1, 2, 4, 64, ~uint64_t(0) - 8}); break;
      case 10: o.t.data = reinterpret_cast<void*>(pick<uintptr_t>({~uintptr_t(0) - 64, uintptr_t(1) << 63})); break;
      case 11: o.t.shape = nullptr; break;
      case 12: o.t.data = memory; break;  // onto another operand, perhaps
      case 13: o.t.data = static_cast<char*>(o.t.data) + 1; break;
      default: o.t.ndim = 3; o.shape[2] = o.shape[1]; o.shape[1] = 1; o.t.strides = nullptr; break;  // [r, 1, c]
    }
  }

  std::mt19937 rng_;
};

}  // namespace

TEST_CASE("call fast path: gemm agrees with build_call on drawn arguments") {
  Draw draw(20261205);
  Operand a, b, c, bias, d;
  int fast = 0, detailed = 0;
  for (int i = 0; i < 30000; ++i) {
    const DLDataType dtype = draw.dtype();
    arb_gemm_args args = ARB_GEMM_ARGS_INIT;
    args.trans_a = draw.chance(0.95) ? draw.pick({0, 1}) : draw.pick({2, -1});
    args.trans_b = draw.chance(0.95) ? draw.pick({0, 1}) : draw.pick({2, -1});
    args.activation = draw.chance(0.95) ? draw.pick({0, 1, 2, 3, 4}) : draw.pick({-1, 5});
    args.reserved = draw.chance(0.97) ? 0 : 1;
    args.alpha = draw.pick({1.0f, 0.5f, 0.0f});
    args.beta = draw.chance(0.6) ? 0.0f : draw.pick({1.0f, -0.5f, std::nanf("")});
    if (draw.chance(0.02)) args.struct_size = draw.pick<size_t>({0, ARB_GEMM_ARGS_STRUCT_SIZE - 4, ARB_GEMM_ARGS_STRUCT_SIZE});
    const int64_t m = draw.size(), n = draw.size(), k = draw.size();
    draw.operand(a, args.trans_a == 1 ? k : m, args.trans_a == 1 ? m : k, dtype);
    draw.operand(b, args.trans_b == 1 ? n : k, args.trans_b == 1 ? k : n, draw.chance(0.97) ? dtype : draw.dtype());
    draw.operand(d, m, n, dtype);
    args.a = draw.chance(0.99) ? &a.t : nullptr;
    args.b = &b.t;
    args.d = draw.chance(0.99) ? &d.t : nullptr;
    if (args.beta != 0.0f && draw.chance(0.97)) {
      if (draw.chance(0.4)) {
        c.set(d.t.data, {m, n}, dtype, d.t.strides ? std::vector<int64_t>{d.strides[0], 1} : std::vector<int64_t>{});
        if (draw.chance(0.2)) draw.bend(c);  // in place, or nearly
      } else {
        draw.operand(c, m, n, dtype);
      }
      args.c = &c.t;
    }
    if (draw.chance(0.4)) {
      draw.operand(bias, 0, draw.chance(0.95) ? n : n + 1, dtype);
      args.bias = &bias.t;
    }
    const Paths paths = both_paths(gemm_op(), args);
    check_agree(paths, "draw " + std::to_string(i));
    fast += paths.fast;
    detailed += paths.detailed;
  }
  MESSAGE("gemm: " << fast << " fast, " << detailed << " accepted in detail, of 30000");
  CHECK(fast > 3000);
  CHECK(detailed > fast);  // some accepted calls are outside the fast path's common case
}

TEST_CASE("call fast path: rmsnorm and softmax agree with build_call on drawn arguments") {
  Draw draw(5122026);
  Operand x, y, weight, residual;
  int fast[2] = {}, detailed[2] = {};
  for (int i = 0; i < 30000; ++i) {
    const DLDataType dtype = draw.dtype();
    const int64_t rows = draw.size(), cols = draw.size();
    draw.operand(x, rows, cols, dtype);
    draw.operand(y, draw.chance(0.97) ? rows : rows + 1, cols, dtype);
    const bool norm = i % 2 == 0;
    Paths paths;
    if (norm) {
      arb_rmsnorm_args args = ARB_RMSNORM_ARGS_INIT;
      args.x = &x.t;
      args.y = draw.chance(0.99) ? &y.t : nullptr;
      draw.operand(weight, 0, draw.chance(0.97) ? cols : cols + 1, dtype);
      args.weight = &weight.t;
      args.eps = draw.chance(0.97) ? draw.pick({1e-6f, 0.0f}) : draw.pick({-1.0f, std::nanf("")});
      args.reserved = draw.chance(0.97) ? 0 : 2;
      if (draw.chance(0.03)) args.struct_size = ARB_RMSNORM_ARGS_STRUCT_SIZE;  // no reserved field
      if (draw.chance(0.4)) {
        draw.operand(residual, rows, cols, dtype);
        args.residual = &residual.t;
      }
      paths = both_paths(rmsnorm_op(), args);
    } else {
      arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
      args.x = draw.chance(0.99) ? &x.t : nullptr;
      args.y = &y.t;
      if (draw.chance(0.02)) args.struct_size = ARB_SOFTMAX_ARGS_STRUCT_SIZE - 8;
      paths = both_paths(softmax_op(), args);
    }
    check_agree(paths, std::string(norm ? "rmsnorm" : "softmax") + " draw " + std::to_string(i));
    fast[norm] += paths.fast;
    detailed[norm] += paths.detailed;
  }
  MESSAGE("softmax: " << fast[0] << " fast, " << detailed[0] << " accepted in detail; rmsnorm: " << fast[1]
                      << " fast, " << detailed[1] << " accepted in detail, of 15000 each");
  for (int op = 0; op < 2; ++op) {
    CHECK(fast[op] > 1500);
    CHECK(detailed[op] > fast[op]);
  }
}

TEST_CASE("call fast path: swiglu agrees with build_call on drawn arguments, separate and fused") {
  Draw draw(7122026);
  Operand gate, up, y;
  int fast[2] = {}, detailed[2] = {};
  for (int i = 0; i < 20000; ++i) {
    const DLDataType dtype = draw.dtype();
    const int64_t rows = draw.size(), cols = draw.size();
    const bool fused = i % 2 == 0;
    arb_swiglu_args args = ARB_SWIGLU_ARGS_INIT;
    // Fused: gate [rows, 2 cols] (an odd width now and then); else gate and up [rows, cols].
    draw.operand(gate, rows, fused ? (draw.chance(0.97) ? 2 * cols : 2 * cols + 1) : cols, dtype);
    args.gate = draw.chance(0.99) ? &gate.t : nullptr;
    if (!fused) {
      draw.operand(up, draw.chance(0.97) ? rows : rows + 1, cols, dtype);
      args.up = &up.t;
    }
    draw.operand(y, draw.chance(0.97) ? rows : rows + 1, draw.chance(0.97) ? cols : cols + 1, dtype);
    args.y = draw.chance(0.99) ? &y.t : nullptr;
    if (draw.chance(0.02)) args.struct_size = ARB_SWIGLU_ARGS_STRUCT_SIZE - 8;
    const Paths paths = both_paths(swiglu_op(), args);
    check_agree(paths, std::string(fused ? "swiglu fused" : "swiglu") + " draw " + std::to_string(i));
    fast[fused] += paths.fast;
    detailed[fused] += paths.detailed;
  }
  MESSAGE("swiglu: " << fast[0] << " fast, " << detailed[0] << " accepted in detail; fused: " << fast[1] << " fast, "
                     << detailed[1] << " accepted in detail, of 10000 each");
  for (int form = 0; form < 2; ++form) {
    CHECK(fast[form] > 1000);
    CHECK(detailed[form] >= fast[form]);
  }
}

TEST_CASE("call fast path: the common cases take it") {
  std::vector<float> m(4096);
  Operand a, b, c, bias, d;
  for (DLDataType dtype : {kF32, kF16, kBF16}) {
    for (int trans = 0; trans < 4; ++trans) {
      arb_gemm_args args = ARB_GEMM_ARGS_INIT;
      args.trans_a = trans & 1;
      args.trans_b = trans >> 1;
      a.set(&m[0], args.trans_a ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{4, 5}, dtype);
      b.set(&m[64], args.trans_b ? std::vector<int64_t>{6, 5} : std::vector<int64_t>{5, 6}, dtype, {16, 1});
      d.set(&m[1024], {4, 6}, dtype, {6, 1});
      bias.set(&m[2048], {6}, dtype);
      c.set(&m[3072], {4, 6}, dtype);
      args.a = &a.t;
      args.b = &b.t;
      args.d = &d.t;
      CHECK(both_paths(gemm_op(), args).same);
      args.bias = &bias.t;
      args.activation = ARB_ACT_SILU;
      CHECK(both_paths(gemm_op(), args).same);
      args.beta = 1.0f;
      args.c = &c.t;
      CHECK(both_paths(gemm_op(), args).same);
      args.c = &d.t;  // in place
      const Paths in_place = both_paths(gemm_op(), args);
      CHECK(in_place.same);
    }
    // On a CUDA device: the device is the caller's, building the call needs none.
    a.set(&m[0], {4, 5}, dtype);
    b.set(&m[64], {5, 6}, dtype);
    d.set(&m[1024], {4, 6}, dtype);
    a.t.device = b.t.device = d.t.device = {kDLCUDA, 1};
    arb_gemm_args cuda = ARB_GEMM_ARGS_INIT;
    cuda.a = &a.t;
    cuda.b = &b.t;
    cuda.d = &d.t;
    CHECK(both_paths(gemm_op(), cuda).same);

    Operand x, y, w, r;
    x.set(&m[0], {3, 8}, dtype, {8, 1});
    y.set(&m[1024], {3, 8}, dtype, {16, 1});
    w.set(&m[2048], {8}, dtype);
    r.set(&m[3072], {3, 8}, dtype);
    arb_softmax_args softmax = ARB_SOFTMAX_ARGS_INIT;
    softmax.x = &x.t;
    softmax.y = &y.t;
    CHECK(both_paths(softmax_op(), softmax).same);
    arb_rmsnorm_args norm = ARB_RMSNORM_ARGS_INIT;
    norm.x = &x.t;
    norm.y = &y.t;
    norm.weight = &w.t;
    CHECK(both_paths(rmsnorm_op(), norm).same);
    norm.residual = &r.t;
    CHECK(both_paths(rmsnorm_op(), norm).same);
  }
}

TEST_CASE("call fast path: what it leaves to the detailed checks") {
  // Accepted calls outside the common case, and bad ones: the fast path declines both.
  std::vector<float> m(4096);
  Operand x, y, w;
  x.set(&m[0], {2, 3, 8}, kF32);  // 3-D: rows collapse in the detailed path
  y.set(&m[1024], {2, 3, 8}, kF32);
  arb_softmax_args softmax = ARB_SOFTMAX_ARGS_INIT;
  softmax.x = &x.t;
  softmax.y = &y.t;
  Paths paths = both_paths(softmax_op(), softmax);
  CHECK_FALSE(paths.fast);
  CHECK(paths.detailed);
  x.set(&m[0], {3, 1}, kF32, {1, 7});  // one column with a stride other than 1
  y.set(&m[1024], {3, 1}, kF32);
  paths = both_paths(softmax_op(), softmax);
  CHECK_FALSE(paths.fast);
  CHECK(paths.detailed);
  x.set(&m[0], {3, 8}, kF32);
  y.set(&m[4], {3, 8}, kF32);  // y overlaps x
  paths = both_paths(softmax_op(), softmax);
  CHECK_FALSE(paths.fast);
  CHECK(paths.error == "y overlaps x in memory: an output must not share memory with an input");
  y.set(&m[1024], {3, 8}, kF16);
  paths = both_paths(softmax_op(), softmax);
  CHECK_FALSE(paths.fast);
  CHECK(paths.error == "y has dtype f16, but the first operand has f32");
}
