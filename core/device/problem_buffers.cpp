#include "device/problem_buffers.hpp"

#include "common/failure.hpp"
#include "problem/op_table.hpp"

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
  const Op* op = find_op(p.op);
  if (op == nullptr) fail(ARB_ERR_INVALID_ARGUMENT, "ProblemBuffers: unknown op");
  for (const OperandLayout& o : op->operands(p)) add(o.name, o.input, o.output, o.rows, o.cols, o.ld);
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
