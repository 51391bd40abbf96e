#include "api/call_builder.hpp"

#include "common/failure.hpp"
#include "common/names.hpp"
#include "dispatch/problem.hpp"

#include <arbiter/float16.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstring>

namespace arbiter {
namespace {

[[noreturn]] void invalid(const std::string& what) { fail(ARB_ERR_INVALID_ARGUMENT, what); }

// An args struct must at least hold the fields of ABI 1.0.
template <typename Args>
void check_args(const Args* args, const char* function, size_t minimum) {
  if (args == nullptr) invalid(fmt::format("{}: args is NULL", function));
  if (args->struct_size < minimum)
    invalid(fmt::format("{}: args.struct_size = {} is below the minimum {} (set it to sizeof)", function,
                        args->struct_size, minimum));
}

arb_dtype dtype_of(const DLTensor& t, const char* name) {
  if (t.dtype.lanes != 1) invalid(fmt::format("{}: vector dtypes (lanes = {}) are not supported", name, t.dtype.lanes));
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32) return ARB_DTYPE_F32;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 16) return ARB_DTYPE_F16;
  if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) return ARB_DTYPE_BF16;
  invalid(fmt::format("{}: unsupported dtype (code {}, {} bits); use f32, f16 or bf16", name, t.dtype.code,
                      t.dtype.bits));
}

// A checked view of one DLTensor as rows x cols with a row stride.
struct Matrix {
  const char* name;
  void* data;
  int64_t rows, cols, ld;
};

// DLDevice.device_type is an enum the caller fills in: read it as the int it is, so that
// an unknown value is reported rather than undefined behaviour.
int32_t device_type_of(const DLTensor& t) {
  int32_t type;
  static_assert(sizeof(t.device.device_type) == sizeof type);
  std::memcpy(&type, &t.device.device_type, sizeof type);
  return type;
}

// Common checks: present, has data, valid dtype equal to `dtype` (if set), same device.
void check_tensor(const DLTensor* t, const char* name, arb_problem& p) {
  if (t == nullptr) invalid(fmt::format("{} is NULL", name));
  if (t->data == nullptr) invalid(fmt::format("{}.data is NULL", name));
  if (t->ndim > 0 && t->shape == nullptr) invalid(fmt::format("{}.shape is NULL", name));
  const arb_dtype dtype = dtype_of(*t, name);
  const int32_t device_type = device_type_of(*t);
  if (p.dtype == ARB_DTYPE_INVALID) {
    p.dtype = dtype;
    p.device_type = device_type;
    p.device_id = t->device.device_id;
    if (p.device_type != kDLCPU && p.device_type != kDLCUDA)
      fail(ARB_ERR_UNSUPPORTED, fmt::format("{}: device type {} is not supported (cpu or cuda)", name, p.device_type));
  } else {
    if (dtype != p.dtype)
      invalid(fmt::format("{} has dtype {}, but the first operand has {}", name, dtype_name(dtype), dtype_name(p.dtype)));
    if (device_type != p.device_type || t->device.device_id != p.device_id)
      invalid(fmt::format("{} is on {}:{}, but the first operand is on {}:{}", name, device_name(device_type),
                          t->device.device_id, device_name(p.device_type), p.device_id));
  }
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] < 1) invalid(fmt::format("{}: dimension {} has size {}; sizes must be >= 1", name, i, t->shape[i]));
}

char* data_of(const DLTensor* t) { return static_cast<char*>(t->data) + t->byte_offset; }

// Views a tensor of ndim >= 1 as rows x cols: the last dimension must be contiguous and
// the leading ones must collapse into a single row stride.
Matrix as_rows(const DLTensor* t, const char* name) {
  if (t->ndim < 1) invalid(fmt::format("{} must have at least one dimension", name));
  const int last = t->ndim - 1;
  Matrix m{name, data_of(t), 1, t->shape[last], t->shape[last]};
  for (int i = 0; i < last; ++i) m.rows *= t->shape[i];
  if (t->strides == nullptr) return m;
  if (t->shape[last] > 1 && t->strides[last] != 1)
    invalid(fmt::format("{}: the last dimension must be contiguous (stride 1, got {})", name, t->strides[last]));
  // Walk the leading dimensions inwards: each must step over the one inside it exactly.
  int64_t row_stride = 0;
  int64_t inner_extent = 0;  // elements spanned by one step of the next-inner leading dim
  for (int i = last - 1; i >= 0; --i) {
    if (t->shape[i] == 1) continue;  // size-1 dimensions have no meaningful stride
    if (row_stride == 0) {
      row_stride = t->strides[i];
      inner_extent = row_stride * t->shape[i];
      if (row_stride < m.cols)
        invalid(fmt::format("{}: row stride {} is below the row length {}", name, row_stride, m.cols));
    } else {
      if (t->strides[i] != inner_extent)
        invalid(fmt::format("{}: dimensions 0..{} do not collapse into rows (stride {} of dimension {}, expected {})",
                            name, last - 1, t->strides[i], i, inner_extent));
      inner_extent *= t->shape[i];
    }
  }
  if (row_stride != 0) m.ld = row_stride;
  return m;
}

// A 2-D operand of the given shape.
Matrix as_matrix(const DLTensor* t, const char* name, int64_t rows, int64_t cols) {
  if (t->ndim == 3) fail(ARB_ERR_UNSUPPORTED, fmt::format("{}: batched gemm (3-D tensors) is not supported yet", name));
  if (t->ndim != 2) invalid(fmt::format("{} must be 2-D, got {} dimensions", name, t->ndim));
  if (t->shape[0] != rows || t->shape[1] != cols)
    invalid(fmt::format("{} must be [{}, {}], got [{}, {}]", name, rows, cols, t->shape[0], t->shape[1]));
  return as_rows(t, name);
}

uint64_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

void build_gemm(const arb_gemm_args* args, Call& call) {
  check_args(args, "arb_gemm", offsetof(arb_gemm_args, beta) + sizeof(float));
  arb_problem& p = call.problem;
  p = empty_problem(ARB_OP_GEMM);
  p.dtype = ARB_DTYPE_INVALID;
  check_tensor(args->a, "a", p);
  check_tensor(args->b, "b", p);
  check_tensor(args->d, "d", p);
  if (args->trans_a != 0 && args->trans_a != 1) invalid("trans_a must be 0 or 1");
  if (args->trans_b != 0 && args->trans_b != 1) invalid("trans_b must be 0 or 1");
  if (args->activation < ARB_ACT_NONE || args->activation > ARB_ACT_SILU)
    invalid(fmt::format("unknown activation {}", args->activation));
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
  const size_t element = dtype_size(p.dtype);
  uint64_t c_address = 0, bias_address = 0;
  if (args->beta != 0.0f) {
    if (args->c == nullptr) invalid("beta != 0 but c is NULL");
    check_tensor(args->c, "c", p);
    const Matrix c = as_matrix(args->c, "c", p.m, p.n);
    p.has_c = 1;
    p.ldc = c.ld;
    o.c = c.data;
    c_address = address(c.data);
    if (c.data == d.data) {
      if (c.ld != d.ld) invalid("c and d share memory but have different row strides");
      p.c_is_d = 1;
    }
  }
  if (args->bias != nullptr) {
    check_tensor(args->bias, "bias", p);
    if (args->bias->ndim != 1 || args->bias->shape[0] != p.n)
      invalid(fmt::format("bias must be 1-D of size n = {}", p.n));
    if (args->bias->strides != nullptr && p.n > 1 && args->bias->strides[0] != 1)
      invalid("bias must be contiguous (stride 1)");
    p.has_bias = 1;
    o.bias = data_of(args->bias);
    bias_address = address(o.bias);
  }
  p.alignment = alignment_class({address(o.a), address(o.b), address(o.d), c_address, bias_address, p.lda * element,
                                 p.ldb * element, p.ldc * element, p.ldd * element});
  validate_problem(p);
}

void build_rmsnorm(const arb_rmsnorm_args* args, Call& call) {
  check_args(args, "arb_rmsnorm", offsetof(arb_rmsnorm_args, eps) + sizeof(float));
  arb_problem& p = call.problem;
  p = empty_problem(ARB_OP_RMSNORM);
  p.dtype = ARB_DTYPE_INVALID;
  check_tensor(args->x, "x", p);
  check_tensor(args->weight, "weight", p);
  check_tensor(args->y, "y", p);
  const Matrix x = as_rows(args->x, "x");
  const Matrix y = as_rows(args->y, "y");
  auto same_shape = [&](const DLTensor* t, const char* name) {
    bool same = t->ndim == args->x->ndim;
    for (int i = 0; same && i < t->ndim; ++i) same = t->shape[i] == args->x->shape[i];
    if (!same) invalid(fmt::format("{} must have the shape of x", name));
  };
  same_shape(args->y, "y");
  if (args->weight->ndim != 1 || args->weight->shape[0] != x.cols)
    invalid(fmt::format("weight must be 1-D of size {} (the last dimension of x)", x.cols));
  if (args->weight->strides != nullptr && x.cols > 1 && args->weight->strides[0] != 1)
    invalid("weight must be contiguous (stride 1)");
  if (!(args->eps >= 0.0f)) invalid("eps must be >= 0");
  if (y.data == x.data) invalid("y must not overlap x");
  p.rows = x.rows;
  p.cols = x.cols;
  p.ld_x = x.ld;
  p.ld_y = y.ld;

  arb_operands& o = call.operands;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.x = x.data;
  o.y = y.data;
  o.weight = data_of(args->weight);
  o.eps = args->eps;
  uint64_t residual_address = 0;
  if (args->residual != nullptr) {
    check_tensor(args->residual, "residual", p);
    same_shape(args->residual, "residual");
    const Matrix r = as_rows(args->residual, "residual");
    if (r.data == y.data) invalid("y must not overlap residual");
    p.has_residual = 1;
    p.ld_residual = r.ld;
    o.residual = r.data;
    residual_address = address(r.data);
  }
  const size_t element = dtype_size(p.dtype);
  p.alignment = alignment_class({address(o.x), address(o.y), address(o.weight), residual_address, p.ld_x * element,
                                 p.ld_y * element, p.ld_residual * element});
  validate_problem(p);
}

void build_softmax(const arb_softmax_args* args, Call& call) {
  check_args(args, "arb_softmax", offsetof(arb_softmax_args, y) + sizeof(void*));
  arb_problem& p = call.problem;
  p = empty_problem(ARB_OP_SOFTMAX);
  p.dtype = ARB_DTYPE_INVALID;
  check_tensor(args->x, "x", p);
  check_tensor(args->y, "y", p);
  const Matrix x = as_rows(args->x, "x");
  const Matrix y = as_rows(args->y, "y");
  bool same = args->y->ndim == args->x->ndim;
  for (int i = 0; same && i < args->x->ndim; ++i) same = args->x->shape[i] == args->y->shape[i];
  if (!same) invalid("y must have the shape of x");
  if (y.data == x.data) invalid("y must not overlap x");
  p.rows = x.rows;
  p.cols = x.cols;
  p.ld_x = x.ld;
  p.ld_y = y.ld;

  arb_operands& o = call.operands;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.x = x.data;
  o.y = y.data;
  const size_t element = dtype_size(p.dtype);
  p.alignment = alignment_class({address(o.x), address(o.y), p.ld_x * element, p.ld_y * element});
  validate_problem(p);
}

void build_call(int32_t op, const void* args, Call& call) {
  switch (op) {
    case ARB_OP_GEMM: return build_gemm(static_cast<const arb_gemm_args*>(args), call);
    case ARB_OP_RMSNORM: return build_rmsnorm(static_cast<const arb_rmsnorm_args*>(args), call);
    case ARB_OP_SOFTMAX: return build_softmax(static_cast<const arb_softmax_args*>(args), call);
    default: invalid(fmt::format("unknown op {}", op));
  }
}

}  // namespace arbiter
