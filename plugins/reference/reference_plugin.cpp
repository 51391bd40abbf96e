// The reference plugin: simple, exact CPU kernels (fp64 accumulation, every dtype,
// transpose and epilogue). It is the oracle the other kernels are checked against, so it
// favours obviousness over speed; its only concession is a loop order that reads rows.
// libarbiter compiles it in (ARBITER_BUILTIN_ORACLE) instead of loading it from a file.
#include <arbiter/float16.hpp>
#include <arbiter/plugin.hpp>

#include "activation.hpp"
#include "matrix_access.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

using arbiter::load_float;
using arbiter::store_float;
using arbiter::plugin::Launch;
using arbiter::plugin::Why;

bool on_cpu(const arb_problem& p, Why& why) {
  if (p.device_type != kDLCPU) return why.no("CPU tensors only");
  return true;
}

// D = act(alpha * op(A) op(B) + beta * C + bias), one output row at a time, accumulated in
// double in the workspace (n doubles).
void gemm(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  double* row = static_cast<double*>(l.workspace);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) row[j] = 0.0;
    for (int64_t q = 0; q < p.k; ++q) {
      const double a = arbiter::plugins::load_a(p, o.a, i, q);
      for (int64_t j = 0; j < p.n; ++j) row[j] += a * arbiter::plugins::load_b(p, o.b, q, j);
    }
    for (int64_t j = 0; j < p.n; ++j) {
      double v = static_cast<double>(o.alpha) * row[j];
      if (p.has_c) v += static_cast<double>(o.beta) * load_float(o.c, i * p.ldc + j, p.dtype);
      if (p.has_bias) v += load_float(o.bias, j, p.dtype);
      store_float(o.d, i * p.ldd + j, p.dtype, static_cast<float>(arbiter::plugins::activate<double>(p.activation, v)));
    }
  }
}

// With a residual, x += residual is rounded to the dtype, written back, and that stored
// sum is what gets normalised (as fused kernels in vLLM and TensorRT-LLM do).
void rmsnorm(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t x0 = r * p.ld_x;
    if (p.has_residual) {
      for (int64_t c = 0; c < p.cols; ++c)
        store_float(o.x, x0 + c, p.dtype,
                    load_float(o.x, x0 + c, p.dtype) + load_float(o.residual, r * p.ld_residual + c, p.dtype));
    }
    double sum_sq = 0.0;
    for (int64_t c = 0; c < p.cols; ++c) {
      const double v = load_float(o.x, x0 + c, p.dtype);
      sum_sq += v * v;
    }
    const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(p.cols) + static_cast<double>(o.eps));
    for (int64_t c = 0; c < p.cols; ++c) {
      const double v = load_float(o.x, x0 + c, p.dtype) * scale * load_float(o.weight, c, p.dtype);
      store_float(o.y, r * p.ld_y + c, p.dtype, static_cast<float>(v));
    }
  }
}

void softmax(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t x0 = r * p.ld_x;
    double max = -INFINITY;
    for (int64_t c = 0; c < p.cols; ++c) max = std::fmax(max, load_float(o.x, x0 + c, p.dtype));
    double sum = 0.0;
    for (int64_t c = 0; c < p.cols; ++c) sum += std::exp(load_float(o.x, x0 + c, p.dtype) - max);
    for (int64_t c = 0; c < p.cols; ++c)
      store_float(o.y, r * p.ld_y + c, p.dtype, static_cast<float>(std::exp(load_float(o.x, x0 + c, p.dtype) - max) / sum));
  }
}

// silu(gate) * up in double, silu in the sigmoid form (plugins/common/activation.hpp).
void swiglu(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c) {
      const double gate = load_float(o.gate, r * p.ld_gate + c, p.dtype);
      const double up = load_float(o.up, r * p.ld_up + c, p.dtype);
      store_float(o.y, r * p.ld_y + c, p.dtype,
                  static_cast<float>(arbiter::plugins::activate<double>(ARB_ACT_SILU, gate) * up));
    }
}

// Turns one head's pairs in double by position * theta^(-2i / dim): the pair's elements are i
// and i + dim/2 (split-half) or 2i and 2i + 1 (interleaved). get(e) reads element e of the
// head, set(e, v) writes it.
template <typename Get, typename Set>
void turn_head(const arb_problem& p, int64_t dim, int32_t position, Get get, Set set) {
  const int64_t pairs = dim / 2;
  const bool interleaved = p.rope_layout == ARB_ROPE_INTERLEAVED;
  for (int64_t i = 0; i < pairs; ++i) {
    const double angle =
        static_cast<double>(position) * std::pow(p.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    const double c = std::cos(angle), s = std::sin(angle);
    const int64_t first = interleaved ? 2 * i : i, second = interleaved ? 2 * i + 1 : i + pairs;
    const double x1 = get(first), x2 = get(second);
    set(first, x1 * c - x2 * s);
    set(second, x2 * c + x1 * s);
  }
}

void rope(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  const auto* positions = static_cast<const int32_t*>(o.positions);
  for (int64_t t = 0; t < p.rows; ++t)
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t head = t * p.ld_x + h * p.ld_head;
      turn_head(
          p, p.cols, positions[t], [&](int64_t e) { return static_cast<double>(load_float(o.x, head + e, p.dtype)); },
          [&](int64_t e, double v) { store_float(o.x, head + e, p.dtype, static_cast<float>(v)); });
    }
}

// Per batch, query head and query: the scores in double (the workspace: kv_len of them, then
// head_dim accumulators), the softmax by its maximum, then the weighted sum of the values.
void attention(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  double* score = static_cast<double*>(l.workspace);
  double* sum = score + p.kv_len;
  const int64_t group = p.heads / p.kv_heads;
  const double scale = static_cast<double>(o.alpha);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < p.q_len; ++i) {
        const int64_t q = b * p.ld_q_batch + i * p.ld_q_token + h * p.ld_q_head;
        const int64_t kv_head = h / group;
        // Causal: query i sees keys up to i + kv_len - q_len (the mask aligned to the end).
        const int64_t seen = p.causal ? i + p.kv_len - p.q_len + 1 : p.kv_len;
        double top = -INFINITY;
        for (int64_t j = 0; j < seen; ++j) {
          const int64_t k = b * p.ld_k_batch + j * p.ld_k_token + kv_head * p.ld_k_head;
          double dot = 0.0;
          for (int64_t d = 0; d < p.cols; ++d) dot += load_float(o.q, q + d, p.dtype) * load_float(o.k, k + d, p.dtype);
          score[j] = scale * dot;
          top = std::max(top, score[j]);
        }
        double total = 0.0;
        for (int64_t j = 0; j < seen; ++j) total += score[j] = std::exp(score[j] - top);
        for (int64_t d = 0; d < p.cols; ++d) sum[d] = 0.0;
        for (int64_t j = 0; j < seen; ++j) {
          const int64_t v = b * p.ld_v_batch + j * p.ld_v_token + kv_head * p.ld_v_head;
          for (int64_t d = 0; d < p.cols; ++d) sum[d] += score[j] * load_float(o.v, v + d, p.dtype);
        }
        const int64_t out = b * p.ld_o_batch + i * p.ld_o_token + h * p.ld_o_head;
        for (int64_t d = 0; d < p.cols; ++d) store_float(o.o, out + d, p.dtype, static_cast<float>(sum[d] / total));
      }
}

}  // namespace

namespace {

// Row r of rmsnorm(x) * weight in double, into normed (cols of them).
void normed_row(const arb_problem& p, const arb_operands& o, int64_t r, double* normed) {
  const int64_t x0 = r * p.ld_x;
  double sum_sq = 0.0;
  for (int64_t c = 0; c < p.cols; ++c) {
    const double v = load_float(o.x, x0 + c, p.dtype);
    sum_sq += v * v;
  }
  const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(p.cols) + static_cast<double>(o.eps));
  for (int64_t c = 0; c < p.cols; ++c) normed[c] = load_float(o.x, x0 + c, p.dtype) * scale * load_float(o.weight, c, p.dtype);
}

// The MLP block in double, no intermediate rounded: per row, n = rmsnorm(x) * weight, then
// h_j = silu(gate_j . n) * (up_j . n) over the intermediate size, then y = x + down h. The
// workspace holds n and h (cols + inter doubles).
void mlp(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  double* normed = static_cast<double*>(l.workspace);
  double* hidden = normed + p.cols;
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t x0 = r * p.ld_x;
    normed_row(p, o, r, normed);
    for (int64_t j = 0; j < p.inter; ++j) {
      double gate = 0.0, up = 0.0;
      for (int64_t c = 0; c < p.cols; ++c) {
        gate += normed[c] * load_float(o.gate, j * p.ld_gate + c, p.dtype);
        up += normed[c] * load_float(o.up, j * p.ld_up + c, p.dtype);
      }
      hidden[j] = arbiter::plugins::activate<double>(ARB_ACT_SILU, gate) * up;
    }
    for (int64_t c = 0; c < p.cols; ++c) {
      double sum = 0.0;
      for (int64_t j = 0; j < p.inter; ++j) sum += hidden[j] * load_float(o.down, c * p.ld_down + j, p.dtype);
      store_float(o.y, r * p.ld_y + c, p.dtype, static_cast<float>(load_float(o.x, x0 + c, p.dtype) + sum));
    }
  }
}

// The attention block's input in double, nothing rounded until y: per row, n = rmsnorm(x) *
// weight, the projection n W^T, then q's and k's heads turned. The workspace holds n and the
// projected row (cols + (heads + 2 kv_heads) head_dim doubles).
size_t qkv_projected(const arb_problem& p) { return static_cast<size_t>((p.heads + 2 * p.kv_heads) * p.head_dim); }
void qkv(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  const auto* positions = static_cast<const int32_t*>(o.positions);
  const auto out = static_cast<int64_t>(qkv_projected(p));
  double* normed = static_cast<double*>(l.workspace);
  double* projected = normed + p.cols;
  for (int64_t r = 0; r < p.rows; ++r) {
    normed_row(p, o, r, normed);
    for (int64_t j = 0; j < out; ++j) {
      double sum = 0.0;
      for (int64_t c = 0; c < p.cols; ++c) sum += normed[c] * load_float(o.b, j * p.ld_w + c, p.dtype);
      projected[j] = sum;
    }
    for (int64_t h = 0; h < p.heads + p.kv_heads; ++h) {
      double* head = projected + h * p.head_dim;
      turn_head(
          p, p.head_dim, positions[r], [&](int64_t e) { return head[e]; }, [&](int64_t e, double v) { head[e] = v; });
    }
    for (int64_t j = 0; j < out; ++j) store_float(o.y, r * p.ld_y + j, p.dtype, static_cast<float>(projected[j]));
  }
}

arbiter::plugin::Plugin reference_plugin() {
  arbiter::plugin::Plugin plugin("reference", "1.0.0");
  plugin.description("exact CPU kernels with fp64 accumulation; the verification oracle")
      .provenance(ARB_PROVENANCE_REFERENCE)
      .priority(0)
      .kernel(arbiter::plugin::Kernel("gemm", ARB_OP_GEMM)
                  .supports(on_cpu)
                  .workspace([](const arb_problem& p) { return static_cast<size_t>(p.n) * sizeof(double); })
                  .launch(gemm))
      .kernel(arbiter::plugin::Kernel("rmsnorm", ARB_OP_RMSNORM).supports(on_cpu).launch(rmsnorm))
      .kernel(arbiter::plugin::Kernel("softmax", ARB_OP_SOFTMAX).supports(on_cpu).launch(softmax))
      .kernel(arbiter::plugin::Kernel("swiglu", ARB_OP_SWIGLU).supports(on_cpu).launch(swiglu))
      .kernel(arbiter::plugin::Kernel("rope", ARB_OP_ROPE).supports(on_cpu).launch(rope))
      .kernel(arbiter::plugin::Kernel("attention", ARB_OP_ATTENTION)
                  .supports(on_cpu)
                  .workspace([](const arb_problem& p) { return static_cast<size_t>(p.kv_len + p.cols) * sizeof(double); })
                  .launch(attention))
      .kernel(arbiter::plugin::Kernel("mlp", ARB_OP_MLP)
                  .supports(on_cpu)
                  .workspace([](const arb_problem& p) { return static_cast<size_t>(p.cols + p.inter) * sizeof(double); })
                  .launch(mlp))
      .kernel(arbiter::plugin::Kernel("qkv", ARB_OP_QKV)
                  .supports(on_cpu)
                  .workspace([](const arb_problem& p) { return (static_cast<size_t>(p.cols) + qkv_projected(p)) * sizeof(double); })
                  .launch(qkv));
  return plugin;
}

}  // namespace

// Built into libarbiter (core/plugin/plugin_loader.hpp): no file can shadow the oracle, and
// its entry has a name of its own. Built alone, it is an ordinary plugin file.
#ifdef ARBITER_BUILTIN_ORACLE
namespace arbiter {
arb_status builtin_oracle_entry(const arb_host_api* host, const arb_plugin_descriptor** descriptor, char* message,
                                size_t capacity) noexcept {
  return plugin::detail::entry(host, descriptor, message, capacity, reference_plugin);
}
}  // namespace arbiter
#else
ARBITER_PLUGIN(reference_plugin())
#endif
