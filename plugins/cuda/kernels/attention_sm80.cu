// Attention on the tensor cores for sm_80 and up (FlashAttention-2's structure), f16 and bf16,
// head_dim 64 or 128. A block of 4 warps takes 64 query rows of one (batch, key/value head):
// the rows are (query token, head of the group) pairs, so the heads that share a K/V head
// (GQA) share its tiles, and a decode step's group of heads fills rows a plain per-head tiling
// would leave empty. Each warp owns 16 rows:
//   - its Q fragments stay in registers for the whole key loop (loaded once with ldmatrix);
//   - per tile of 64 keys, S = Q K^T with mma.m16n8k16 (K's rows are B's columns: ldmatrix),
//     the causal and length mask, the online softmax in the log2 domain (a row's maximum over
//     the 4 lanes that hold it, by shuffles), and O += P V with P taken straight from S's
//     accumulators (the m16n8 accumulator pair of 16 keys is the m16k16 A fragment) and V's
//     fragments from ldmatrix.trans;
//   - K and V tiles come through shared memory by cp.async, each overlapped with the other's
//     math: K(t+1) is loaded while P V(t) runs, V(t+1) while S(t+1) does.
// Rows padded by 16 bytes in shared memory: ldmatrix's 8 rows fall in 8 different bank groups.
// Needs 16-byte aligned rows (head_dim contiguous). f32 accumulation; P rounded to the dtype for
// the P V product, as FlashAttention does. As there, a key a row must not see but that shares a
// tile with ones it does enters P V with weight 0: an infinite value in its V row makes the
// row's output NaN (0 x inf), where the definition ignores it.
#include "common.cuh"
#include "launch.cuh"
#include "sm80_ptx.cuh"

#include <cstdint>
#include <type_traits>

namespace arbiter::cuda {
namespace {

using namespace sm80;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps;  // query rows a block
constexpr int kBlockKeys = 64;           // keys a tile
constexpr float kLog2e = 1.4426950408889634f;

struct FlashParams {
  const void *q, *k, *v;
  void* o;
  int64_t q_len, kv_len, group;  // group: query heads a K/V head
  int64_t ld_q[3], ld_k[3], ld_v[3], ld_o[3];  // batch, token, head
  float scale_log2;                            // the softmax scale times log2(e)
  int32_t causal;
};

// Two floats rounded to T and packed as one 32-bit register (the first in the low half).
template <typename T>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  uint32_t l, h;
  if constexpr (std::is_same_v<T, __half>) {
    l = __half_as_ushort(__float2half_rn(lo));
    h = __half_as_ushort(__float2half_rn(hi));
  } else {
    l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  }
  return l | (h << 16);
}

template <typename T, int kDim>
__global__ void __launch_bounds__(kThreads) attention_sm80_kernel(FlashParams p) {
  constexpr int kStride = kDim + 8;   // elements a shared row (16 bytes of padding)
  constexpr int kChunks = kDim / 8;   // 16-byte chunks a row
  constexpr int kSteps = kDim / 16;   // k steps of Q K^T; pairs of n8 tiles of P V
  __shared__ __align__(16) T keys[kBlockKeys * kStride];
  __shared__ __align__(16) T values[kBlockKeys * kStride];
  const uint32_t keys_at = shared_address(keys), values_at = shared_address(values);
  const auto at = [](uint32_t base, int row, int chunk) {
    return base + static_cast<uint32_t>((row * kStride + chunk * 8) * static_cast<int>(sizeof(T)));
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t b = blockIdx.z, kv_head = blockIdx.y;
  // Under a causal mask the last rows see the most keys: their blocks start first, so that the
  // lightest make the tail of the grid (as FlashAttention-2 orders them).
  const int64_t block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t rows = p.q_len * p.group, first_row = block * kBlockRows;
  const T* q = static_cast<const T*>(p.q) + b * p.ld_q[0] + kv_head * p.group * p.ld_q[2];
  const T* k = static_cast<const T*>(p.k) + b * p.ld_k[0] + kv_head * p.ld_k[2];
  const T* v = static_cast<const T*>(p.v) + b * p.ld_v[0] + kv_head * p.ld_v[2];

  // Q: the block's rows through `keys`, then each warp's fragments into registers.
  for (int index = threadIdx.x; index < kBlockRows * kChunks; index += kThreads) {
    const int row = index / kChunks, chunk = index % kChunks;
    const int64_t r = first_row + row;
    const T* src = r < rows ? q + (r / p.group) * p.ld_q[1] + (r % p.group) * p.ld_q[2] + chunk * 8 : q;
    copy_async(at(keys_at, row, chunk), src, r < rows ? 16 : 0);
  }
  copy_commit();
  copy_wait<0>();
  __syncthreads();
  uint32_t qf[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) ldmatrix_x4(at(keys_at, warp * 16 + lane % 16, 2 * s + lane / 16), qf[s]);
  __syncthreads();  // `keys` is K's from here

  // The keys the block sees: causal, up to its last row's last visible key.
  const int64_t shift = p.kv_len - p.q_len;  // query i sees keys j <= i + shift
  const int64_t last_row = min(first_row + kBlockRows, rows) - 1;
  const int64_t end = p.causal ? min(p.kv_len, last_row / p.group + shift + 1) : p.kv_len;
  const int tiles = static_cast<int>((end + kBlockKeys - 1) / kBlockKeys);
  const auto load_tile = [&](uint32_t base, const T* matrix, int64_t ld, int tile) {
    for (int index = threadIdx.x; index < kBlockKeys * kChunks; index += kThreads) {
      const int row = index / kChunks, chunk = index % kChunks;
      const int64_t j = static_cast<int64_t>(tile) * kBlockKeys + row;
      // Past the keys: zeros (a masked score's weight is 0, and 0 x 0 stays 0 where garbage could be NaN).
      copy_async(at(base, row, chunk), j < end ? matrix + j * ld + chunk * 8 : matrix, j < end ? 16 : 0);
    }
  };

  // This lane's two rows (lane / 4 and 8 below it in the warp's 16) and the keys each sees.
  int64_t seen[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = first_row + warp * 16 + lane / 4 + 8 * h;
    seen[h] = p.causal ? min(p.kv_len, (r / p.group) + shift + 1) : p.kv_len;
  }
  float out[2 * kSteps][4] = {};  // O: n8 tiles of head_dim
  float top[2] = {-INFINITY, -INFINITY}, total[2] = {0.0f, 0.0f};  // total: this lane's columns only

  load_tile(keys_at, k, p.ld_k[1], 0);
  copy_commit();
  load_tile(values_at, v, p.ld_v[1], 0);
  copy_commit();
  for (int tile = 0; tile < tiles; ++tile) {
    copy_wait<1>();  // K(tile) has landed (V(tile) may be in flight)
    __syncthreads();
    float score[kBlockKeys / 8][4] = {};
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int pair = 0; pair < kBlockKeys / 16; ++pair) {
        uint32_t kf[4];
        ldmatrix_x4(at(keys_at, pair * 16 + (lane / 16) * 8 + lane % 8, 2 * s + (lane / 8) % 2), kf);
        mma_16816<T>(score[2 * pair], qf[s], kf[0], kf[1]);
        mma_16816<T>(score[2 * pair + 1], qf[s], kf[2], kf[3]);
      }
    __syncthreads();  // every warp is done with K(tile)
    if (tile + 1 < tiles) load_tile(keys_at, k, p.ld_k[1], tile + 1);
    copy_commit();

    // Mask, scale into the log2 domain, and fold the tile into each row's maximum and sum.
    const int64_t key0 = static_cast<int64_t>(tile) * kBlockKeys + 2 * (lane % 4);
    float rescale[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool whole = static_cast<int64_t>(tile + 1) * kBlockKeys <= seen[h];  // no key of the tile masked
      float most = -INFINITY;
#pragma unroll
      for (int n = 0; n < kBlockKeys / 8; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float& s = score[n][2 * h + c];
          s = whole || key0 + n * 8 + c < seen[h] ? s * p.scale_log2 : -INFINITY;
          most = fmaxf(most, s);
        }
      most = fmaxf(most, __shfl_xor_sync(0xffffffffu, most, 1));
      most = fmaxf(most, __shfl_xor_sync(0xffffffffu, most, 2));
      const float new_top = fmaxf(top[h], most);
      const float base = new_top == -INFINITY ? 0.0f : new_top;  // a row with no key seen yet stays at 0
      rescale[h] = exp2f(top[h] - base);                         // 0 at the first tile (top = -inf)
      top[h] = new_top;
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < kBlockKeys / 8; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float& s = score[n][2 * h + c];
          s = exp2f(s - base);
          sum += s;
        }
      total[h] = total[h] * rescale[h] + sum;
    }
#pragma unroll
    for (int n = 0; n < 2 * kSteps; ++n)
#pragma unroll
      for (int f = 0; f < 4; ++f) out[n][f] *= rescale[f / 2];

    copy_wait<1>();  // V(tile) has landed (K(tile + 1) may be in flight)
    __syncthreads();
#pragma unroll
    for (int s = 0; s < kBlockKeys / 16; ++s) {
      // P's A fragment for keys 16 s .. 16 s + 15: S's accumulators of n8 tiles 2 s and 2 s + 1.
      const uint32_t pf[4] = {pack<T>(score[2 * s][0], score[2 * s][1]), pack<T>(score[2 * s][2], score[2 * s][3]),
                              pack<T>(score[2 * s + 1][0], score[2 * s + 1][1]),
                              pack<T>(score[2 * s + 1][2], score[2 * s + 1][3])};
#pragma unroll
      for (int pair = 0; pair < kSteps; ++pair) {
        uint32_t vf[4];
        ldmatrix_x4_trans(at(values_at, s * 16 + ((lane / 8) % 2) * 8 + lane % 8, 2 * pair + lane / 16), vf);
        mma_16816<T>(out[2 * pair], pf, vf[0], vf[1]);
        mma_16816<T>(out[2 * pair + 1], pf, vf[2], vf[3]);
      }
    }
    __syncthreads();  // every warp is done with V(tile)
    if (tile + 1 < tiles) load_tile(values_at, v, p.ld_v[1], tile + 1);
    copy_commit();
  }
  copy_wait<0>();  // no copy may still target shared memory when the block exits

  // Each row's sum over its 4 lanes, then O / sum to the row's place in o.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    total[h] += __shfl_xor_sync(0xffffffffu, total[h], 1);
    total[h] += __shfl_xor_sync(0xffffffffu, total[h], 2);
    const int64_t r = first_row + warp * 16 + lane / 4 + 8 * h;
    if (r >= rows) continue;
    T* o = static_cast<T*>(p.o) + b * p.ld_o[0] + (r / p.group) * p.ld_o[1] + (kv_head * p.group + r % p.group) * p.ld_o[2];
    const float inverse = 1.0f / total[h];
#pragma unroll
    for (int n = 0; n < 2 * kSteps; ++n) {
      const int d = n * 8 + 2 * (lane % 4);
      // One 32-bit store for the pair (d is even, the row 16-byte aligned); o is only written here.
      *reinterpret_cast<uint32_t*>(o + d) = pack<T>(out[n][2 * h] * inverse, out[n][2 * h + 1] * inverse);
    }
  }
}

template <typename T>
cudaError_t launch_dim(const FlashParams& p, dim3 grid, int64_t dim, cudaStream_t stream) {
  return dim == 64 ? launch_kernel(&attention_sm80_kernel<T, 64>, grid, dim3(kThreads), 0, stream, p)
                   : launch_kernel(&attention_sm80_kernel<T, 128>, grid, dim3(kThreads), 0, stream, p);
}

}  // namespace

bool attention_sm80_supports_dim(int64_t dim) { return dim == 64 || dim == 128; }

cudaError_t launch_attention_sm80(const AttentionArgs& a, cudaStream_t stream) {
  if (a.batch < 1 || a.q_len < 1 || a.kv_len < 1 || a.heads < 1 || a.kv_heads < 1 || a.heads % a.kv_heads != 0 ||
      !attention_sm80_supports_dim(a.dim) || a.dtype == Dtype::f32 || a.batch > 65535 || a.kv_heads > 65535 ||
      a.q_len > (int64_t{0x7fffffff} / (a.heads / a.kv_heads)))
    return cudaErrorInvalidValue;
  FlashParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.o = a.o;
  p.q_len = a.q_len;
  p.kv_len = a.kv_len;
  p.group = a.heads / a.kv_heads;
  for (int i = 0; i < 3; ++i) {
    p.ld_q[i] = a.ld_q[i];
    p.ld_k[i] = a.ld_k[i];
    p.ld_v[i] = a.ld_v[i];
    p.ld_o[i] = a.ld_o[i];
  }
  p.scale_log2 = a.scale * kLog2e;
  p.causal = a.causal;
  const int64_t blocks = (a.q_len * p.group + kBlockRows - 1) / kBlockRows;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(a.batch));
  return a.dtype == Dtype::f16 ? launch_dim<__half>(p, grid, a.dim, stream)
                               : launch_dim<__nv_bfloat16>(p, grid, a.dim, stream);
}

}  // namespace arbiter::cuda
