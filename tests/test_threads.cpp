// Many threads dispatching mixed shapes at once through the public C ABI: every result
// right (bit-identical to a single-threaded run: the CPU kernels are deterministic).
#include "test_support.hpp"

#include <arbiter/float16.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>

namespace {

using arbiter::test::Tensor;

// One call's data: a problem, its inputs, and where its output goes.
struct Job {
  int kind;  // 0 small f32 gemm, 1 bf16 gemm (openblas, with workspace), 2 rmsnorm+residual f16, 3 softmax f32
  int64_t m, n, k;
  std::vector<uint16_t> a16, b16, d16, x16, r16, w16, x16_original;
  std::vector<float> a, b, d, x, y;
};

Job make_job(int kind, int64_t size, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(-1, 1);
  auto floats = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = u(rng);
    return v;
  };
  auto halves = [&](size_t n, bool bf16) {
    std::vector<uint16_t> v(n);
    for (uint16_t& h : v) h = bf16 ? arbiter::float_to_bf16(u(rng)) : arbiter::float_to_half(u(rng));
    return v;
  };
  Job j{};
  j.kind = kind;
  j.m = size;
  j.n = size + 3;
  j.k = size + 1;
  const auto mn = static_cast<size_t>(j.m * j.n), mk = static_cast<size_t>(j.m * j.k), kn = static_cast<size_t>(j.k * j.n);
  switch (kind) {
    case 0: j.a = floats(mk); j.b = floats(kn); j.d.assign(mn, NAN); break;
    case 1: j.a16 = halves(mk, true); j.b16 = halves(kn, true); j.d16.assign(mn, 0x7fc0); break;
    case 2:
      j.x16 = halves(mn, false);
      j.r16 = halves(mn, false);
      j.w16 = halves(static_cast<size_t>(j.n), false);
      j.d16.assign(mn, 0x7e00);
      j.x16_original = j.x16;
      break;
    default: j.x = floats(mn); j.y.assign(mn, NAN); break;
  }
  return j;
}

arb_status run(arb_context ctx, Job& j) {
  const DLDataType f32{kDLFloat, 32, 1}, f16{kDLFloat, 16, 1}, bf16{kDLBfloat, 16, 1};
  switch (j.kind) {
    case 0:
    case 1: {
      const bool half = j.kind == 1;
      Tensor a(half ? static_cast<void*>(j.a16.data()) : j.a.data(), {j.m, j.k}, half ? bf16 : f32);
      Tensor b(half ? static_cast<void*>(j.b16.data()) : j.b.data(), {j.k, j.n}, half ? bf16 : f32);
      Tensor d(half ? static_cast<void*>(j.d16.data()) : j.d.data(), {j.m, j.n}, half ? bf16 : f32);
      arb_gemm_args g = ARB_GEMM_ARGS_INIT;
      g.a = &a.t;
      g.b = &b.t;
      g.d = &d.t;
      g.activation = ARB_ACT_SILU;
      return arb_gemm(ctx, &g, nullptr);
    }
    case 2: {
      j.x16 = j.x16_original;  // the fused residual add writes x
      Tensor x(j.x16.data(), {j.m, j.n}, f16), r(j.r16.data(), {j.m, j.n}, f16), w(j.w16.data(), {j.n}, f16),
          y(j.d16.data(), {j.m, j.n}, f16);
      arb_rmsnorm_args a = ARB_RMSNORM_ARGS_INIT;
      a.x = &x.t;
      a.residual = &r.t;
      a.weight = &w.t;
      a.y = &y.t;
      return arb_rmsnorm(ctx, &a, nullptr);
    }
    default: {
      Tensor x(j.x.data(), {j.m, j.n}), y(j.y.data(), {j.m, j.n});
      arb_softmax_args a = ARB_SOFTMAX_ARGS_INIT;
      a.x = &x.t;
      a.y = &y.t;
      return arb_softmax(ctx, &a, nullptr);
    }
  }
}

bool same_output(const Job& a, const Job& b) {
  auto eq = [](const auto& u, const auto& v) {
    return u.size() == v.size() && (u.empty() || std::memcmp(u.data(), v.data(), u.size() * sizeof(u[0])) == 0);
  };
  return eq(a.d, b.d) && eq(a.d16, b.d16) && eq(a.y, b.y) && eq(a.x16, b.x16);
}

}  // namespace

TEST_CASE("8 threads dispatching mixed shapes at once: all results right") {
  const std::string toml = arbiter::test::config_loading(arbiter::test::shipped_plugins());
  arb_context_options options = ARB_CONTEXT_OPTIONS_INIT;
  options.config_toml = toml.c_str();
  arb_context ctx = nullptr;
  REQUIRE(arb_context_create(&options, &ctx) == ARB_OK);

  // Expected results, one thread, from a separate context (its own selection cache).
  arb_context reference_ctx = nullptr;
  REQUIRE(arb_context_create(&options, &reference_ctx) == ARB_OK);
  std::vector<Job> expected;
  for (int i = 0; i < 24; ++i) {
    expected.push_back(make_job(i % 4, 1 + (i * 7) % 70, static_cast<uint64_t>(i)));
    REQUIRE(run(reference_ctx, expected.back()) == ARB_OK);
  }
  arb_context_destroy(reference_ctx);

  constexpr int kThreads = 8, kRounds = 30;
  std::atomic<int> failures{0}, calls{0};
  std::mutex first_failure_mutex;
  std::string first_failure;  // what went wrong first, for the report
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int round = 0; round < kRounds; ++round) {
        const size_t i = static_cast<size_t>((t * 5 + round) % 24);
        Job job = make_job(expected[i].kind, expected[i].m, i);  // same inputs, fresh outputs
        const arb_status status = run(ctx, job);
        if (status != ARB_OK || !same_output(job, expected[i])) {
          std::lock_guard<std::mutex> lock(first_failure_mutex);
          if (failures.fetch_add(1) == 0)
            first_failure = "job " + std::to_string(i) + " (kind " + std::to_string(job.kind) + ", m " +
                            std::to_string(job.m) + "): " +
                            (status != ARB_OK ? std::string("status ") + std::to_string(status) + ": " + arb_last_error()
                                              : "differs from the single-threaded result");
        }
        calls.fetch_add(1);
      }
    });
  }
  go.store(true);  // all threads start together, so early calls race on cache misses
  for (auto& thread : threads) thread.join();
  CHECK(calls.load() == kThreads * kRounds);
  CHECK_MESSAGE(failures.load() == 0, first_failure);
  CHECK(arb_context_destroy(ctx) == ARB_OK);
}
