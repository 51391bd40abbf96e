// The common case of the C API's tensors, checked inline on the path of every call: a 2-D
// row-major matrix (or a 1-D contiguous vector) of f32, f16 or bf16, with sizes and row
// strides of at most 2^30, on the first operand's device. Each check answers false, without
// a message, for anything else; the caller then runs the op's detailed checks
// (tensor_views.hpp), which accept the call or say exactly what is wrong with it. So a true
// answer must mean that the detailed checks pass and see the same sizes, strides, addresses
// and spans (tests/test_call_fast_path.cpp holds the two paths to that).
#pragma once

#include <arbiter/arbiter.h>
#include <arbiter/plugin.h>

#include "common/hot_path.hpp"
#include "problem/op.hpp"
#include "problem/problem.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace arbiter::fast_path {

// Sizes and row strides up to this many elements: no product of them (the span of an operand,
// in bytes) can overflow an int64, so the fast path needs no overflow checks.
inline constexpr uint64_t kSizeLimit = uint64_t(1) << 30;

// A DLTensor's device, ndim and dtype lie in 16 consecutive bytes: read as two words, an
// operand's are checked against the first operand's in one test.
struct Header {
  uint64_t device;      // DLDevice: type, id
  uint64_t ndim_dtype;  // ndim, then DLDataType: code, bits, lanes
};
static_assert(offsetof(DLTensor, ndim) == offsetof(DLTensor, device) + 8 &&
              offsetof(DLTensor, dtype) == offsetof(DLTensor, device) + 12 && sizeof(Header) == 16);
inline Header header_of(const DLTensor& t) {
  Header h;
  std::memcpy(&h, reinterpret_cast<const char*>(&t) + offsetof(DLTensor, device), sizeof h);
  return h;
}
constexpr uint64_t ndim_dtype(uint32_t ndim, uint8_t code, uint8_t bits) {
  return ndim | uint64_t{code} << 32 | uint64_t{bits} << 40 | uint64_t{1} << 48;  // lanes 1
}

// What every operand of a call shares, taken from the first: its dtype and device.
struct Kind {
  uint64_t device;
  uint64_t dtype;  // ndim_dtype() with ndim 0: add the operand's ndim
  arb_dtype code;
  int32_t element_shift;  // log2 of the element's bytes
  int32_t device_type;
  int32_t device_id;
};

// The first operand's kind, if it has `ndim` dimensions, a dtype arbiter runs and its device
// is the CPU (device_id 0) or a CUDA device.
inline bool first_kind(const DLTensor* t, uint32_t ndim, Kind& kind) {
  if (t == nullptr) return false;
  const Header h = header_of(*t);
  kind.dtype = h.ndim_dtype - ndim;
  if (kind.dtype == ndim_dtype(0, kDLFloat, 32)) [[likely]] {
    kind.code = ARB_DTYPE_F32;
    kind.element_shift = 2;
  } else if (kind.dtype == ndim_dtype(0, kDLFloat, 16)) {
    kind.code = ARB_DTYPE_F16;
    kind.element_shift = 1;
  } else if (kind.dtype == ndim_dtype(0, kDLBfloat, 16)) {
    kind.code = ARB_DTYPE_BF16;
    kind.element_shift = 1;
  } else {
    return false;  // another dtype, or another ndim
  }
  kind.device = h.device;
  kind.device_type = static_cast<int32_t>(h.device);
  kind.device_id = static_cast<int32_t>(h.device >> 32);
  return h.device == kDLCPU || (kind.device_type == kDLCUDA && kind.device_id >= 0);  // the CPU: device_id 0
}

// An operand in memory: from `data` to `end`, just past its last element (the end kept rather
// than the size: the overlap tests compare it as it is).
struct Span {
  char* data;
  int64_t rows, cols, ld;
  uintptr_t end;
};

// A tensor whose header check_header() accepted, with its rows, cols and ld set: data
// present, and data + byte_offset and the span from there do not wrap the address around.
inline bool placed(const DLTensor& t, const Kind& kind, Span& s) {
  uintptr_t data;
  if (t.data == nullptr || __builtin_add_overflow(reinterpret_cast<uintptr_t>(t.data), t.byte_offset, &data))
    return false;
  s.data = reinterpret_cast<char*>(data);
  const auto bytes = static_cast<uint64_t>((s.rows - 1) * s.ld + s.cols) << kind.element_shift;
  return !__builtin_add_overflow(data, bytes, &s.end);
}

// The tensor's device, ndim and dtype are those of the kind.
inline bool check_header(const DLTensor& t, uint32_t ndim, const Kind& kind) {
  const Header h = header_of(t);
  return ((h.device ^ kind.device) | (h.ndim_dtype ^ (kind.dtype + ndim))) == 0;
}

// A 2-D row-major matrix whose header is checked: the last dimension contiguous, rows and
// columns from 1 to 2^30, a row stride from the row length to 2^30 (a single row's stride
// is its length, as as_rows reads it).
inline bool matrix_body(const DLTensor& t, const Kind& kind, Span& m) {
  const int64_t* shape = t.shape;
  if (shape == nullptr) return false;
  m.rows = shape[0];
  m.cols = shape[1];
  m.ld = m.cols;
  if (const int64_t* strides = t.strides; strides != nullptr) {
    if (strides[1] != 1) return false;
    if (m.rows > 1) m.ld = strides[0];
  }
  // rows, cols >= 1 (rows - 1 wraps to a huge value below) and all three within the limit.
  const uint64_t sizes = (static_cast<uint64_t>(m.rows) - 1) | (static_cast<uint64_t>(m.cols) - 1) |
                         static_cast<uint64_t>(m.ld);
  if (sizes >= kSizeLimit || m.ld < m.cols) return false;
  return placed(t, kind, m);
}

// The first operand, a matrix: its kind and span.
inline bool first_matrix(const DLTensor* t, Kind& kind, Span& m) {
  return first_kind(t, 2, kind) && matrix_body(*t, kind, m);
}

// Any other matrix operand.
inline bool matrix(const DLTensor* t, const Kind& kind, Span& m) {
  return t != nullptr && check_header(*t, 2, kind) && matrix_body(*t, kind, m);
}

// A 1-D contiguous vector of `size` elements (1 <= size <= 2^30, checked by the caller).
inline bool vector(const DLTensor* t, const Kind& kind, int64_t size, Span& v) {
  if (t == nullptr || !check_header(*t, 1, kind) || t->shape == nullptr || t->shape[0] != size) return false;
  if (t->strides != nullptr && t->strides[0] != 1) return false;
  v.rows = 1;
  v.cols = v.ld = size;
  return placed(*t, kind, v);
}

// Do the two spans share memory? (Neither wraps the address around: placed() checked.)
inline bool overlap(const Span& a, const Span& b) {
  return reinterpret_cast<uintptr_t>(a.data) < b.end && reinterpret_cast<uintptr_t>(b.data) < a.end;
}

// The problem a call builds, as the words the selection cache hashes and compares (problem.hpp,
// problem_word): values the compiler keeps in registers, never stored. On a cache hit the call
// launches with the cache's copy of the problem, which is this one byte for byte (the cache's
// problems, like these, are zero outside their op's words); problem() writes it out.
struct Problem {
  uint64_t word[kProblemWords];
  // A field, at its offset in arb_problem: SET(p, m, value).
  template <size_t kOffset, typename T>
  ARBITER_HOT_INLINE void set(T value) {
    static_assert((sizeof(T) == 4 || sizeof(T) == 8) && kOffset % sizeof(T) == 0);
    uint64_t& w = word[kOffset / sizeof(uint64_t)];
    if constexpr (sizeof(T) == 8) {
      w = static_cast<uint64_t>(value);
    } else {
      constexpr int kShift = kOffset % sizeof(uint64_t) * 8;
      w = (w & ~(uint64_t{0xffffffff} << kShift)) | uint64_t{static_cast<uint32_t>(value)} << kShift;
    }
  }
  template <size_t kOffset, typename T>
  ARBITER_HOT_INLINE T get() const {
    static_assert((sizeof(T) == 4 || sizeof(T) == 8) && kOffset % sizeof(T) == 0);
    return static_cast<T>(word[kOffset / sizeof(uint64_t)] >> (kOffset % sizeof(uint64_t) * 8));
  }
  arb_problem problem() const {
    arb_problem p;
    std::memcpy(&p, word, sizeof p);
    return p;
  }
};
static_assert(sizeof(Problem) == sizeof(arb_problem));
#define ARBITER_FAST_SET(p, field, value) \
  (p).template set<offsetof(arb_problem, field), decltype(arb_problem::field)>(static_cast<decltype(arb_problem::field)>(value))
#define ARBITER_FAST_GET(p, field) (p).template get<offsetof(arb_problem, field), decltype(arb_problem::field)>()

// The problem's alignment class (call_alignment, tensor_views.hpp) from the OR of its operand
// addresses and of its row strides; false when an address is not aligned for the dtype (the
// class then falls below the element size).
[[gnu::always_inline]] inline bool set_alignment(uint64_t addresses, uint64_t strides, const Kind& kind, Problem& p) {
  const int32_t alignment = alignment_class({addresses, strides << kind.element_shift});
  ARBITER_FAST_SET(p, alignment, alignment);
  return (alignment >> kind.element_shift) != 0;  // alignment >= the element's bytes (both powers of two)
}

// The problem as the detailed path starts it (empty_problem, then the first operand's dtype
// and device: every other word zero) and the operands zeroed. The operands field by field
// rather than a memset: GCC makes a memset of this size a `rep stos`, a loop that costs as many
// instructions as it stores words, and these stores are mostly overwritten.
inline void start_operands(arb_operands& o) {
  static_assert(sizeof(arb_operands) == 160, "arb_operands grew: set the new fields here");
  o.struct_size = sizeof o;
  o.a = o.b = o.c = o.bias = o.residual = o.weight = nullptr;
  o.d = o.x = o.y = nullptr;
  o.alpha = o.beta = o.eps = o.reserved = 0.0f;
  o.gate = o.up = o.positions = nullptr;
  o.q = o.k = o.v = nullptr;
  o.o = nullptr;
  o.down = nullptr;
}
inline void start_problem(arb_op op, const Kind& kind, Problem& p) {
  p = Problem{};  // not a loop: GCC would make it a memset, which keeps the words in memory
  ARBITER_FAST_SET(p, struct_size, sizeof(arb_problem));
  ARBITER_FAST_SET(p, op, op);
  ARBITER_FAST_SET(p, dtype, kind.code);
  ARBITER_FAST_SET(p, device_type, kind.device_type);
  ARBITER_FAST_SET(p, device_id, kind.device_id);
}
inline void start_call(arb_op op, const Kind& kind, Problem& p, arb_operands& o) {
  start_problem(op, kind, p);
  start_operands(o);
}

}  // namespace arbiter::fast_path
