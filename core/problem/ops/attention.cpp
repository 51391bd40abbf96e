// attention: scaled dot-product attention, per batch and query head O = softmax(scale Q K^T) V,
// Q [batch, q_len, heads, head_dim], K and V [batch, kv_len, kv_heads, head_dim] (grouped-
// query: query head h reads key/value head h / (heads / kv_heads)), O like Q, an optional
// causal mask aligned to the end of the keys. Each tensor has a stride per dimension (the last
// is contiguous), so that BSHD and BHSD layouts and the Q, K and V columns of a fused QKV
// projection are all taken where they lie. The scale travels in arb_operands.alpha.
#include "problem/ops/ops.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/shape_helpers.hpp"
#include "problem/ops/tensor_views.hpp"

#include "common/failure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <numeric>

namespace arbiter {
namespace {

// FlashAttention-class kernels keep a head in registers or shared memory; no model goes past 256.
constexpr int64_t kMaxHeadDim = 512;

// One of the four tensors: its name, whether it has the keys' length and heads, and its
// strides in arb_problem (batch, token, head).
struct TensorFields {
  const char* name;
  const char* stride_key;                 // in the problem text: "ldq=batch,token,head"
  std::array<const char*, 3> stride_names;  // for the gate's stride draws
  bool keys;  // K and V: [batch, kv_len, kv_heads, head_dim]
  std::array<int64_t arb_problem::*, 3> ld;
};
constexpr TensorFields kQ{"q", "ldq", {"ldq.batch", "ldq.token", "ldq.head"}, false,
                          {&arb_problem::ld_q_batch, &arb_problem::ld_q_token, &arb_problem::ld_q_head}};
constexpr TensorFields kK{"k", "ldk", {"ldk.batch", "ldk.token", "ldk.head"}, true,
                          {&arb_problem::ld_k_batch, &arb_problem::ld_k_token, &arb_problem::ld_k_head}};
constexpr TensorFields kV{"v", "ldv", {"ldv.batch", "ldv.token", "ldv.head"}, true,
                          {&arb_problem::ld_v_batch, &arb_problem::ld_v_token, &arb_problem::ld_v_head}};
constexpr TensorFields kO{"o", "ldo", {"ldo.batch", "ldo.token", "ldo.head"}, false,
                          {&arb_problem::ld_o_batch, &arb_problem::ld_o_token, &arb_problem::ld_o_head}};
constexpr std::array<const TensorFields*, 4> kTensors = {&kQ, &kK, &kV, &kO};

std::array<int64_t, 3> sizes_of(const arb_problem& p, const TensorFields& t) {
  return {p.batch, t.keys ? p.kv_len : p.q_len, t.keys ? p.kv_heads : p.heads};
}

// Elements from a tensor's first to just past its last: head_dim + sum of (size - 1) * stride.
// -1 when that overflows.
int64_t span_of(const std::array<int64_t, 3>& size, const std::array<int64_t, 3>& stride, int64_t dim) {
  int64_t span = dim;
  for (int i = 0; i < 3; ++i) {
    int64_t step = 0;
    if (__builtin_mul_overflow(size[i] - 1, stride[i], &step) || __builtin_add_overflow(span, step, &span)) return -1;
  }
  return span;
}
int64_t span_of(const arb_problem& p, const TensorFields& t) {
  return span_of(sizes_of(p, t), {p.*t.ld[0], p.*t.ld[1], p.*t.ld[2]}, p.cols);
}

// The dimensions of size > 1, innermost (smallest stride) first; equal strides in BSHD order
// (head, token, batch).
int order_of(const std::array<int64_t, 3>& size, const std::array<int64_t, 3>& stride, std::array<int, 3>& order) {
  int count = 0;
  for (int i = 2; i >= 0; --i)
    if (size[i] > 1) order[count++] = i;
  std::stable_sort(order.begin(), order.begin() + count, [&](int a, int b) { return stride[a] < stride[b]; });
  return count;
}

// Do no two elements share an address? Sufficient condition checked: each dimension steps over
// everything the dimensions inside it span (a nested layout: BSHD, BHSD and their paddings).
bool nested(const std::array<int64_t, 3>& size, const std::array<int64_t, 3>& stride, int64_t dim) {
  std::array<int, 3> order{};
  const int count = order_of(size, stride, order);
  int64_t span = dim;
  for (int i = 0; i < count; ++i) {
    const int d = order[static_cast<size_t>(i)];
    if (stride[d] < span) return false;
    span += (size[d] - 1) * stride[d];  // bounded by the whole span, checked first
  }
  return true;
}

// A dimension of size 1 has stride 0: equal problems get equal keys whatever the caller put there.
void zero_unit_strides(arb_problem& p) {
  for (const TensorFields* t : kTensors) {
    const auto size = sizes_of(p, *t);
    for (int i = 0; i < 3; ++i)
      if (size[i] == 1) p.*t->ld[i] = 0;
  }
}

// Packed BSHD strides with the head stride `ld_head` (K and V: with their own head count).
void set_packed(arb_problem& p, const TensorFields& t, int64_t ld_head) {
  const auto size = sizes_of(p, t);
  p.*t.ld[2] = ld_head;
  p.*t.ld[1] = size[2] * ld_head;
  p.*t.ld[0] = size[1] * size[2] * ld_head;
}

std::string strides_text(const arb_problem& p, const TensorFields& t) {
  return fmt::format("{},{},{}", p.*t.ld[0], p.*t.ld[1], p.*t.ld[2]);
}

class Attention final : public Op {
 public:
  arb_op code() const override { return ARB_OP_ATTENTION; }
  const char* name() const override { return "attention"; }
  ProblemWords problem_words() const override { return kAttentionProblemWords; }

  const std::vector<SizeField>& sizes() const override {
    static const std::vector<SizeField> fields = {{"batch", &arb_problem::batch},      {"q", &arb_problem::q_len},
                                                  {"kv", &arb_problem::kv_len},        {"heads", &arb_problem::heads},
                                                  {"kvheads", &arb_problem::kv_heads}, {"dim", &arb_problem::cols}};
    return fields;
  }

  void validate(const arb_problem& p) const override {
    if (p.batch < 1 || p.q_len < 1 || p.kv_len < 1 || p.heads < 1 || p.kv_heads < 1 || p.cols < 1)
      invalid_argument(fmt::format("attention sizes must be >= 1 (batch={} q={} kv={} heads={} kvheads={} dim={})", p.batch,
                                   p.q_len, p.kv_len, p.heads, p.kv_heads, p.cols));
    if (p.cols > kMaxHeadDim)
      invalid_argument(fmt::format("attention: head_dim = {} is above {}", p.cols, kMaxHeadDim));
    if (p.heads % p.kv_heads != 0)
      invalid_argument(fmt::format("attention: heads = {} is not a multiple of kv_heads = {}", p.heads, p.kv_heads));
    if (p.causal != 0 && p.causal != 1) invalid_argument(fmt::format("attention: causal = {} is neither 0 nor 1", p.causal));
    if (p.causal != 0 && p.kv_len < p.q_len)
      invalid_argument(fmt::format("attention: causal with kv_len = {} below q_len = {} (the mask is aligned to the end "
                                   "of the keys: the first queries would see no key)",
                                   p.kv_len, p.q_len));
    if (p.reserved_attention != 0) invalid_argument("attention: reserved_attention must be 0");
    for (const TensorFields* t : kTensors) {
      const auto size = sizes_of(p, *t);
      const std::array<int64_t, 3> stride = {p.*t->ld[0], p.*t->ld[1], p.*t->ld[2]};
      for (int i = 0; i < 3; ++i) {
        if (stride[i] < 0)
          invalid_argument(fmt::format("attention: {} has a negative stride ({})", t->name, stride[i]));
        if (size[i] == 1 && stride[i] != 0)
          invalid_argument(fmt::format("attention: {}'s dimension {} has size 1 and stride {} (a dimension of size 1 has "
                                       "stride 0)",
                                       t->name, i, stride[i]));
      }
      const int64_t span = span_of(size, stride, p.cols);
      if (span < 0 || span > INT64_MAX / 4)
        invalid_argument(fmt::format("attention: {}'s sizes and strides span more memory than an address can reach", t->name));
      if (t == &kO && !nested(size, stride, p.cols))
        invalid_argument(fmt::format("attention: o's strides ({}) put two of its elements at one address (each "
                                     "dimension must step over the ones inside it)",
                                     strides_text(p, kO)));
    }
  }

  std::string key_fields(const arb_problem& p) const override {
    return fmt::format("batch={} q={} kv={} heads={} kvheads={} dim={} causal={} ldq={} ldk={} ldv={} ldo={}", p.batch,
                       p.q_len, p.kv_len, p.heads, p.kv_heads, p.cols, p.causal, strides_text(p, kQ), strides_text(p, kK),
                       strides_text(p, kV), strides_text(p, kO));
  }
  std::string class_fields(const arb_problem& p) const override { return fmt::format("causal={}", p.causal); }

  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override {
    arb_problem& p = parsed.problem;
    p.batch = fields.take_int("batch", 1);
    p.q_len = fields.require_int("q");
    p.kv_len = fields.require_int("kv");
    p.heads = fields.require_int("heads");
    p.kv_heads = fields.take_int("kvheads", p.heads);
    p.cols = fields.require_int("dim");
    p.causal = fields.take_flag("causal") ? 1 : 0;
    // As in arb_attention_args: 0 (or absent) is 1 / sqrt(head_dim); otherwise finite.
    const float scale = fields.take_float("scale").value_or(0.0f);
    if (!std::isfinite(scale)) fields.bad(fmt::format("'scale={}': the scale must be finite", scale));
    parsed.alpha = scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, p.cols))));
    for (const TensorFields* t : kTensors) {
      // Packed BSHD by default; a product that overflows is left for validate() to name.
      int64_t packed_token = 0, packed_batch = 0;
      const auto size = sizes_of(p, *t);
      if (__builtin_mul_overflow(size[2], p.cols, &packed_token)) packed_token = INT64_MAX;
      if (__builtin_mul_overflow(size[1], packed_token, &packed_batch)) packed_batch = INT64_MAX;
      std::array<int64_t, 3> stride = {packed_batch, packed_token, p.cols};
      fields.take_ints(t->stride_key, stride.data(), stride.size());  // batch,token,head
      for (int i = 0; i < 3; ++i) p.*t->ld[static_cast<size_t>(i)] = stride[static_cast<size_t>(i)];
    }
    zero_unit_strides(p);
  }

  // Two products of q_len x kv_len x head_dim per head (Q K^T and P V); causal: the visible
  // part of the score matrix.
  double flops(const arb_problem& p) const override {
    return 4.0 * static_cast<double>(p.batch) * static_cast<double>(p.heads) * visible_pairs(p) *
           static_cast<double>(p.cols);
  }
  double bytes_moved(const arb_problem& p) const override {
    const double q = static_cast<double>(p.batch) * static_cast<double>(p.q_len) * static_cast<double>(p.heads);
    const double kv = static_cast<double>(p.batch) * static_cast<double>(p.kv_len) * static_cast<double>(p.kv_heads);
    return (2.0 * q + 2.0 * kv) * static_cast<double>(p.cols) * static_cast<double>(dtype_size(p.dtype));
  }
  double reference_cost(const arb_problem& p) const override {
    return 2.0 * static_cast<double>(p.batch) * static_cast<double>(p.heads) * static_cast<double>(p.q_len) *
           static_cast<double>(p.kv_len) * static_cast<double>(p.cols);
  }
  // Each output sums kv_len weighted values, each weight from a head_dim-term dot product.
  int64_t accumulated_terms(const arb_problem& p) const override { return std::max(p.kv_len, p.cols); }
  // An honest f32 kernel rounds each logit's dot product: about a unit of f32 rounding times
  // sqrt(head_dim) times the logits' spread, which the gate's draws keep near 64 times the
  // scale (|scale| <= 2), and the output, a softmax-weighted mean of the values, moves by about
  // as much relatively. (A one-accumulator dot product over head_dim 200 erred by 1.2e-5 at
  // scale 1, over the plain 1e-5; TF32 or bf16 math errs by 5e-4 and more, far above this.)
  double error_floor(const arb_problem& p) const override {
    return 0x1p-24 * std::sqrt(static_cast<double>(std::max<int64_t>(1, p.cols))) * 128.0;
  }

  std::string scalars_text(const arb_operands& o) const override { return fmt::format("scale {:g}", o.alpha); }

  // Each tensor as one span of memory from its first element to its last: the gaps between
  // its rows are inside it, so a kernel that writes o's gaps changes what the gate compares.
  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    std::vector<OperandLayout> out;
    for (const TensorFields* t : kTensors) {
      const int64_t span = span_of(p, *t);
      out.push_back({t->name, t != &kO, t == &kO, 1, span, span});
    }
    return out;
  }

  arb_problem resized(const arb_problem& p, const Sizes& s) const override {
    arb_problem r = p;
    r.batch = s.value[0];
    r.q_len = s.value[1];
    r.kv_len = s.value[2];
    r.heads = s.value[3];
    r.kv_heads = s.value[4];
    r.cols = s.value[5];
    // Sizes brought down one by one (verification_shapes.cpp) may break the problem's rules:
    // the nearest problem that keeps them.
    if (r.heads % r.kv_heads != 0) r.kv_heads = std::gcd(r.heads, r.kv_heads);
    if (r.causal != 0 && r.kv_len < r.q_len) r.kv_len = r.q_len;
    const int64_t ld_head = stride_with_alignment(r.cols, dtype_size(p.dtype), p.alignment);
    for (const TensorFields* t : kTensors) set_packed(r, *t, ld_head);
    zero_unit_strides(r);
    r.alignment = stride_alignment(r);
    return r;
  }

  // Batch and heads are independent problems: a few are enough (the group of query heads per
  // key/value head kept up to 4); head_dim is what kernels specialise on: kept.
  Sizes verification_sizes(const arb_problem& p) const override {
    const int64_t kv_heads = shrink(p.kv_heads, 2);
    const int64_t group = shrink(p.heads / std::max<int64_t>(1, p.kv_heads), 4);
    const int64_t q = shrink(p.q_len, 16);
    int64_t kv = shrink(p.kv_len, 256);
    if (p.causal != 0) kv = std::max(kv, q);
    return {{shrink(p.batch, 2), q, kv, group * kv_heads, kv_heads, p.cols}};
  }

  std::vector<SizedShape> edge_shapes(const Sizes& v) const override {
    const int64_t dim = v.value[5];
    return {{{{1, 1, 1, 1, 1, dim}}, "edge: one query, one key"},
            {{{1, 1, 67, 4, 1, dim}}, "edge: decode against 67 keys (past a block of 64), 4 query heads a key/value head"},
            {{{2, 3, 5, 2, 2, dim}}, "edge: two sequences, small odd lengths"},
            {{{1, 17, 17, 2, 1, dim}}, "edge: a square of 17 queries and keys"},
            {{{1, 2, 130, 3, 3, dim}}, "edge: 130 keys (past two blocks of 64), 3 heads"},
            {{{1, 2, 9, 2, 1, 8}}, "edge: head_dim 8"}};
  }

  // The least strides are packed BSHD; tie_strides then orders each tensor's dimensions by
  // the strides drawn and makes each step over the ones inside it (o must not overlap itself;
  // q, k and v get the same, so that the gate's layouts are ones callers make).
  std::vector<StrideField> strides(const arb_problem& p) const override {
    std::vector<StrideField> out;
    for (const TensorFields* t : kTensors) {
      const auto size = sizes_of(p, *t);
      out.push_back({t->stride_names[2], t->ld[2], p.cols});
      out.push_back({t->stride_names[1], t->ld[1], size[2] * p.cols});
      out.push_back({t->stride_names[0], t->ld[0], size[1] * size[2] * p.cols});
    }
    return out;
  }
  void tie_strides(arb_problem& p) const override {
    for (const TensorFields* t : kTensors) {
      const auto size = sizes_of(p, *t);
      std::array<int64_t, 3> stride = {p.*t->ld[0], p.*t->ld[1], p.*t->ld[2]};
      std::array<int, 3> order{};
      const int count = order_of(size, stride, order);
      // A stride raised becomes the one inside it times its size: a multiple of that stride,
      // so the alignment class the strides were drawn in is kept.
      int64_t span = p.cols, step = p.cols;
      for (int i = 0; i < count; ++i) {
        const int d = order[static_cast<size_t>(i)];
        if (stride[d] < span) stride[d] = std::max(step, span);
        span += (size[d] - 1) * stride[d];
        step = size[d] * stride[d];
      }
      for (int i = 0; i < 3; ++i) p.*t->ld[static_cast<size_t>(i)] = size[i] == 1 ? 0 : stride[i];
    }
  }

  // Logits far past exp's f32 range (a kernel must subtract the row's maximum), all of one
  // sign, and operands of very different magnitudes. q and k are scaled so that the logits
  // spread by about 64 (times the scale) whatever head_dim is: far enough that e^logit
  // overflows f32, near enough that an honest f32 kernel's rounding of the dot products
  // (about one unit of f32 rounding of the logits) stays under the tolerance.
  std::vector<InputDraw> hard_inputs(const arb_problem& p) const override {
    const double spread = std::sqrt(64.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, p.cols))));
    InputDraw large{"normal q, k and v scaled so that the logits spread by about 64: past exp's f32 range",
                    InputDraw::Base::normal};
    large.low_scale = large.high_scale = spread;
    InputDraw positive{"q and k positive: logits of one sign, their sum past exp's range"};
    positive.one_signed = "q,k";
    InputDraw mixed{"operands of magnitudes 1e-3 up to the large draw's"};
    mixed.low_scale = 1e-3;
    mixed.high_scale = spread;
    return {large, positive, mixed};
  }

  const char* example_fields() const override { return "batch=1 q=1 kv=256 heads=8 kvheads=2 dim=64"; }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_attention_args*>(raw_args);
    check_args(args, "arb_attention", ARB_ATTENTION_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    const DLTensor* tensors[4] = {args->q, args->k, args->v, args->o};
    for (size_t i = 0; i < 4; ++i) check_tensor(tensors[i], kTensors[i]->name, p);
    for (size_t i = 0; i < 4; ++i)
      if (tensors[i]->ndim != 4)
        invalid_argument(fmt::format("{} must be 4-D, [batch, {}, {}, head_dim]; got {} dimensions", kTensors[i]->name,
                                     kTensors[i]->keys ? "kv_len" : "q_len", kTensors[i]->keys ? "kv_heads" : "heads",
                                     tensors[i]->ndim));
    const int64_t* q = args->q->shape;
    const int64_t* k = args->k->shape;
    if (k[0] != q[0] || k[3] != q[3])
      invalid_argument(fmt::format("k must be [batch, kv_len, kv_heads, head_dim] with q's batch ({}) and head_dim ({}); "
                                   "got [{}, {}, {}, {}]",
                                   q[0], q[3], k[0], k[1], k[2], k[3]));
    check_same_shape(args->v, "v", args->k, "k");
    check_same_shape(args->o, "o", args->q, "q");
    p.batch = q[0];
    p.q_len = q[1];
    p.heads = q[2];
    p.cols = q[3];
    p.kv_len = k[1];
    p.kv_heads = k[2];
    if (args->causal != 0 && args->causal != 1)
      invalid_argument(fmt::format("causal must be 0 or 1, got {}", args->causal));
    p.causal = args->causal;
    if (!std::isfinite(args->scale)) invalid_argument(fmt::format("scale must be finite, got {}", args->scale));
    Matrix spans[4];
    for (size_t i = 0; i < 4; ++i) spans[i] = bind_strides(tensors[i], *kTensors[i], p);
    zero_unit_strides(p);
    for (size_t i = 0; i < 3; ++i) check_disjoint(spans[3], spans[i]);
    arb_operands& o = call.operands;
    o = arb_operands{};
    o.struct_size = sizeof o;
    o.q = spans[0].data;
    o.k = spans[1].data;
    o.v = spans[2].data;
    o.o = spans[3].data;
    o.alpha = args->scale != 0.0f ? args->scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.cols)));
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
  }

  void plan_slots(const void* raw_args, const arb_problem&, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_attention_args*>(raw_args);
    slots[0] = {"q", args->q, offsetof(arb_operands, q)};
    slots[1] = {"k", args->k, offsetof(arb_operands, k)};
    slots[2] = {"v", args->v, offsetof(arb_operands, v)};
    slots[3] = {"o", args->o, offsetof(arb_operands, o), true};
  }

 private:
  // A 4-D tensor's strides into the problem (the last dimension contiguous; compact when the
  // tensor has none) and the memory it spans.
  static Matrix bind_strides(const DLTensor* t, const TensorFields& fields, arb_problem& p) {
    const int64_t* shape = t->shape;
    std::array<int64_t, 3> stride{};
    if (t->strides == nullptr) {
      stride[2] = shape[3];
      if (__builtin_mul_overflow(stride[2], shape[2], &stride[1]) || __builtin_mul_overflow(stride[1], shape[1], &stride[0]))
        invalid_argument(fmt::format("{}: the product of its sizes overflows", fields.name));
    } else {
      if (shape[3] > 1 && t->strides[3] != 1)
        invalid_argument(fmt::format("{}: the last dimension (head_dim) must be contiguous (stride 1, got {})", fields.name,
                                     t->strides[3]));
      for (int i = 0; i < 3; ++i) {
        if (t->strides[i] < 0)
          invalid_argument(fmt::format("{}: stride {} of dimension {} is negative", fields.name, t->strides[i], i));
        stride[static_cast<size_t>(i)] = t->strides[i];
      }
    }
    for (int i = 0; i < 3; ++i) p.*fields.ld[static_cast<size_t>(i)] = shape[i] == 1 ? 0 : stride[static_cast<size_t>(i)];
    const int64_t span = span_of({shape[0], shape[1], shape[2]}, {p.*fields.ld[0], p.*fields.ld[1], p.*fields.ld[2]}, shape[3]);
    Matrix m{fields.name, data_of(t), 1, span, span};
    int64_t bytes = 0;
    if (span < 0 || __builtin_mul_overflow(span, static_cast<int64_t>(dtype_size(p.dtype)), &bytes) ||
        static_cast<uint64_t>(bytes) > UINTPTR_MAX - address(m.data))
      invalid_argument(fmt::format("{}: its sizes and strides span more memory than an address can reach", fields.name));
    m.bytes = static_cast<uint64_t>(bytes);
    return m;
  }

  static double visible_pairs(const arb_problem& p) {
    const double q = static_cast<double>(p.q_len), kv = static_cast<double>(p.kv_len);
    if (p.causal == 0) return q * kv;
    // Query i sees i + kv - q + 1 keys: q (kv - q) + q (q + 1) / 2 in all.
    return q * (kv - q) + q * (q + 1) / 2;
  }
};

}  // namespace

namespace {
constinit const Attention kAttention;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& attention_op() { return kAttention; }

}  // namespace arbiter
