// Rotary position embedding, AVX2, in place: rope_avx2.hpp's turn of every head of every token.
#include "kernels.hpp"
#include "rope_avx2.hpp"

namespace arbiter::cpu {
namespace {

template <int32_t Dtype>
void rope_tokens(const arb_problem& p, const arb_operands& o) {
  using E = typename Lanes<Dtype>::Element;
  E* x = static_cast<E*>(o.x);
  turn_heads<Dtype>(p.rows, p.heads, p.cols, p.rope_theta, p.rope_layout, static_cast<const int32_t*>(o.positions),
                    [&](int64_t t, int64_t h) { return x + t * p.ld_x + h * p.ld_head; });
}

}  // namespace

void rope(const arb_problem& p, const arb_operands& o) {
  switch (p.dtype) {
    case ARB_DTYPE_F32: return rope_tokens<ARB_DTYPE_F32>(p, o);
    case ARB_DTYPE_F16: return rope_tokens<ARB_DTYPE_F16>(p, o);
    case ARB_DTYPE_BF16: return rope_tokens<ARB_DTYPE_BF16>(p, o);
    default: return;
  }
}

}  // namespace arbiter::cpu
