// A minimal arbiter plugin: one f32 softmax kernel for the CPU, written with plugin.hpp.
// Loaded as template.softmax_scalar; try it with
//   arbiter run softmax f32 rows=4 cols=100 --kernel=template.softmax_scalar
#include <arbiter/plugin.hpp>

#include <cmath>

namespace {

// Cheap and side-effect free: says no, with a reason, to anything it cannot run.
bool supports(const arb_problem& p, arbiter::plugin::Why& why) {
  if (p.device_type != kDLCPU) return why.no("CPU tensors only");
  if (p.dtype != ARB_DTYPE_F32) return why.no("f32 only");
  return true;
}

// y = softmax(x) along each row; rows are ld_x / ld_y elements apart. Reentrant: no state.
void softmax(const arbiter::plugin::Launch& l) {
  const arb_problem& p = l.problem;
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = static_cast<const float*>(l.operands.x) + r * p.ld_x;
    float* y = static_cast<float*>(l.operands.y) + r * p.ld_y;
    float max = x[0], sum = 0.0f;
    for (int64_t c = 1; c < p.cols; ++c) max = std::fmax(max, x[c]);
    for (int64_t c = 0; c < p.cols; ++c) sum += (y[c] = std::exp(x[c] - max));
    for (int64_t c = 0; c < p.cols; ++c) y[c] /= sum;
  }
}

}  // namespace

ARBITER_PLUGIN(arbiter::plugin::Plugin("template", "1.0.0")
                   .description("out-of-tree plugin template: a scalar f32 softmax")
                   .priority(10)  // above reference (0), below cpu (100)
                   .kernel(arbiter::plugin::Kernel("softmax_scalar", ARB_OP_SOFTMAX, kDLCPU)
                               .provenance(ARB_PROVENANCE_HAND_TUNED)
                               .supports(supports)
                               .launch(softmax)))
