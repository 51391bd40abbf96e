// The openblas plugin: the vendor fallback on CPU. GEMM goes through cblas_sgemm; f16 and
// bf16 operands are widened to f32 in the host-provided workspace, and the epilogue (bias,
// activation, narrowing) is applied after, in a second pass over D. libopenblas runs with the
// strongest core the CPU runs (openblas_library.hpp), and the description says which core
// runs and why; it is loaded at the first supports() or launch when the entry can describe it
// from a memo of an earlier load (openblas_memo.hpp), else at the entry.
#include <arbiter/float16.hpp>
#include <arbiter/plugin.hpp>

#include "activation.hpp"
#include "openblas_library.hpp"

#include <cstring>

namespace {

using arbiter::plugin::Error;
using arbiter::plugin::Launch;
using arbiter::plugin::Why;
using arbiter::plugins::openblas::announcement;
using arbiter::plugins::openblas::Announcement;
using arbiter::plugins::openblas::CheckedLibrary;
using arbiter::plugins::openblas::openblas_library;

bool fits(const arb_problem& p, Why& why) {
  if (p.device_type != kDLCPU) return why.no("CPU tensors only");
  const int64_t limit = 0x7fffffff;  // cblas takes int sizes and strides
  if (p.m > limit || p.n > limit || p.k > limit || p.lda > limit || p.ldb > limit || p.ldc > limit || p.ldd > limit)
    return why.no("sizes and strides must fit a 32-bit int");
  const CheckedLibrary& library = openblas_library();  // loaded here on first use, and checked
  if (!library.ok()) return why.no("%s", library.error.c_str());
  return true;
}

// Stored rows x cols of an operand, in elements.
struct Shape {
  int64_t rows, cols;
};
Shape stored_a(const arb_problem& p) { return p.trans_a ? Shape{p.k, p.m} : Shape{p.m, p.k}; }
Shape stored_b(const arb_problem& p) { return p.trans_b ? Shape{p.n, p.k} : Shape{p.k, p.n}; }

bool widened(const arb_problem& p) { return p.dtype != ARB_DTYPE_F32; }

size_t workspace_bytes(const arb_problem& p) {
  if (!widened(p)) return 0;
  const Shape a = stored_a(p), b = stored_b(p);
  return static_cast<size_t>(a.rows * a.cols + b.rows * b.cols + p.m * p.n) * sizeof(float);
}

// Copies rows x cols elements (row stride ld) into a compact f32 array.
void widen(const void* source, int32_t dtype, int64_t rows, int64_t cols, int64_t ld, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = arbiter::load_float(source, r * ld + c, dtype);
}

void gemm(const Launch& l) {
  const arb_problem& p = l.problem;
  const arb_operands& o = l.operands;
  const CheckedLibrary& library = openblas_library();  // never launched unchecked
  if (!library.ok()) throw Error(ARB_ERR_UNSUPPORTED, library.error);
  const Shape a_shape = stored_a(p), b_shape = stored_b(p);
  const float* a = static_cast<const float*>(o.a);
  const float* b = static_cast<const float*>(o.b);
  float* d = static_cast<float*>(o.d);
  int64_t lda = p.lda, ldb = p.ldb, ldd = p.ldd;
  if (widened(p)) {
    float* work = static_cast<float*>(l.workspace);
    float* a32 = work;
    float* b32 = a32 + a_shape.rows * a_shape.cols;
    d = b32 + b_shape.rows * b_shape.cols;
    widen(o.a, p.dtype, a_shape.rows, a_shape.cols, p.lda, a32);
    widen(o.b, p.dtype, b_shape.rows, b_shape.cols, p.ldb, b32);
    if (p.has_c) widen(o.c, p.dtype, p.m, p.n, p.ldc, d);
    a = a32;
    b = b32;
    lda = a_shape.cols;
    ldb = b_shape.cols;
    ldd = p.n;
  } else if (p.has_c && !p.c_is_d) {
    for (int64_t i = 0; i < p.m; ++i)
      std::memcpy(d + i * ldd, static_cast<const float*>(o.c) + i * p.ldc, static_cast<size_t>(p.n) * sizeof(float));
  }
  library.library->sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), o.alpha, a, static_cast<int>(lda),
              b, static_cast<int>(ldb), p.has_c ? o.beta : 0.0f, d, static_cast<int>(ldd));

  // Epilogue: bias and activation, then narrow into D if the math ran in the workspace.
  const bool epilogue = p.has_bias || p.activation != ARB_ACT_NONE;
  if (!epilogue && !widened(p)) return;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      float v = d[i * ldd + j];
      if (p.has_bias) v += arbiter::load_float(o.bias, j, p.dtype);
      v = arbiter::plugins::activate<float>(p.activation, v);
      if (widened(p)) {
        arbiter::store_float(o.d, i * p.ldd + j, p.dtype, v);
      } else {
        d[i * ldd + j] = v;
      }
    }
  }
}

// Describes OpenBLAS from the memo, or loads it (throws, refusing the plugin, when it cannot).
arbiter::plugin::Plugin make_plugin() {
  const Announcement& said = announcement();
  arbiter::plugin::Plugin plugin("openblas", "1.0.0");
  plugin
      .description("OpenBLAS cblas_sgemm; f16/bf16 widened to f32, epilogue applied after. Core " + said.decision.reason)
      .provenance(ARB_PROVENANCE_VENDOR)
      .priority(50)
      .runtime_version("OpenBLAS " + said.config)  // names the core: a new core invalidates tuned entries
      .kernel(arbiter::plugin::Kernel("sgemm", ARB_OP_GEMM).supports(fits).workspace(workspace_bytes).launch(gemm));
  return plugin;
}

}  // namespace

ARBITER_PLUGIN(make_plugin())
