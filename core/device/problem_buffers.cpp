#include "device/problem_buffers.hpp"

#include "common/failure.hpp"
#include "problem/op_table.hpp"

#include <arbiter/float16.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
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
  for (const OperandLayout& o : op->operands(p)) add(o);
}

ProblemBuffers::Operand& ProblemBuffers::add(const OperandLayout& layout) {
  Operand o;
  o.name = layout.name;
  o.is_input = layout.input;
  o.is_output = layout.output;
  o.rows = layout.rows;
  o.cols = layout.cols;
  o.ld = layout.ld;
  o.index = layout.index;
  o.buffer = HostBuffer(static_cast<size_t>((o.rows - 1) * o.ld + o.cols) * element_bytes(o));
  operands_.push_back(std::move(o));
  return operands_.back();
}

const InputDraw& input_draw(Distribution distribution) {
  return distribution == Distribution::normal ? kNormalInputs : kUniformInputs;
}

void ProblemBuffers::randomize(uint64_t seed, Distribution distribution) {
  randomize(seed, input_draw(distribution), OutputFill::nan);
}

namespace {

// Draws the values of one input row by row (ld elements each, the padding included).
class InputDrawer {
 public:
  InputDrawer(const InputDraw& draw, uint64_t seed) : draw_(draw), rng_(seed) {}

  // Values for elements [begin, end) of row r of an operand with `rows` rows.
  template <typename Store>
  void row(int64_t r, int64_t rows, int64_t begin, int64_t end, Store&& store) {
    const double scale =
        draw_.low_scale == draw_.high_scale
            ? draw_.low_scale
            : std::exp(std::uniform_real_distribution<double>(std::log(draw_.low_scale), std::log(draw_.high_scale))(rng_));
    for (int64_t i = begin; i < end; ++i) {
      const double v = draw_.base == InputDraw::Base::normal ? normal_(rng_) : uniform_(rng_);
      store(i, v * scale);
    }
    if (end <= begin) return;
    auto any = [&] { return begin + static_cast<int64_t>(rng_() % static_cast<uint64_t>(end - begin)); };
    if (draw_.outlier != 0.0) store(any(), (rng_() & 1 ? 1 : -1) * draw_.outlier);
    if (draw_.masked > 0.0) {
      std::bernoulli_distribution masked(draw_.masked);
      for (int64_t i = begin; i < end; ++i)
        if (masked(rng_)) store(i, -INFINITY);
    }
    // Rows 0-2 of an operand with at least 4 rows: the special rows, leaving others ordinary.
    if (draw_.special_rows && rows >= 4) {
      if (r == 0)
        for (int64_t i = begin; i < end; ++i) store(i, -INFINITY);
      if (r == 1) store(any(), NAN);
      if (r == 2) store(any(), INFINITY);
    }
  }

 private:
  const InputDraw& draw_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{-1.0, 1.0};
  std::normal_distribution<double> normal_{0.0, 1.0};
};

// Stores drawn values into an operand: a one-signed operand of the draw keeps one sign.
auto value_store(std::byte* data, int32_t dtype, const InputDraw& draw, const std::string& operand) {
  const bool one_signed = drawn_one_signed(draw, operand);
  const double sign = draw.negative ? -1.0 : 1.0;
  return [=](int64_t i, double v) { store_float(data, i, dtype, static_cast<float>(one_signed ? sign * std::fabs(v) : v)); };
}

}  // namespace

void ProblemBuffers::randomize(uint64_t seed, const InputDraw& draw, OutputFill fill) {
  std::mt19937_64 fill_rng(seed ^ 0x2545f4914f6cdd1dull);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  uint64_t operand_seed = seed;
  for (Operand& o : operands_) {
    std::byte* data = o.buffer.data();
    const int64_t count = static_cast<int64_t>(o.buffer.size() / element_bytes(o));
    if (o.index) {
      draw_indices(o, operand_seed++ * 0x9e3779b97f4a7c15ull + 1, draw);
      continue;
    }
    if (!o.is_input) {
      for (int64_t i = 0; i < count; ++i)
        store_float(data, i, problem_.dtype,
                    fill == OutputFill::nan ? NAN : fill == OutputFill::zeros ? 0.0f : uniform(fill_rng));
      continue;
    }
    InputDrawer drawer(draw, operand_seed++ * 0x9e3779b97f4a7c15ull + 1);
    const auto store = value_store(data, problem_.dtype, draw, o.name);
    for (int64_t r = 0; r < o.rows; ++r) {
      const int64_t begin = r * o.ld, end = std::min(count, begin + o.ld);
      drawer.row(r, o.rows, begin, end, store);
    }
  }
}

void ProblemBuffers::redraw_interior(uint64_t seed, const InputDraw& draw) {
  uint64_t operand_seed = seed;
  for (Operand& o : operands_) {
    if (!o.is_input) continue;
    if (o.index) {  // new positions throughout: they have no edges to keep
      draw_indices(o, operand_seed++ * 0xbf58476d1ce4e5b9ull + 7, draw);
      continue;
    }
    std::byte* data = o.buffer.data();
    const int64_t skip = o.cols >= 4 ? o.cols / 4 : 0;
    InputDrawer drawer(draw, operand_seed++ * 0xbf58476d1ce4e5b9ull + 7);
    const auto store = value_store(data, problem_.dtype, draw, o.name);
    for (int64_t r = 0; r < o.rows; ++r) drawer.row(r, o.rows, r * o.ld + skip, r * o.ld + o.cols - skip, store);
  }
}

void ProblemBuffers::draw_indices(Operand& o, uint64_t seed, const InputDraw& draw) {
  std::mt19937_64 rng(seed);
  const int64_t high = std::max<int64_t>(1, problem_.max_position);
  const auto low = std::clamp<int64_t>(static_cast<int64_t>(draw.index_low * static_cast<double>(high)), 0, high - 1);
  std::uniform_int_distribution<int64_t> pick(low, high - 1);
  const size_t count = o.buffer.size() / sizeof(int32_t);
  for (size_t i = 0; i < count; ++i) {
    const auto value = static_cast<int32_t>(pick(rng));
    std::memcpy(o.buffer.data() + i * sizeof value, &value, sizeof value);
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

void* operand_pointer(const arb_operands& o, std::string_view name) {
  for (const OperandField& field : kOperandFields)
    if (name == field.name) return operand_field(o, field);
  return nullptr;
}

ProblemBuffers ProblemBuffers::absolute_values() const {
  ProblemBuffers out(problem_, std::fabs(alpha_), std::fabs(beta_), eps_);
  for (size_t i = 0; i < operands_.size(); ++i) {
    const HostBuffer& from = operands_[i].buffer;
    std::byte* to = out.buffer_data(i);
    std::memcpy(to, from.data(), from.size());
    if (operands_[i].index) continue;  // indices are not magnitudes
    const size_t element = element_bytes(operands_[i]);
    for (size_t at = element - 1; at < from.size(); at += element) to[at] &= std::byte{0x7f};  // little-endian sign bit
  }
  return out;
}

arb_operands ProblemBuffers::operands() const {
  return operands_by_name(problem_, [this](const char* name) { return pointer(name); }, alpha_, beta_, eps_);
}

ProblemBuffers ProblemBuffers::residual_scale(const std::string& input) const {
  ProblemBuffers scale = *this;
  const Operand* in = find(input);
  if (in == nullptr) fail(ARB_ERR_INTERNAL, "residual_scale: no operand " + input);
  // The op's own scale of the term where it has one (Op::residual_term_scale), else |y - x|.
  std::vector<double> term_scale;
  const Op* op = find_op(problem_.op);
  const bool own = op != nullptr && op->residual_term_scale(problem_, operands(), term_scale);
  for (Operand& out : scale.operands_) {
    if (!out.is_output) continue;
    for (int64_t r = 0; r < out.rows; ++r)
      for (int64_t c = 0; c < out.cols; ++c) {
        const double x = element(*in, r, c), y = element(out, r, c);
        const double value = own ? term_scale[static_cast<size_t>(r * out.cols + c)] : std::fabs(x) + std::fabs(y - x);
        store_float(out.buffer.data(), r * out.ld + c, problem_.dtype, static_cast<float>(value));
      }
  }
  return scale;
}

double ProblemBuffers::element(const Operand& operand, int64_t r, int64_t c) const {
  if (operand.index) {
    int32_t value;
    std::memcpy(&value, operand.buffer.data() + static_cast<size_t>(r * operand.ld + c) * sizeof value, sizeof value);
    return value;
  }
  return load_float(operand.buffer.data(), r * operand.ld + c, problem_.dtype);
}

}  // namespace arbiter
