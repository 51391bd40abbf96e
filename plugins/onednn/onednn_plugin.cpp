// The onednn plugin: oneDNN's matmul on CPU, the vendor library a CPU user would pick, with
// whatever ISA it finds (AMX, AVX512-BF16, AVX-512, AVX2). libdnnl is loaded on the first
// supports() or launch, not at the plugin's entry (a context must stay cheap); its
// primitives are cached per problem (primitive_cache.hpp). GEMM only: oneDNN 2.6 has no
// RMSNorm (layer normalisation subtracts the mean), and its softmax gives 0 where arbiter's
// gives NaN (a row of -inf logits), which the verification gate rejects.
#include <arbiter/float16.hpp>
#include <arbiter/plugin.hpp>

#include "onednn_library.hpp"
#include "primitive_cache.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

using arbiter::plugin::Error;
using arbiter::plugin::Launch;
using arbiter::plugin::Why;
using namespace arbiter::plugins::onednn;

// What can be decided without oneDNN; then the cached entry decides.
bool fits(const arb_problem& p, Why& why) {
  if (p.op != ARB_OP_GEMM) return why.no("gemm only");
  if (p.device_type != kDLCPU) return why.no("CPU tensors only");
  if (p.dtype != ARB_DTYPE_F32 && p.dtype != ARB_DTYPE_F16 && p.dtype != ARB_DTYPE_BF16) return why.no("unknown dtype");
  if (p.flags != 0) return why.no("unknown problem flags");
  if (p.batch > 1) return why.no("batched gemm is not supported");
  if (p.m < 1 || p.n < 1 || p.k < 1) return why.no("empty gemm");
  if (p.activation < ARB_ACT_NONE || p.activation > ARB_ACT_SILU) return why.no("unknown activation");
  const OneDnnLibrary& library = onednn_library();  // loaded here, on first use
  if (!library.ok()) return why.no("%s", library.error().c_str());
  std::unique_ptr<Entry> spare;
  const Entry& entry = primitive_cache().find(library, p, spare);
  if (!entry.supported) return why.no("%s", entry.why.c_str());
  return true;
}

size_t workspace_bytes(const arb_problem& p) {
  const OneDnnLibrary& library = onednn_library();
  if (!library.ok()) return 0;
  std::unique_ptr<Entry> spare;
  return primitive_cache().find(library, p, spare).workspace_bytes;
}

// Can the rescaled variant take this call: C with beta other than 1, and alpha / beta an f32
// that cannot overflow where the product's own scale would not (beta not tiny)?
bool rescales(const Entry& entry, const arb_problem& p, const arb_operands& o) {
  return p.has_c && o.beta != 1.0f && entry.rescaled.primitive != nullptr && std::fabs(o.beta) >= 0x1p-20f &&
         std::isfinite(o.alpha / o.beta);
}

// D prepared for the sum post-op (D += s A B): C copied into it (exact), or, where the
// rescaled variant cannot take beta, beta C (rounded to D's dtype).
void prepare_accumulator(const arb_problem& p, const arb_operands& o, bool rescaled) {
  const bool copy = o.beta == 1.0f || rescaled;
  if (!p.has_c || (p.c_is_d && copy)) return;
  const size_t element = p.dtype == ARB_DTYPE_F32 ? 4 : 2;
  for (int64_t i = 0; i < p.m; ++i) {
    if (copy) {
      std::memcpy(static_cast<char*>(o.d) + static_cast<size_t>(i * p.ldd) * element,
                  static_cast<const char*>(o.c) + static_cast<size_t>(i * p.ldc) * element, static_cast<size_t>(p.n) * element);
      continue;
    }
    for (int64_t j = 0; j < p.n; ++j)
      arbiter::store_float(o.d, i * p.ldd + j, p.dtype, o.beta * arbiter::load_float(o.c, i * p.ldc + j, p.dtype));
  }
}

void gemm(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  const OneDnnLibrary& library = onednn_library();
  if (!library.ok()) throw Error(ARB_ERR_UNSUPPORTED, library.error());
  std::unique_ptr<Entry> spare;  // used only when the cache is full
  Entry& entry = primitive_cache().find(library, p, spare);
  if (!entry.supported) throw Error(ARB_ERR_UNSUPPORTED, entry.why);
  const bool rescaled = rescales(entry, p, o);
  Variant& variant = rescaled ? entry.rescaled : o.alpha != 1.0f ? entry.scaled : entry.plain;

  char* scratchpad = nullptr;
  if (variant.scratchpad_bytes > 0) {
    const uintptr_t at = (reinterpret_cast<uintptr_t>(l.workspace) + 63) & ~uintptr_t(63);
    if (l.workspace == nullptr || at + variant.scratchpad_bytes >
                                      reinterpret_cast<uintptr_t>(l.workspace) + l.workspace_bytes)
      throw Error(ARB_ERR_INVALID_ARGUMENT, "the workspace is smaller than workspace_size() asked for");
    scratchpad = reinterpret_cast<char*>(at);
  }
  prepare_accumulator(p, o, rescaled);
  SlotLease lease(library, entry, variant);
  Slot& slot = lease.slot();
  void* data[kArgumentCount] = {};
  data[kSrc] = const_cast<void*>(o.a);  // oneDNN's memory objects take non-const handles
  data[kWeights] = const_cast<void*>(o.b);
  data[kDst] = o.d;
  data[kBias] = const_cast<void*>(o.bias);
  slot.scale = rescaled ? o.alpha / o.beta : o.alpha;
  slot.beta = o.beta;
  data[kScale] = &slot.scale;
  data[kBeta] = &slot.beta;
  data[kScratchpad] = scratchpad;
  dnnl_exec_arg_t arguments[kArgumentCount];
  int count = 0;
  for (int i = 0; i < kArgumentCount; ++i) {
    if (slot.memory[i] == nullptr) continue;
    if (library.dnnl_memory_set_data_handle(slot.memory[i], data[i]) != dnnl_success)
      throw Error(ARB_ERR_KERNEL, "oneDNN refused a data pointer");
    arguments[count++] = dnnl_exec_arg_t{variant.argument_id[i], slot.memory[i]};
  }
  dnnl_status_t s = library.dnnl_primitive_execute(variant.primitive, slot.stream, count, arguments);
  if (s == dnnl_success) s = library.dnnl_stream_wait(slot.stream);
  if (s != dnnl_success)
    throw Error(ARB_ERR_KERNEL, std::string("oneDNN execution failed: ") + OneDnnLibrary::status_name(s));
}

arbiter::plugin::Plugin make_plugin() {
  const Expectation& expected = expectation();  // no libdnnl here: see onednn_library.hpp
  arbiter::plugin::Plugin plugin("onednn", "1.0.0");
  plugin
      .description("oneDNN " + std::to_string(expected.major) + "." + std::to_string(expected.minor) + "." +
                   std::to_string(expected.patch) + " matmul (f32, bf16; f16 where oneDNN has it) with its epilogue as "
                   "post-ops; isa " + expected.isa_name + "; loaded on first use, primitives cached per problem")
      .provenance(ARB_PROVENANCE_VENDOR)
      .priority(40)  // below openblas: without a tuned table, dispatch keeps its choices; tuning decides per shape
      .runtime_version(expected.runtime_version())
      .kernel(arbiter::plugin::Kernel("matmul", ARB_OP_GEMM).supports(fits).workspace(workspace_bytes).launch(gemm));
  return plugin;
}

}  // namespace

ARBITER_PLUGIN(make_plugin())
