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
#include "problem/ops/call_key.hpp"
#include "problem/op.hpp"
#include "problem/problem.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__SSE2__)
#define ARBITER_HEADER_IN_SSE 1
#include <emmintrin.h>
#endif

namespace arbiter::fast_path {

// Sizes and row strides up to this many elements: no product of them (the span of an operand,
// in bytes) can overflow an int64, so the fast path needs no overflow checks.
inline constexpr uint64_t kSizeLimit = uint64_t(1) << 30;

// A DLTensor's device, ndim and dtype lie in 16 consecutive bytes: an operand's are checked
// against the first operand's in one test.
struct Header {
  uint64_t device;      // DLDevice: type, id
  uint64_t ndim_dtype;  // ndim, then DLDataType: code, bits, lanes
};
static_assert(offsetof(DLTensor, ndim) == offsetof(DLTensor, device) + 8 &&
              offsetof(DLTensor, dtype) == offsetof(DLTensor, device) + 12 && sizeof(Header) == 16);
inline const char* header_bytes(const DLTensor& t) { return reinterpret_cast<const char*>(&t) + offsetof(DLTensor, device); }
inline Header header_of(const DLTensor& t) {
  Header h;
  std::memcpy(&h, header_bytes(t), sizeof h);
  return h;
}
constexpr uint64_t ndim_dtype(uint32_t ndim, uint8_t code, uint8_t bits) {
  return ndim | call_key::dlpack_dtype(code, bits);  // lanes 1
}

// What every operand of a call shares, taken from the first (a matrix): its header, that is
// its device and dtype with ndim 2. On x86-64 the header is held in an SSE register, where it
// costs the fast path none of the general registers its checks run short of (a gemm call
// spilled 9 instructions' worth more with it in two of them).
struct Kind {
#ifdef ARBITER_HEADER_IN_SSE
  __m128i matrix_header;
  uint64_t device() const { return static_cast<uint64_t>(_mm_cvtsi128_si64(matrix_header)); }
  uint64_t ndim_dtype() const {
    return static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(matrix_header, matrix_header)));
  }
#else
  Header matrix_header;
  uint64_t device() const { return matrix_header.device; }
  uint64_t ndim_dtype() const { return matrix_header.ndim_dtype; }
#endif
  uint64_t dtype() const { return ndim_dtype() - 2; }  // ndim_dtype() with ndim 0: the call key's dtype bits
  int32_t element_shift;  // log2 of the element's bytes
};

// The first operand's kind, if it is 2-D, of a dtype arbiter runs and on the CPU (device_id 0)
// or a CUDA device.
inline bool first_kind(const DLTensor* t, Kind& kind) {
  if (t == nullptr) return false;
  const Header h = header_of(*t);
  if (h.ndim_dtype == ndim_dtype(2, kDLFloat, 32)) [[likely]] {
    kind.element_shift = 2;
  } else if (h.ndim_dtype == ndim_dtype(2, kDLFloat, 16) || h.ndim_dtype == ndim_dtype(2, kDLBfloat, 16)) {
    kind.element_shift = 1;
  } else {
    return false;  // another dtype, or another ndim
  }
#ifdef ARBITER_HEADER_IN_SSE
  kind.matrix_header = _mm_loadu_si128(reinterpret_cast<const __m128i*>(header_bytes(*t)));
#else
  kind.matrix_header = h;
#endif
  const auto device_type = static_cast<int32_t>(h.device);
  const auto device_id = static_cast<int32_t>(h.device >> 32);
  return h.device == kDLCPU || (device_type == kDLCUDA && device_id >= 0);  // the CPU: device_id 0
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

// The tensor's device and dtype are those of the kind, and it has `ndim` dimensions (1 or 2).
inline bool check_header(const DLTensor& t, uint32_t ndim, const Kind& kind) {
#ifdef ARBITER_HEADER_IN_SSE
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(header_bytes(t)));
  const __m128i expected =
      ndim == 2 ? kind.matrix_header : _mm_sub_epi64(kind.matrix_header, _mm_set_epi64x(2 - ndim, 0));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(h, expected)) == 0xffff;
#else
  const Header h = header_of(t);
  return ((h.device ^ kind.device()) | (h.ndim_dtype ^ (kind.dtype() + ndim))) == 0;
#endif
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
  return first_kind(t, kind) && matrix_body(*t, kind, m);
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

// The problem's alignment class (call_alignment, tensor_views.hpp) from the OR of its operand
// addresses and of its row strides, into the key's tag; false when an address is not aligned
// for the dtype (the class then falls below the element size).
[[gnu::always_inline]] inline bool set_alignment(uint64_t addresses, uint64_t strides, const Kind& kind, CallKey& key) {
  const int32_t alignment = alignment_class({addresses, strides << kind.element_shift});
  key.word[1] |= static_cast<uint64_t>(alignment) << call_key::kAlignmentShift;
  return (alignment >> kind.element_shift) != 0;  // alignment >= the element's bytes (both powers of two)
}

// The key started (the op, the first operand's dtype and device; every other word zero) and
// the operands zeroed. The operands field by field
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
inline void start_key(arb_op op, const Kind& kind, CallKey& key) {
  key = CallKey{};  // not a loop: GCC would make it a memset, which keeps the words in memory
  key.word[0] = kind.device();
  key.word[1] = kind.dtype() | static_cast<uint64_t>(op);
}
inline void start_call(arb_op op, const Kind& kind, CallKey& key, arb_operands& o) {
  start_key(op, kind, key);
  start_operands(o);
}

}  // namespace arbiter::fast_path
