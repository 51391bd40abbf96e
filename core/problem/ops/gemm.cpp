// gemm: D[m,n] = act(alpha * op(A)[m,k] * op(B)[k,n] + beta * C[m,n] + bias[n]), row-major.
#include "problem/ops/ops.hpp"

#include "common/failure.hpp"
#include "arbiter_base/abi_names.hpp"
#include "problem/ops/problem_words.hpp"
#include "problem/ops/shape_helpers.hpp"
#include "problem/ops/tensor_views.hpp"
#include "problem/problem.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <cstring>

namespace arbiter {
namespace {

// Verification sizes: the fp64 reference costs m*n*k multiply-adds per trial.
constexpr int64_t kMaxVerifyDim = 128;

class Gemm final : public Op {
 public:
  arb_op code() const override { return ARB_OP_GEMM; }
  ProblemWords problem_words() const override { return kGemmProblemWords; }
  const char* name() const override { return "gemm"; }
  const std::vector<SizeField>& sizes() const override {
    static const std::vector<SizeField> fields = {
        {"m", &arb_problem::m}, {"n", &arb_problem::n}, {"k", &arb_problem::k}};
    return fields;
  }
  void set_defaults(arb_problem& p) const override { p.batch = 1; }

  std::string key_fields(const arb_problem& p) const override {
    std::string key = fmt::format("m={} n={} k={} ta={} tb={} act={} bias={} beta={}", p.m, p.n, p.k, p.trans_a,
                                  p.trans_b, activation_name(p.activation), p.has_bias, p.has_c);
    if (p.c_is_d) key += " inplace=1";
    key += fmt::format(" lda={} ldb={}", p.lda, p.ldb);
    if (p.has_c && !p.c_is_d) key += fmt::format(" ldc={}", p.ldc);
    return key + fmt::format(" ldd={}", p.ldd);
  }

  std::string class_fields(const arb_problem& p) const override {
    return fmt::format("ta={} tb={} act={} bias={} beta={} inplace={}", p.trans_a, p.trans_b,
                       activation_name(p.activation), p.has_bias, p.has_c, p.c_is_d);
  }

  void read_fields(ProblemFields& fields, ParsedProblem& parsed) const override {
    arb_problem& p = parsed.problem;
    if (auto alpha = fields.take_float("alpha")) parsed.alpha = *alpha;
    if (auto beta = fields.take_float("beta")) parsed.beta = *beta;
    p.m = fields.require_int("m");
    p.n = fields.require_int("n");
    p.k = fields.require_int("k");
    p.trans_a = fields.take_flag("ta");
    p.trans_b = fields.take_flag("tb");
    if (auto act = fields.take("act")) {
      auto a = parse_activation(*act);
      if (!a) fields.bad(fmt::format("unknown activation '{}' (none, relu, gelu, gelu_tanh, silu)", *act));
      p.activation = *a;
    }
    p.has_bias = fields.take_flag("bias");
    p.has_c = parsed.beta != 0.0f;
    p.c_is_d = fields.take_flag("inplace");
    if (p.c_is_d && !p.has_c) fields.bad("inplace=1 needs a non-zero beta");
    p.lda = fields.take_int("lda", p.trans_a ? p.m : p.k);
    p.ldb = fields.take_int("ldb", p.trans_b ? p.k : p.n);
    p.ldd = fields.take_int("ldd", p.n);
    p.ldc = p.has_c ? (p.c_is_d ? p.ldd : fields.take_int("ldc", p.n)) : 0;
  }

  void validate(const arb_problem& p) const override {
    if (p.m < 1 || p.n < 1 || p.k < 1)
      invalid_argument(fmt::format("gemm sizes must be >= 1 (m={} n={} k={})", p.m, p.n, p.k));
    if (p.batch != 1) invalid_argument("batched gemm is not supported yet (batch must be 1)");
    if (p.activation < ARB_ACT_NONE || p.activation > ARB_ACT_SILU)
      invalid_argument(fmt::format("unknown activation code {}", p.activation));
    if ((p.trans_a != 0 && p.trans_a != 1) || (p.trans_b != 0 && p.trans_b != 1))
      invalid_argument("trans_a and trans_b must be 0 or 1");
    check_row_stride("lda", p.lda, p.trans_a ? p.m : p.k);
    check_row_stride("ldb", p.ldb, p.trans_b ? p.k : p.n);
    if (p.has_c) check_row_stride("ldc", p.ldc, p.n);
    check_row_stride("ldd", p.ldd, p.n);
  }

  // 2mnk; the epilogue is not counted.
  double flops(const arb_problem& p) const override {
    return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
  }
  // A, B, D, and C (in place: D read, then written) and the bias when present.
  double bytes_moved(const arb_problem& p) const override {
    const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), k = static_cast<double>(p.k);
    double elements = m * k + k * n + m * n;
    if (p.has_c) elements += m * n;
    if (p.has_bias) elements += n;
    return elements * static_cast<double>(dtype_size(p.dtype));
  }
  double reference_cost(const arb_problem& p) const override { return flops(p) / 2; }
  int64_t accumulated_terms(const arb_problem& p) const override { return p.k; }
  // GELU and SiLU: a slope up to 1.13 times the sum's error, and erf/tanh/exp evaluated in
  // the kernel's precision add a few units of their own; ReLU passes the error through.
  double epilogue_error_factor(const arb_problem& p) const override {
    return p.activation == ARB_ACT_NONE || p.activation == ARB_ACT_RELU ? 1.0 : 2.0;
  }
  std::string scalars_text(const arb_operands& o) const override {
    return fmt::format("alpha {:g} beta {:g}", o.alpha, o.beta);
  }

  std::vector<OperandLayout> operands(const arb_problem& p) const override {
    std::vector<OperandLayout> out;
    out.push_back({"a", true, false, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda});
    out.push_back({"b", true, false, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb});
    if (p.has_c && !p.c_is_d) out.push_back({"c", true, false, p.m, p.n, p.ldc});
    if (p.has_bias) out.push_back({"bias", true, false, 1, p.n, p.n});
    out.push_back({"d", p.c_is_d != 0, true, p.m, p.n, p.ldd});
    return out;
  }

  arb_problem resized(const arb_problem& p, const Sizes& s) const override {
    arb_problem r = p;
    const size_t element = dtype_size(p.dtype);
    const int32_t align = p.alignment;
    r.m = s.value[0];
    r.n = s.value[1];
    r.k = s.value[2];
    r.lda = stride_with_alignment(p.trans_a ? r.m : r.k, element, align);
    r.ldb = stride_with_alignment(p.trans_b ? r.k : r.n, element, align);
    r.ldd = stride_with_alignment(r.n, element, align);
    r.ldc = p.has_c ? (p.c_is_d ? r.ldd : stride_with_alignment(r.n, element, align)) : 0;
    r.alignment = stride_alignment(r);
    return r;
  }

  Sizes verification_sizes(const arb_problem& p) const override {
    return {{shrink(p.m, kMaxVerifyDim), shrink(p.n, kMaxVerifyDim), shrink(p.k, kMaxVerifyDim)}};
  }

  std::vector<SizedShape> edge_shapes(const Sizes& v) const override {
    const int64_t m = v.value[0], n = v.value[1], k = v.value[2];
    return {{{{1, 1, 1}}, "edge: m=n=k=1"},
            {{{7, 13, 5}}, "edge: small primes 7x13x5"},
            {{{m + 1, n + 1, k + 1}}, "edge: one past the problem in every dimension"},
            {{{17, 33, 65}}, "edge: just over tiles of 16, 32, 64"},
            {{{1, n, k}}, "edge: a single row"},
            {{{m, 1, k}}, "edge: a single column"}};
  }

  std::vector<StrideField> strides(const arb_problem& p) const override {
    std::vector<StrideField> out = {{"lda", &arb_problem::lda, p.trans_a ? p.m : p.k},
                                    {"ldb", &arb_problem::ldb, p.trans_b ? p.k : p.n},
                                    {"ldd", &arb_problem::ldd, p.n}};
    if (p.has_c && !p.c_is_d) out.push_back({"ldc", &arb_problem::ldc, p.n});
    return out;
  }
  void tie_strides(arb_problem& p) const override {
    if (p.c_is_d) p.ldc = p.ldd;
  }

  // Outliers (a kernel that rounds large inputs, or scales by a guess, is off) and rows of
  // magnitudes over six decades; f16 stays small enough that no result overflows it.
  std::vector<InputDraw> hard_inputs(const arb_problem& p) const override {
    const bool f16 = p.dtype == ARB_DTYPE_F16;
    InputDraw outliers{"one element of magnitude 100 per row"};
    outliers.outlier = f16 ? 16.0 : 100.0;
    InputDraw scaled{"rows of magnitude 1e-3 to 1e3"};
    scaled.low_scale = f16 ? 1.0 / 8 : 1e-3;
    scaled.high_scale = f16 ? 8.0 : 1e3;
    InputDraw activations{"A non-negative (activations after a ReLU)"};
    activations.one_signed = "a";
    InputDraw positive{"every input non-negative"};
    positive.one_signed = "*";
    return {outliers, scaled, activations, positive};
  }

  const char* example_fields() const override { return "m=64 n=256 k=512 tb=1"; }

  void build_call(const void* raw_args, Call& call) const override {
    const auto* args = static_cast<const arb_gemm_args*>(raw_args);
    check_args(args, "arb_gemm", ARB_GEMM_ARGS_STRUCT_SIZE);
    arb_problem& p = call.problem;
    p = empty_problem(*this);
    p.dtype = ARB_DTYPE_INVALID;
    check_tensor(args->a, "a", p);
    check_tensor(args->b, "b", p);
    check_tensor(args->d, "d", p);
    if (args->trans_a != 0 && args->trans_a != 1) invalid_argument("trans_a must be 0 or 1");
    if (args->trans_b != 0 && args->trans_b != 1) invalid_argument("trans_b must be 0 or 1");
    if (args->activation < ARB_ACT_NONE || args->activation > ARB_ACT_SILU)
      invalid_argument(fmt::format("unknown activation {}", args->activation));
    if (args->reserved != 0) invalid_argument(fmt::format("reserved must be 0, got {}", args->reserved));
    if (args->a->ndim != 2) as_matrix(args->a, "a", 0, 0);  // reports the dimension problem
    p.trans_a = args->trans_a;
    p.trans_b = args->trans_b;
    p.activation = args->activation;
    p.m = args->a->shape[p.trans_a ? 1 : 0];
    p.k = args->a->shape[p.trans_a ? 0 : 1];
    if (args->b->ndim != 2) as_matrix(args->b, "b", 0, 0);
    p.n = args->b->shape[p.trans_b ? 0 : 1];
    const Matrix a = as_matrix(args->a, "a", p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k);
    const Matrix b = as_matrix(args->b, "b", p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n);
    const Matrix d = as_matrix(args->d, "d", p.m, p.n);
    // The output shares no memory with an input (c may be exactly d: below).
    check_disjoint(d, a);
    check_disjoint(d, b);
    p.lda = a.ld;
    p.ldb = b.ld;
    p.ldd = d.ld;

    arb_operands& o = call.operands;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.a = a.data;
    o.b = b.data;
    o.d = d.data;
    o.alpha = args->alpha;
    o.beta = args->beta;
    if (args->beta != 0.0f) {
      if (args->c == nullptr) invalid_argument("beta != 0 but c is NULL");
      check_tensor(args->c, "c", p);
      const Matrix c = as_matrix(args->c, "c", p.m, p.n);
      p.has_c = 1;
      p.ldc = c.ld;
      o.c = c.data;
      if (c.data == d.data) {
        if (c.ld != d.ld) invalid_argument("c and d share memory but have different row strides");
        p.c_is_d = 1;
      } else {
        check_disjoint(d, c);
      }
    }
    if (args->bias != nullptr) {
      check_tensor(args->bias, "bias", p);
      const Matrix bias = as_vector(args->bias, "bias", p.n, "n = {}");
      check_disjoint(d, bias);
      p.has_bias = 1;
      o.bias = bias.data;
    }
    p.alignment = call_alignment(call);
    validate_problem(*this, p);
  }

  void plan_slots(const void* raw_args, const arb_problem& p, PlanSlots& slots) const override {
    const auto* args = static_cast<const arb_gemm_args*>(raw_args);
    slots[0] = {"a", args->a, offsetof(arb_operands, a)};
    slots[1] = {"b", args->b, offsetof(arb_operands, b)};
    slots[2] = {"c", p.has_c ? args->c : nullptr, offsetof(arb_operands, c), false, p.c_is_d ? 4 : -1};
    slots[3] = {"bias", p.has_bias ? args->bias : nullptr, offsetof(arb_operands, bias)};
    slots[4] = {"d", args->d, offsetof(arb_operands, d), true};
  }
};

}  // namespace

namespace {
constinit const Gemm kGemm;  // constant-initialised: no guard on the path of a call
}  // namespace

const Op& gemm_op() { return kGemm; }

}  // namespace arbiter
