#include "device/problem_buffers.hpp"

#include "common/failure.hpp"

#include <arbiter/float16.hpp>

#include <cmath>
#include <random>

namespace arbiter {

const char* distribution_name(Distribution distribution) {
  return distribution == Distribution::normal ? "normal" : "uniform[-1,1]";
}

ProblemBuffers::ProblemBuffers(const arb_problem& p, float alpha, float beta, float eps)
    : problem_(p), alpha_(alpha), beta_(beta), eps_(eps) {
  // Host memory always: the operands of a CPU problem, or the host side (staging, results)
  // of a CUDA problem's DeviceOperands.
  if (p.device_type != kDLCPU && p.device_type != kDLCUDA)
    fail(ARB_ERR_UNSUPPORTED, "ProblemBuffers: CPU or CUDA problems only");
  operands_.reserve(6);
  if (p.op == ARB_OP_GEMM) {
    add("a", true, false, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda);
    add("b", true, false, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb);
    if (p.has_c && !p.c_is_d) add("c", true, false, p.m, p.n, p.ldc);
    if (p.has_bias) add("bias", true, false, 1, p.n, p.n);
    add("d", p.c_is_d != 0, true, p.m, p.n, p.ldd);
  } else {
    const bool fused = p.op == ARB_OP_RMSNORM && p.has_residual;
    add("x", true, fused, p.rows, p.cols, p.ld_x);
    if (fused) add("residual", true, false, p.rows, p.cols, p.ld_residual);
    if (p.op == ARB_OP_RMSNORM) add("weight", true, false, 1, p.cols, p.cols);
    add("y", false, true, p.rows, p.cols, p.ld_y);
  }
}

ProblemBuffers::Operand& ProblemBuffers::add(std::string name, bool input, bool output, int64_t rows, int64_t cols,
                                             int64_t ld) {
  Operand o;
  o.name = std::move(name);
  o.is_input = input;
  o.is_output = output;
  o.rows = rows;
  o.cols = cols;
  o.ld = ld;
  o.buffer = HostBuffer(static_cast<size_t>((rows - 1) * ld + cols) * dtype_size(problem_.dtype));
  operands_.push_back(std::move(o));
  return operands_.back();
}

void ProblemBuffers::randomize(uint64_t seed, Distribution distribution) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t element = dtype_size(problem_.dtype);
  for (Operand& o : operands_) {
    const int64_t count = static_cast<int64_t>(o.buffer.size() / element);
    for (int64_t i = 0; i < count; ++i) {
      const float v = !o.is_input ? NAN : distribution == Distribution::normal ? normal(rng) : uniform(rng);
      store_float(o.buffer.data(), i, problem_.dtype, v);
    }
  }
}

void* ProblemBuffers::pointer(const std::string& name) const {
  const Operand* o = find(name);
  return o ? const_cast<std::byte*>(o->buffer.data()) : nullptr;
}

const ProblemBuffers::Operand* ProblemBuffers::find(const std::string& name) const {
  for (const Operand& o : operands_)
    if (o.name == name) return &o;
  return nullptr;
}

arb_operands ProblemBuffers::operands() const {
  return operands_by_name(problem_, [this](const char* name) { return pointer(name); }, alpha_, beta_, eps_);
}

double ProblemBuffers::element(const Operand& operand, int64_t r, int64_t c) const {
  return load_float(operand.buffer.data(), r * operand.ld + c, problem_.dtype);
}

}  // namespace arbiter
