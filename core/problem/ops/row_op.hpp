// What rmsnorm and softmax share: a rows x cols problem reduced along cols, x in and y out
// with their own row strides (rmsnorm adds an optional residual with its own).
#pragma once

#include "problem/op.hpp"
#include "problem/ops/shape_helpers.hpp"
#include "problem/ops/tensor_views.hpp"
#include "problem/problem.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <cstring>
#include <utility>

namespace arbiter {

class RowOp : public Op {
 public:
  const std::vector<SizeField>& sizes() const override {
    static const std::vector<SizeField> fields = {{"rows", &arb_problem::rows}, {"cols", &arb_problem::cols}};
    return fields;
  }

  void validate(const arb_problem& p) const override {
    if (p.rows < 1 || p.cols < 1)
      invalid_argument(fmt::format("{} sizes must be >= 1 (rows={} cols={})", name(), p.rows, p.cols));
    for (const StrideField& stride : strides(p)) check_row_stride(stride.name, p.*stride.member, stride.least);
  }

  // Bound by memory: no flops counted.
  double flops(const arb_problem&) const override { return 0; }
  // Each row is reduced over its columns (a sum of squares, a sum of exponentials).
  int64_t accumulated_terms(const arb_problem& p) const override { return p.cols; }
  // A few passes over each row in fp64.
  double reference_cost(const arb_problem& p) const override {
    return static_cast<double>(p.rows) * static_cast<double>(p.cols) * 4;
  }

  arb_problem resized(const arb_problem& p, const Sizes& s) const override {
    arb_problem r = p;
    const size_t element = dtype_size(p.dtype);
    r.rows = s.value[0];
    r.cols = s.value[1];
    for (const StrideField& stride : strides(r)) r.*stride.member = stride_with_alignment(stride.least, element, p.alignment);
    r.alignment = stride_alignment(r);
    return r;
  }

  // Rows are independent: a few are enough; columns are where kernels change strategy.
  Sizes verification_sizes(const arb_problem& p) const override {
    return {{shrink(p.rows, kMaxVerifyRows), shrink(p.cols, kMaxVerifyCols)}};
  }

  std::vector<SizedShape> edge_shapes(const Sizes& v) const override {
    return {{{{1, 1}}, "edge: 1x1"},
            {{{3, 7}}, "edge: small primes 3x7"},
            {{{2, v.value[1] + 1}}, "edge: one column past the problem"},
            {{{5, 33}}, "edge: just over 32 columns"},
            {{{2, 1023}}, "edge: just under 1024 columns"}};
  }

  // Every row stride of the op's operands: validate() and resized() go through these.
  std::vector<StrideField> strides(const arb_problem& p) const override {
    std::vector<StrideField> out = {{"ldx", &arb_problem::ld_x, p.cols}, {"ldy", &arb_problem::ld_y, p.cols}};
    if (p.has_residual) out.push_back({"ldr", &arb_problem::ld_residual, p.cols});
    return out;
  }

  const char* example_fields() const override { return "rows=8 cols=1024"; }

 protected:
  static constexpr int64_t kMaxVerifyRows = 16;
  static constexpr int64_t kMaxVerifyCols = 4096;

  // The C API's x and y (checked already): rows, cols, their strides, the operands zeroed
  // with x and y set.
  // Binds x and y (which must not overlap) and returns their views.
  static std::pair<Matrix, Matrix> bind_rows(const DLTensor* x_tensor, const DLTensor* y_tensor, Call& call) {
    const Matrix x = as_rows(x_tensor, "x");
    const Matrix y = as_rows(y_tensor, "y");
    check_same_shape(y_tensor, "y", x_tensor, "x");
    check_disjoint(y, x);
    arb_problem& p = call.problem;
    p.rows = x.rows;
    p.cols = x.cols;
    p.ld_x = x.ld;
    p.ld_y = y.ld;
    arb_operands& o = call.operands;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.x = x.data;
    o.y = y.data;
    return {x, y};
  }

  // rows, cols and the x and y strides from problem text.
  static void read_rows(ProblemFields& fields, arb_problem& p) {
    p.rows = fields.require_int("rows");
    p.cols = fields.require_int("cols");
    p.ld_x = fields.take_int("ldx", p.cols);
    p.ld_y = fields.take_int("ldy", p.cols);
  }
};

}  // namespace arbiter
