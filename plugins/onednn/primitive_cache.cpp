#include "primitive_cache.hpp"

#include <arbiter/plugin.hpp>

#include <algorithm>
#include <cstring>

namespace arbiter::plugins::onednn {
namespace {

using arbiter::plugin::Error;

dnnl_data_type_t dnnl_type(int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return dnnl_f32;
    case ARB_DTYPE_F16: return dnnl_f16;
    case ARB_DTYPE_BF16: return dnnl_bf16;
    default: return dnnl_data_type_undef;
  }
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case ARB_DTYPE_F32: return "f32";
    case ARB_DTYPE_F16: return "f16";
    case ARB_DTYPE_BF16: return "bf16";
    default: return "?";
  }
}

// A row-major 2-D tensor: rows x cols, `row_stride` and `col_stride` in elements.
bool matrix(const OneDnnLibrary& l, dnnl_memory_desc_t& md, int64_t rows, int64_t cols, int64_t row_stride,
            int64_t col_stride, int32_t dtype) {
  const dnnl_dims_t dims = {rows, cols};
  const dnnl_dims_t strides = {row_stride, col_stride};
  return l.dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_type(dtype), strides) == dnnl_success;
}

// Owns what a primitive descriptor is made from.
struct Attributes {
  const OneDnnLibrary& l;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t post_ops = nullptr;
  explicit Attributes(const OneDnnLibrary& library) : l(library) {}
  ~Attributes() {
    if (post_ops) l.dnnl_post_ops_destroy(post_ops);
    if (attr) l.dnnl_primitive_attr_destroy(attr);
  }
};

dnnl_alg_kind_t eltwise_of(int32_t activation, float& alpha) {
  alpha = 0.0f;
  switch (activation) {
    case ARB_ACT_RELU: return dnnl_eltwise_relu;  // alpha 0: max(x, 0)
    case ARB_ACT_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    case ARB_ACT_GELU_ERF: return dnnl_eltwise_gelu_erf;
    case ARB_ACT_SILU: alpha = 1.0f; return dnnl_eltwise_swish;  // x * sigmoid(alpha x)
    default: return dnnl_alg_kind_undef;
  }
}

// Makes the descriptor of one variant; false and `why` when oneDNN has no fast one.
bool describe(const OneDnnLibrary& l, const void* op_descriptor, const Attributes& a, Variant& v, std::string& why,
              const std::string& what) {
  const dnnl_status_t s = l.dnnl_primitive_desc_create(&v.descriptor, op_descriptor, a.attr, l.engine(), nullptr);
  if (s != dnnl_success) {
    v.descriptor = nullptr;
    why = "oneDNN has no " + what + " (" + OneDnnLibrary::status_name(s) + ")";
    return false;
  }
  if (const dnnl_status_t c = l.dnnl_primitive_create(&v.primitive, v.descriptor); c != dnnl_success) {
    v.primitive = nullptr;
    why = "oneDNN could not create the " + what + " (" + OneDnnLibrary::status_name(c) + ")";
    return false;
  }
  // What runs is the primitive's own descriptor (see Variant): it says the implementation
  // and the scratchpad.
  const_dnnl_primitive_desc_t actual = nullptr;
  if (l.dnnl_primitive_get_primitive_desc(v.primitive, &actual) != dnnl_success || actual == nullptr) {
    why = "oneDNN cannot describe its " + what;
    return false;
  }
  const char* implementation = nullptr;
  if (l.dnnl_primitive_desc_query(actual, dnnl_query_impl_info_str, 0, &implementation) == dnnl_success &&
      implementation != nullptr)
    v.implementation = implementation;
  // Its reference implementations are plain loops, far slower than the reference plugin's
  // role needs and than any other CPU kernel here: not offered.
  if (v.implementation.rfind("ref", 0) == 0) {
    why = "oneDNN has only its reference implementation (" + v.implementation + ") for " + what;
    return false;
  }
  if (const dnnl_memory_desc_t* scratchpad = l.dnnl_primitive_desc_query_md(actual, dnnl_query_scratchpad_md, 0)) {
    v.scratchpad = *scratchpad;
    v.scratchpad_bytes = l.dnnl_memory_desc_get_size(scratchpad);
  }
  return true;
}

void destroy_variant(const OneDnnLibrary& l, Variant& v);

void build_gemm(const OneDnnLibrary& l, const arb_problem& p, Entry& e) {
  const std::string what = std::string(dtype_name(p.dtype)) + " matmul with this layout and epilogue on isa " +
                           expectation().isa_name;
  auto& md = e.descriptor;
  const bool ok = matrix(l, md[kSrc], p.m, p.k, p.trans_a ? 1 : p.lda, p.trans_a ? p.lda : 1, p.dtype) &&
                  matrix(l, md[kWeights], p.k, p.n, p.trans_b ? 1 : p.ldb, p.trans_b ? p.ldb : 1, p.dtype) &&
                  matrix(l, md[kDst], p.m, p.n, p.ldd, 1, p.dtype) && matrix(l, md[kBias], 1, p.n, p.n, 1, p.dtype);
  const dnnl_dims_t one = {1};
  const dnnl_dims_t unit = {1};
  if (!ok || l.dnnl_memory_desc_init_by_strides(&md[kScale], 1, one, dnnl_f32, unit) != dnnl_success ||
      !matrix(l, md[kBeta], 1, 1, 1, 1, ARB_DTYPE_F32)) {  // one value, broadcast over D
    e.why = "oneDNN rejects these sizes or strides";
    return;
  }
  dnnl_matmul_desc_t matmul;
  if (l.dnnl_matmul_desc_init(&matmul, &md[kSrc], &md[kWeights], nullptr, &md[kDst]) != dnnl_success) {
    e.why = "oneDNN rejects this matmul";
    return;
  }

  // In order: D = act(s * A * B + 1 * D [* beta] + bias), D holding C already. s is 1 (plain),
  // alpha (scaled) or alpha / beta (rescaled, which multiplies by beta after the sum: beta C is
  // then formed in f32, never rounded to D's dtype on its own). The bias is a post-op, not
  // matmul's own bias, which oneDNN 2.x adds before the output scale.
  auto build = [&](Variant& v, bool runtime_scale, bool times_beta, std::string& why) {
    Attributes a(l);
    bool made = l.dnnl_primitive_attr_create(&a.attr) == dnnl_success &&
                l.dnnl_primitive_attr_set_scratchpad_mode(a.attr, dnnl_scratchpad_mode_user) == dnnl_success &&
                l.dnnl_post_ops_create(&a.post_ops) == dnnl_success;
    v.argument_id[kSrc] = DNNL_ARG_SRC;
    v.argument_id[kWeights] = DNNL_ARG_WEIGHTS;
    v.argument_id[kDst] = DNNL_ARG_DST;
    if (made && runtime_scale) {
      // a run-time scale, one value (mask 0).
      const float runtime = DNNL_RUNTIME_F32_VAL;
      made = l.dnnl_primitive_attr_set_output_scales(a.attr, 1, 0, &runtime) == dnnl_success;
      v.argument_id[kScale] = DNNL_ARG_ATTR_OUTPUT_SCALES;
    }
    int index = 0;
    if (made && p.has_c) {
      made = l.dnnl_post_ops_append_sum(a.post_ops, 1.0f) == dnnl_success;
      ++index;
    }
    if (made && times_beta) {
      made = l.dnnl_post_ops_append_binary(a.post_ops, dnnl_binary_mul, &md[kBeta]) == dnnl_success;
      v.argument_id[kBeta] = DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1;
      ++index;
    }
    if (made && p.has_bias) {
      made = l.dnnl_post_ops_append_binary(a.post_ops, dnnl_binary_add, &md[kBias]) == dnnl_success;
      v.argument_id[kBias] = DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1;
      ++index;
    }
    if (made && p.activation != ARB_ACT_NONE) {
      float alpha = 0.0f;
      const dnnl_alg_kind_t kind = eltwise_of(p.activation, alpha);
      made = kind != dnnl_alg_kind_undef && l.dnnl_post_ops_append_eltwise(a.post_ops, 1.0f, kind, alpha, 0.0f) == dnnl_success;
    }
    if (made) made = l.dnnl_primitive_attr_set_post_ops(a.attr, a.post_ops) == dnnl_success;
    if (!made) {
      why = "oneDNN rejects this epilogue";
      return false;
    }
    if (!describe(l, &matmul, a, v, why, what)) return false;
    if (v.scratchpad_bytes > 0) v.argument_id[kScratchpad] = DNNL_ARG_SCRATCHPAD;
    return true;
  };
  if (!build(e.plain, false, false, e.why) || !build(e.scaled, true, false, e.why)) return;
  // Without it (oneDNN has no fast one), a beta other than 1 scales C into D first.
  std::string why_not;
  if (p.has_c && !build(e.rescaled, true, true, why_not)) destroy_variant(l, e.rescaled);
  e.supported = true;
}

void destroy_variant(const OneDnnLibrary& l, Variant& v) {
  for (auto& slot : v.slots) {
    for (dnnl_memory_t m : slot->memory)
      if (m) l.dnnl_memory_destroy(m);
    if (slot->stream) l.dnnl_stream_destroy(slot->stream);
  }
  v.slots.clear();
  v.free_slots.clear();
  if (v.primitive) l.dnnl_primitive_destroy(v.primitive);
  if (v.descriptor) l.dnnl_primitive_desc_destroy(v.descriptor);
  v.primitive = nullptr;
  v.descriptor = nullptr;
  v.argument_id = {};
  v.scratchpad_bytes = 0;
}

}  // namespace

size_t ProblemKeyHash::operator()(const ProblemKey& key) const noexcept {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  for (int64_t f : key.fields) {
    h ^= static_cast<uint64_t>(f);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

ProblemKey key_of(const arb_problem& p) {
  ProblemKey key;
  key.fields = {p.op, p.dtype, p.m, p.n, p.k, p.lda, p.ldb, p.ldd, p.trans_a, p.trans_b, p.activation, p.has_c, p.has_bias};
  return key;
}

std::unique_ptr<Entry> build_entry(const OneDnnLibrary& library, const arb_problem& p) {
  auto entry = std::make_unique<Entry>();
  if (!library.ok()) {
    entry->why = library.error();
    return entry;
  }
  if (p.op == ARB_OP_GEMM) build_gemm(library, p, *entry);
  else entry->why = "not an op of this plugin";
  if (!entry->supported) return entry;  // its destructor releases what was made
  const size_t scratchpad =
      std::max({entry->plain.scratchpad_bytes, entry->scaled.scratchpad_bytes, entry->rescaled.scratchpad_bytes});
  entry->workspace_bytes = scratchpad > 0 ? scratchpad + 64 : 0;  // room to align it to 64
  return entry;
}

Entry::~Entry() {
  const OneDnnLibrary& library = onednn_library();  // loaded: an entry exists only after it
  destroy_variant(library, plain);
  destroy_variant(library, scaled);
  destroy_variant(library, rescaled);
}

Entry& PrimitiveCache::find(const OneDnnLibrary& library, const arb_problem& p, std::unique_ptr<Entry>& spare) {
  const ProblemKey key = key_of(p);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) return *it->second;
  }
  // Built outside the lock (oneDNN may take a while); a racing builder's entry is dropped.
  std::unique_ptr<Entry> built = build_entry(library, p);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) return *it->second;  // `built` is released
  if (entries_.size() >= kCapacity) {
    spare = std::move(built);
    return *spare;
  }
  return *entries_.emplace(key, std::move(built)).first->second;
}

size_t PrimitiveCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

PrimitiveCache& primitive_cache() {
  onednn_library();  // constructed first, so destroyed after the cache
  static PrimitiveCache cache;
  return cache;
}

SlotLease::SlotLease(const OneDnnLibrary& l, Entry& entry, Variant& variant) : variant_(variant) {
  std::lock_guard<std::mutex> lock(variant.slots_mutex);
  if (!variant.free_slots.empty()) {
    slot_ = variant.free_slots.back();
    variant.free_slots.pop_back();
    return;
  }
  // A launch of this problem is already running in another thread (or this is the first):
  // a new slot, the one allocation of this path.
  auto slot = std::make_unique<Slot>();
  bool made = l.dnnl_stream_create(&slot->stream, l.engine(), dnnl_stream_default_flags) == dnnl_success;
  for (int i = 0; made && i < kArgumentCount; ++i) {
    if (variant.argument_id[i] == 0) continue;
    const dnnl_memory_desc_t* md = i == kScratchpad ? &variant.scratchpad : &entry.descriptor[i];
    void* handle = i == kScale ? &slot->scale : i == kBeta ? &slot->beta : DNNL_MEMORY_NONE;
    made = l.dnnl_memory_create(&slot->memory[i], md, l.engine(), handle) == dnnl_success;
  }
  if (!made) {
    for (dnnl_memory_t m : slot->memory)
      if (m) l.dnnl_memory_destroy(m);
    if (slot->stream) l.dnnl_stream_destroy(slot->stream);
    throw Error(ARB_ERR_OUT_OF_MEMORY, "oneDNN could not create a stream or memory objects");
  }
  variant.free_slots.reserve(variant.slots.size() + 1);
  slot_ = slot.get();
  variant.slots.push_back(std::move(slot));
}

SlotLease::~SlotLease() {
  std::lock_guard<std::mutex> lock(variant_.slots_mutex);
  variant_.free_slots.push_back(slot_);  // capacity reserved: no allocation
}

}  // namespace arbiter::plugins::onednn
