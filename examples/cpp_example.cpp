// cpp_example.cpp: arbiter through the header-only C++ layer (arbiter.hpp).
//
// Lists the plugins the context found, then runs Y = rmsnorm(relu(A * B + bias)) * w,
// P = softmax(Y) and S = swiglu(D, Y) on the CPU, checks all four results against a naive
// computation done here, then one causal attention step over 4-D views of them (O), and prints why the GEMM went to the kernel it went to. Then the GEMM as a plan (bound
// once, run on new data, as a decode loop calls its shapes), checked against the call. Errors are arbiter::Error
// exceptions (status plus message); any failure or mismatch exits non-zero.
#include <arbiter/arbiter.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

const char* provenance_name(int32_t provenance) {
  switch (provenance) {
    case ARB_PROVENANCE_REFERENCE: return "reference";
    case ARB_PROVENANCE_VENDOR: return "vendor";
    case ARB_PROVENANCE_HAND_TUNED: return "hand_tuned";
    case ARB_PROVENANCE_AI_GENERATED: return "ai_generated";
    default: return "unspecified";
  }
}

// Counts elements that differ by more than 1e-4 relative (floor 1 on the magnitude).
int mismatches(const char* name, const std::vector<float>& got, const std::vector<double>& want) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-4 * std::max(1.0, std::fabs(want[i])))) {
      if (bad++ == 0) std::fprintf(stderr, "%s[%zu] = %.7g, expected %.7g\n", name, i, got[i], want[i]);
    }
  }
  return bad;
}

void print_matrix(const char* name, const std::vector<float>& x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    std::printf("%s[%lld] =", name, static_cast<long long>(r));
    for (int64_t c = 0; c < cols; ++c) std::printf(" %7.3f", x[static_cast<size_t>(r * cols + c)]);
    std::printf("\n");
  }
}

int run() {
  if (arb_abi_version() >> 16 != ARB_ABI_VERSION_MAJOR) {
    std::fprintf(stderr, "libarbiter has application ABI %u.x, this program needs %d.x\n", arb_abi_version() >> 16,
                 ARB_ABI_VERSION_MAJOR);
    return 1;
  }
  arbiter::Context ctx;  // the embedded default configuration

  std::printf("plugins:\n");
  for (const arbiter::PluginInfo& p : ctx.plugins()) {
    std::printf("  %-10s %-8s %-9s %-12s priority %-4d %s\n", p.name.c_str(), p.version.c_str(), p.status.c_str(),
                provenance_name(p.provenance), p.priority, p.reason.c_str());
    for (const std::string& kernel : p.kernels) std::printf("      %s\n", kernel.c_str());
  }

  constexpr int64_t m = 4, n = 8, k = 16;
  auto input = [](size_t i, size_t salt) { return static_cast<float>(static_cast<int>((i * 7 + salt) % 17) - 8) / 8.0f; };
  std::vector<float> a(m * k), b(k * n), bias(n), d(m * n), w(n), y(m * n), p(m * n), s(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = input(i, 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = input(i, 5);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = input(i, 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f + 0.125f * static_cast<float>(i);

  const auto A = arbiter::View::matrix(a.data(), m, k), B = arbiter::View::matrix(b.data(), k, n);
  const auto D = arbiter::View::matrix(d.data(), m, n), Y = arbiter::View::matrix(y.data(), m, n);
  const auto P = arbiter::View::matrix(p.data(), m, n), S = arbiter::View::matrix(s.data(), m, n);
  const auto Bias = arbiter::View::vector(bias.data(), n), W = arbiter::View::vector(w.data(), n);

  ctx.gemm(A, B, D, 1.0f, ARB_ACT_RELU, &Bias);  // D = relu(A * B + bias)
  ctx.rmsnorm(D, W, Y);                          // Y = D / sqrt(mean(D^2) + 1e-6) * w
  ctx.softmax(Y, P);                             // P = softmax(Y) along each row
  ctx.swiglu(D, &Y, S);                          // S = silu(D) * Y, silu(x) = x / (1 + e^-x)

  // The same, naively, in double; each step starts from the float result the library
  // produced for the step before, as the library's next kernel does.
  std::vector<double> want_d(d.size()), want_y(y.size()), want_p(p.size()), want_s(s.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double v = bias[j];
      for (int64_t q = 0; q < k; ++q) v += static_cast<double>(a[i * k + q]) * b[q * n + j];
      want_d[i * n + j] = std::max(v, 0.0);
    }
    double sum_sq = 0.0;
    for (int64_t j = 0; j < n; ++j) sum_sq += static_cast<double>(d[i * n + j]) * d[i * n + j];
    const double scale = 1.0 / std::sqrt(sum_sq / n + 1e-6);
    for (int64_t j = 0; j < n; ++j) want_y[i * n + j] = d[i * n + j] * scale * w[j];
    double max = y[i * n], sum = 0.0;
    for (int64_t j = 0; j < n; ++j) max = std::max(max, static_cast<double>(y[i * n + j]));
    for (int64_t j = 0; j < n; ++j) sum += std::exp(y[i * n + j] - max);
    for (int64_t j = 0; j < n; ++j) want_p[i * n + j] = std::exp(y[i * n + j] - max) / sum;
    for (int64_t j = 0; j < n; ++j)
      want_s[i * n + j] = d[i * n + j] / (1.0 + std::exp(-static_cast<double>(d[i * n + j]))) * y[i * n + j];
  }
  std::printf("\n");
  print_matrix("D", d, m, n);
  print_matrix("Y", y, m, n);
  print_matrix("P", p, m, n);
  print_matrix("S", s, m, n);
  const int bad = mismatches("D", d, want_d) + mismatches("Y", y, want_y) + mismatches("P", p, want_p) +
                  mismatches("S", s, want_s);
  std::printf("check: %s\n", bad == 0 ? "D, Y, P and S match the naive computation" : "MISMATCH");

  // Attention, one decode step: a query of 2 heads (D's first row seen as [1, 1, 2, 4]) over 4
  // keys and values of one shared head (the rows of Y and P seen as [1, 4, 1, 8]: head_dim 8
  // would not match, so their first 4 columns, row stride 8), causal.
  std::vector<float> o(8);
  const auto Q = arbiter::View::tensor(d.data(), {1, 1, 2, 4});
  const auto K = arbiter::View::tensor(y.data(), {1, 4, 1, 4}, {32, 8, 8, 1});
  const auto V = arbiter::View::tensor(p.data(), {1, 4, 1, 4}, {32, 8, 8, 1});
  const auto O = arbiter::View::tensor(o.data(), {1, 1, 2, 4});
  ctx.attention(Q, K, V, O, true);
  std::vector<double> want_o(8);
  for (int h = 0; h < 2; ++h) {
    double weight[4], top = -1e300, total = 0.0;
    for (int j = 0; j < 4; ++j) {
      double dot = 0.0;
      for (int e = 0; e < 4; ++e) dot += static_cast<double>(d[h * 4 + e]) * y[j * 8 + e];
      weight[j] = dot / 2.0;  // scale 1 / sqrt(head_dim 4)
      top = std::max(top, weight[j]);
    }
    for (double& w_j : weight) total += w_j = std::exp(w_j - top);
    for (int e = 0; e < 4; ++e) {
      double sum = 0.0;
      for (int j = 0; j < 4; ++j) sum += weight[j] * p[j * 8 + e];
      want_o[h * 4 + e] = sum / total;
    }
  }
  print_matrix("O", o, 2, 4);
  const int bad_o = mismatches("O", o, want_o);
  std::printf("check: %s\n", bad_o == 0 ? "O matches the naive attention" : "MISMATCH");

  std::printf("\n%s", ctx.explain("gemm f32 m=4 n=8 k=16 bias=1 act=relu").c_str());

  // A plan: the arguments checked and the kernel chosen once; each run takes new addresses
  // (a, b, c, bias, d) of data shaped as the plan's.
  arbiter::Plan plan = ctx.plan_gemm(A, B, D, 1.0f, ARB_ACT_RELU, &Bias);
  std::vector<float> a2(a.size()), d2(d.size()), d3(d.size());
  for (size_t i = 0; i < a2.size(); ++i) a2[i] = input(i, 11);
  plan.run({a2.data(), b.data(), nullptr, bias.data(), d2.data()});
  ctx.gemm(arbiter::View::matrix(a2.data(), m, k), B, arbiter::View::matrix(d3.data(), m, n), 1.0f, ARB_ACT_RELU, &Bias);
  const bool same = d2 == d3;
  std::printf("\nplan: %s\n", same ? "its run on new data matches the call" : "MISMATCH with the call");
  return bad == 0 && bad_o == 0 && same ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const arbiter::Error& e) {
    std::fprintf(stderr, "arbiter error: %s\n", e.what());  // "ARB_ERR_...: message"
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 1;
}
