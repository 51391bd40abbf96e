// Rotary position embedding in place on x [tokens, heads, dim]: each head's pairs, (i, i + dim/2)
// split-half or (2i, 2i + 1) interleaved, turn by position * theta^(-2i / dim). Bound by
// memory (x read and written once), so the work is split in units of whole 16-byte vectors:
// split-half, one vector of each half (V pairs, V = 4 f32 or 8 f16/bf16 elements a vector);
// interleaved, one vector of V/2 pairs. Where the dim or the alignment of x and its strides
// does not allow vectors, a unit is one pair, read and written element by element. A thread
// takes a unit of one token for a group of heads: the cos and sin of its pairs are computed once
// and reused over the group (the launcher gives a thread up to 8 heads as long as the grid
// still fills the GPU with a wave of threads: prefill; decode keeps a head a thread).
//
// Angles: formed in double, in turns, as rope_common.cuh says. 2^(i * step) of the unit's first
// pair comes from exp2 in double, the next pairs' by multiplying by 2^step (computed once on
// the host).
#include "common.cuh"
#include "launch.cuh"
#include "rope_common.cuh"

#include <algorithm>
#include <cmath>

namespace arbiter::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = 65535;  // the grid strides past it
constexpr int kMaxHeadsPerGroup = 8;

// What the kernel reads: RopeArgs, resolved into the unit grid.
struct RopeParams {
  void* x;
  const int32_t* positions;
  int64_t tokens, heads, ld_token, ld_head;
  int64_t half;             // dim / 2: the pairs of a head, and the offset of the second half
  int64_t units;            // units of work a head: vectors or pairs
  int64_t groups;           // groups of heads a token
  int64_t heads_per_group;  // heads a thread turns with the same cos and sin
  double step;              // -2 log2(theta) / dim: pair i's frequency is 2^(i * step)
  double ratio;             // 2^step: from one pair's frequency to the next's
};

// cos and sin of kPairs consecutive pairs from `first` at `position`.
template <int kPairs>
__device__ __forceinline__ void angles(const RopeParams& p, int32_t position, int64_t first, float* c, float* s) {
  double frequency = pair_frequency(p.step, first);
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
    position_angle(position, frequency, c[k], s[k]);
    frequency *= p.ratio;
  }
}

template <typename T, bool kInterleaved, bool kVector>
__global__ void __launch_bounds__(kThreads) rope_kernel(RopeParams p) {
  using V = Vec16<T>;
  constexpr int kPairs = !kVector ? 1 : kInterleaved ? V::kElements / 2 : V::kElements;  // a unit's
  const int64_t total = p.tokens * p.groups * p.units;
  for (int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; item < total;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t unit = item % p.units, rest = item / p.units;
    const int64_t group = rest % p.groups, token = rest / p.groups;
    const int64_t first = unit * kPairs;  // the unit's first pair
    float c[kPairs], s[kPairs];
    angles<kPairs>(p, __ldg(p.positions + token), first, c, s);
    T* const token_x = static_cast<T*>(p.x) + token * p.ld_token;
    const int64_t head_end = min(p.heads, (group + 1) * p.heads_per_group);
    for (int64_t h = group * p.heads_per_group; h < head_end; ++h) {
      T* const head = token_x + h * p.ld_head;
      if constexpr (kVector && !kInterleaved) {  // vector `unit` of each half
        V lo, hi;
        lo.load_coherent(head, static_cast<int>(unit));
        hi.load_coherent(head + p.half, static_cast<int>(unit));
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
          float x1 = lo.get(k), x2 = hi.get(k);
          turn(x1, x2, c[k], s[k]);
          lo.set(k, x1);
          hi.set(k, x2);
        }
        lo.store(head, static_cast<int>(unit));
        hi.store(head + p.half, static_cast<int>(unit));
      } else if constexpr (kVector) {  // vector `unit`, kPairs pairs side by side
        V v;
        v.load_coherent(head, static_cast<int>(unit));
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
          float x1 = v.get(2 * k), x2 = v.get(2 * k + 1);
          turn(x1, x2, c[k], s[k]);
          v.set(2 * k, x1);
          v.set(2 * k + 1, x2);
        }
        v.store(head, static_cast<int>(unit));
      } else {  // pair `first`, element by element
        T* const a = head + (kInterleaved ? 2 * first : first);
        T* const b = kInterleaved ? a + 1 : a + p.half;
        float x1 = to_float(*a), x2 = to_float(*b);
        turn(x1, x2, c[0], s[0]);
        *a = from_float<T>(x1);
        *b = from_float<T>(x2);
      }
    }
  }
}

template <typename T, bool kInterleaved>
cudaError_t launch_layout(const RopeParams& p, bool vector, dim3 grid, cudaStream_t stream) {
  return vector ? launch_kernel(&rope_kernel<T, kInterleaved, true>, grid, dim3(kThreads), 0, stream, p)
                : launch_kernel(&rope_kernel<T, kInterleaved, false>, grid, dim3(kThreads), 0, stream, p);
}

template <typename T>
cudaError_t launch_type(const RopeParams& p, bool interleaved, bool vector, dim3 grid, cudaStream_t stream) {
  return interleaved ? launch_layout<T, true>(p, vector, grid, stream) : launch_layout<T, false>(p, vector, grid, stream);
}

}  // namespace

cudaError_t launch_rope(const RopeArgs& args, cudaStream_t stream) {
  if (args.tokens < 1 || args.heads < 1 || args.dim < 2 || args.dim % 2 != 0 || !(args.theta > 1.0))
    return cudaErrorInvalidValue;
  const int64_t element = args.dtype == Dtype::f32 ? 4 : 2, per_vector = 16 / element;
  RopeParams p{};
  p.x = args.x;
  p.positions = args.positions;
  p.tokens = args.tokens;
  p.heads = args.heads;
  p.ld_token = args.ld_token;
  p.ld_head = args.ld_head;
  p.half = args.dim / 2;
  p.step = rope_step(args.theta, args.dim);
  p.ratio = std::exp2(p.step);
  // 16-byte vectors when x and every head start on 16 bytes and the units tile the head
  // (split-half: each half whole vectors; interleaved: the head).
  const bool aligned = reinterpret_cast<uintptr_t>(args.x) % 16 == 0 && (args.heads == 1 || args.ld_head * element % 16 == 0) &&
                       (args.tokens == 1 || args.ld_token * element % 16 == 0);
  const bool vector = aligned && (args.interleaved ? args.dim : p.half) % per_vector == 0;
  p.units = !vector ? p.half : args.interleaved ? args.dim / per_vector : p.half / per_vector;
  // Heads share a thread's cos and sin while the grid keeps a full wave of threads (2048 an SM).
  const int64_t wave = std::max(args.sm_count, 1) * int64_t{2048};
  p.heads_per_group = 1;
  while (p.heads_per_group < kMaxHeadsPerGroup && p.heads_per_group < args.heads &&
         args.tokens * ((args.heads + 2 * p.heads_per_group - 1) / (2 * p.heads_per_group)) * p.units >= wave)
    p.heads_per_group *= 2;
  p.groups = (args.heads + p.heads_per_group - 1) / p.heads_per_group;
  const int64_t total = args.tokens * p.groups * p.units;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks)));
  switch (args.dtype) {
    case Dtype::f32: return launch_type<float>(p, args.interleaved != 0, vector, grid, stream);
    case Dtype::f16: return launch_type<__half>(p, args.interleaved != 0, vector, grid, stream);
    default: return launch_type<__nv_bfloat16>(p, args.interleaved != 0, vector, grid, stream);
  }
}

}  // namespace arbiter::cuda
