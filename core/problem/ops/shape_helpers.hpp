// Helpers the ops share for sizing verification shapes.
#pragma once

#include "problem/op.hpp"
#include "problem/problem.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace arbiter {

// The smallest row stride >= cols whose byte size has exactly the alignment class `align`
// (or cols, when no stride within 256 elements of it has).
inline int64_t stride_with_alignment(int64_t cols, size_t element, int32_t align) {
  for (int64_t ld = cols; ld < cols + 256; ++ld)
    if (alignment_class({static_cast<uint64_t>(ld) * element}) == align) return ld;
  return cols;
}

// A large size brought down to at most `cap`, keeping its power-of-two factors up to 64
// (kernels often require a multiple of their tile).
inline int64_t shrink(int64_t size, int64_t cap) {
  if (size <= cap) return size;
  const int64_t factor = std::min<int64_t>(size & -size, 64);
  return std::max<int64_t>(cap / factor * factor, factor);
}

// `p` with the op's sizes (Op::sizes(), in order) set from `s` and every row stride (Op::strides())
// the smallest that keeps p's alignment class: Op::resized for ops whose strides are independent.
inline arb_problem resized_with_least_strides(const Op& op, const arb_problem& p, const Sizes& s) {
  arb_problem r = p;
  const std::vector<SizeField>& fields = op.sizes();
  for (size_t i = 0; i < fields.size(); ++i) r.*fields[i].member = s.value[i];
  const size_t element = dtype_size(p.dtype);
  for (const StrideField& stride : op.strides(r)) r.*stride.member = stride_with_alignment(stride.least, element, p.alignment);
  r.alignment = stride_alignment(r);
  return r;
}

}  // namespace arbiter
