#include "tune/verification_shapes.hpp"

#include "dispatch/problem.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace arbiter {
namespace {

// The smallest row stride >= cols whose byte size has exactly the alignment class `align`
// (or more, when even the smallest power of two above cols does not reach it).
int64_t stride_with_alignment(int64_t cols, size_t element, int32_t align) {
  for (int64_t ld = cols; ld < cols + 256; ++ld)
    if (alignment_class({static_cast<uint64_t>(ld) * element}) == align) return ld;
  return cols;
}

// A large size brought down to kMaxVerifyDim, keeping its power-of-two factors up to 64
// (kernels often require a multiple of their tile).
int64_t shrink(int64_t size, int64_t cap) {
  if (size <= cap) return size;
  int64_t factor = size & -size;
  factor = std::min<int64_t>(factor, 64);
  return std::max<int64_t>(cap / factor * factor, factor);
}

}  // namespace

arb_problem reshaped(const arb_problem& p, int64_t a, int64_t b, int64_t k) {
  arb_problem r = p;
  const size_t element = dtype_size(p.dtype);
  const int32_t align = p.alignment;
  if (p.op == ARB_OP_GEMM) {
    r.m = a;
    r.n = b;
    r.k = k;
    r.lda = stride_with_alignment(p.trans_a ? r.m : r.k, element, align);
    r.ldb = stride_with_alignment(p.trans_b ? r.k : r.n, element, align);
    r.ldd = stride_with_alignment(r.n, element, align);
    r.ldc = p.has_c ? (p.c_is_d ? r.ldd : stride_with_alignment(r.n, element, align)) : 0;
    r.alignment = alignment_class({r.lda * element, r.ldb * element, r.ldc * element, r.ldd * element});
  } else {
    r.rows = a;
    r.cols = b;
    r.ld_x = stride_with_alignment(r.cols, element, align);
    r.ld_y = stride_with_alignment(r.cols, element, align);
    r.ld_residual = p.has_residual ? stride_with_alignment(r.cols, element, align) : 0;
    r.alignment = alignment_class({r.ld_x * element, r.ld_y * element, r.ld_residual * element});
  }
  return r;
}

std::vector<VerificationShape> verification_shapes(const arb_problem& p) {
  std::vector<VerificationShape> shapes;
  auto add = [&](arb_problem candidate, std::string label) {
    if (candidate.alignment != p.alignment) return;  // this size cannot keep the class
    for (const auto& s : shapes)
      if (same_problem(s.problem, candidate)) return;
    shapes.push_back({candidate, std::move(label)});
  };
  if (p.op == ARB_OP_GEMM) {
    const int64_t m = shrink(p.m, kMaxVerifyDim), n = shrink(p.n, kMaxVerifyDim), k = shrink(p.k, kMaxVerifyDim);
    const bool shrunk = m != p.m || n != p.n || k != p.k;
    if (!shrunk) {
      add(p, "problem");
    } else {
      add(reshaped(p, m, n, k), fmt::format("problem shrunk to m={} n={} k={}", m, n, k));
    }
    add(reshaped(p, 1, 1, 1), "edge: m=n=k=1");
    add(reshaped(p, 7, 13, 5), "edge: small primes 7x13x5");
    add(reshaped(p, m + 1, n + 1, k + 1), "edge: one past the problem in every dimension");
    add(reshaped(p, 17, 33, 65), "edge: just over tiles of 16, 32, 64");
    add(reshaped(p, 1, n, k), "edge: a single row");
    add(reshaped(p, m, 1, k), "edge: a single column");
  } else {
    const int64_t rows = shrink(p.rows, 16), cols = shrink(p.cols, kMaxVerifyCols);
    const bool shrunk = rows != p.rows || cols != p.cols;
    if (!shrunk) {
      add(p, "problem");
    } else {
      add(reshaped(p, rows, cols, 0), fmt::format("problem shrunk to rows={} cols={}", rows, cols));
    }
    add(reshaped(p, 1, 1, 0), "edge: 1x1");
    add(reshaped(p, 3, 7, 0), "edge: small primes 3x7");
    add(reshaped(p, 2, cols + 1, 0), "edge: one column past the problem");
    add(reshaped(p, 5, 33, 0), "edge: just over 32 columns");
    add(reshaped(p, 2, 1023, 0), "edge: just under 1024 columns");
  }
  return shapes;
}

}  // namespace arbiter
