// The input of a Llama attention block in one kernel launch, for decode sizes (rows up to
// kQkvMaxRows): n = rmsnorm(x) * weight, the fused QKV projection y = n W^T, then rope on y's q
// and k heads, with nothing rounded to the dtype before y and no workspace.
//
// The work is cut in units, a group of pairs of one output head (a pair: columns i and
// i + head_dim/2 split-half, 2i and 2i + 1 interleaved; up to kMaxPairs of them, the launcher
// halving the group while the grid would not fill the GPU), and a grid of at most the blocks
// resident at once strides over the units. Each block first computes the rows' RMS scales (a warp a row, as mlp_persistent does),
// then for each of its units
//   1. projects the unit's pairs for every token row, a warp a pair: its two W rows are read
//      together, once for every four token rows, with n formed on the fly from x, the norm
//      weight and the row's scale (mlp_common.cuh's normed_dots: 16-byte vectors where the rows
//      of x, the norm weight and W are whole vectors, element by element otherwise); the f32
//      sums go to shared memory;
//   2. turns each pair of a q or k head in f32 (rope_common.cuh's angles, as cuda.rope_vec16's)
//      and writes every pair of the unit to y once, rounded to the dtype.
// A block owns whole pairs, so rope happens before the single write: no atomics, no second
// pass. At decode W is nearly all of the traffic and each of its rows is read by one warp in
// coalesced passes; the x rows are read by every block (from L2), as in mlp_persistent. The
// warp sums are shuffles in a fixed order: the result is deterministic.
#include "common.cuh"
#include "launch.cuh"
#include "mlp_common.cuh"
#include "rope_common.cuh"

#include <algorithm>

namespace arbiter::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kQkvMaxRows = 64;  // decode sizes; the chain's GEMMs serve more
constexpr int64_t kMaxPairs = 64;    // a unit's pairs at the most: 128 columns of a head
// Blocks an SM: what the launcher aims the grid at, and the launch bound, which leaves each
// thread 80 registers (without it ptxas squeezes the f16/bf16 vector kernels into 64 and spills).
constexpr int kBlocksPerSm = 3;

// What the kernel reads: QkvArgs, resolved into units.
struct QkvParams {
  QkvArgs a;
  int64_t half;    // head_dim / 2: a head's pairs, and the offset of its second half
  int64_t pairs;   // pairs a unit (a head's last unit may have fewer)
  int64_t groups;  // units a head
  int64_t units;   // units in all: (heads + 2 kv_heads) groups
  double step;     // rope_step(theta, head_dim)
};

// The columns of pair i within its head: its first and its second element.
template <bool kInterleaved>
__device__ __forceinline__ int64_t first_column(int64_t i) {
  return kInterleaved ? 2 * i : i;
}
template <bool kInterleaved>
__device__ __forceinline__ int64_t second_column(int64_t half, int64_t i) {
  return kInterleaved ? 2 * i + 1 : i + half;
}

template <typename T, bool kInterleaved, bool kVector>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) qkv_kernel(QkvParams p) {
  __shared__ float scale[kQkvMaxRows];
  extern __shared__ float projected[];  // [rows][pairs][2]: a unit's pairs for every row, f32
  const QkvArgs& a = p.a;
  const NormedRows<T> in{static_cast<const T*>(a.x), a.ld_x, a.rows, static_cast<const T*>(a.weight), a.hidden};
  const T* const weights = static_cast<const T*>(a.w);

  // The rows' RMS scales, a warp a row.
  row_scales<T, kWarps>(in, a.eps, scale);
  __syncthreads();

  for (int64_t unit = blockIdx.x; unit < p.units; unit += gridDim.x) {
    const int64_t head = unit / p.groups, first = unit % p.groups * p.pairs;
    const int pairs = static_cast<int>(min(p.pairs, p.half - first));
    const int64_t head_column = head * a.head_dim;  // of W's rows and y's columns

    // 1. The projections of the unit's pairs, a warp a pair: both W rows in one pass.
    for (int k = threadIdx.x / 32; k < pairs; k += kWarps) {
      const int64_t i = first + k;
      const T* const w[2] = {weights + (head_column + first_column<kInterleaved>(i)) * a.ld_w,
                             weights + (head_column + second_column<kInterleaved>(p.half, i)) * a.ld_w};
      scaled_pair_dots<T, kVector>(in, w, scale, [&](int64_t r, float x1, float x2) {
        projected[2 * (r * pairs + k)] = x1;
        projected[2 * (r * pairs + k) + 1] = x2;
      });
    }
    __syncthreads();

    // 2. q's and k's pairs turned in f32; every pair written to y once, a thread a pair of a row.
    const bool turned = head < a.heads + a.kv_heads;
    for (int64_t item = threadIdx.x; item < a.rows * pairs; item += kThreads) {
      const int64_t r = item / pairs, i = first + item % pairs;
      float x1 = projected[2 * item], x2 = projected[2 * item + 1];
      if (turned) {
        float c, s;
        position_angle(__ldg(a.positions + r), pair_frequency(p.step, i), c, s);
        turn(x1, x2, c, s);
      }
      T* const y = static_cast<T*>(a.y) + r * a.ld_y + head_column;
      y[first_column<kInterleaved>(i)] = from_float<T>(x1);
      y[second_column<kInterleaved>(p.half, i)] = from_float<T>(x2);
    }
    __syncthreads();  // projected is rewritten by the next unit
  }
}

template <typename T>
cudaError_t launch_typed(const QkvParams& p, dim3 grid, size_t shared_bytes, cudaStream_t stream) {
  const QkvArgs& a = p.a;
  // 16-byte vectors where the rows of x and W and the norm weight are whole vectors.
  const bool vector = vector_rows<T>(a.x, a.ld_x, a.hidden) && vector_rows<T>(a.weight, 0, a.hidden) &&
                      vector_rows<T>(a.w, a.ld_w, a.hidden);
  void (*const kernel)(QkvParams) = a.interleaved ? (vector ? &qkv_kernel<T, true, true> : &qkv_kernel<T, true, false>)
                                                  : (vector ? &qkv_kernel<T, false, true> : &qkv_kernel<T, false, false>);
  return launch_kernel(kernel, grid, dim3(kThreads), shared_bytes, stream, p);
}

}  // namespace

int64_t qkv_max_rows() { return kQkvMaxRows; }

cudaError_t launch_qkv(const QkvArgs& args, cudaStream_t stream) {
  if (args.rows < 1 || args.rows > kQkvMaxRows || args.hidden < 1 || args.heads < 1 || args.kv_heads < 1 ||
      args.head_dim < 2 || args.head_dim % 2 != 0 || !(args.theta > 1.0))
    return cudaErrorInvalidValue;
  QkvParams p{};
  p.a = args;
  p.half = args.head_dim / 2;
  p.step = rope_step(args.theta, args.head_dim);
  // Units of up to kMaxPairs pairs, halved (down to a pair a warp) while the grid is short of
  // kBlocksPerSm blocks an SM: more blocks read W side by side, each reading x again.
  const int64_t heads = args.heads + 2 * args.kv_heads;
  const int64_t target = int64_t{std::max(args.sm_count, 1)} * kBlocksPerSm;
  p.pairs = std::min(p.half, kMaxPairs);
  while (p.pairs > kWarps && heads * ((p.half + p.pairs - 1) / p.pairs) < target)
    p.pairs = std::max<int64_t>(kWarps, (p.pairs + 1) / 2);
  p.groups = (p.half + p.pairs - 1) / p.pairs;
  p.units = heads * p.groups;
  // At most the blocks resident at once: a block with more units reuses its rows' scales.
  const dim3 grid(static_cast<unsigned>(std::min({p.units, target, kMaxGridBlocks})));
  const size_t shared_bytes = static_cast<size_t>(args.rows * 2 * p.pairs) * sizeof(float);  // 32 KiB at the most
  switch (args.dtype) {
    case Dtype::f32: return launch_typed<float>(p, grid, shared_bytes, stream);
    case Dtype::f16: return launch_typed<__half>(p, grid, shared_bytes, stream);
    default: return launch_typed<__nv_bfloat16>(p, grid, shared_bytes, stream);
  }
}

}  // namespace arbiter::cuda
