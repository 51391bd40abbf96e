// The Llama attention block's input (qkv: rmsnorm, the fused QKV projection, rope on q and k) on
// the CPU, fused against the chain of single ops, as an application sees it (the public C API
// only). Three metrics, never mixed:
//   1. kernel runtime per op: each of the chain's calls (rmsnorm, the projection gemm, rope on
//      q's heads, rope on k's heads) made by itself, with the kernel dispatch chose for it;
//   2. block time: arb_qkv run by chain.qkv (those calls, dispatched from inside) and by each
//      fused kernel (cpu.qkv_fused; cpu.qkv_bf16_avx512 where it runs), and each fused
//      kernel's speedup over the chain;
//   3. tuning time: the first chain call of a shape, which tunes each step's problem (the
//      table's policy is tune-missing), and the tuning of the block itself (both candidates).
// Method as bench/mlp_block.cpp: a table in a fresh folder, so every step is tuned in this run
// and then used; a block time is the median of --samples calls after 3 warm-up calls, x and y
// rotated over 2 buffer sets (the weight, tens of MB, is read from memory every call); inputs
// uniform in [-1, 1] (the weight scaled by 1/sqrt(hidden)), positions 0..rows-1 past 100, and the
// outputs checked against each other. One thread.
//
//   arbiter_bench_qkv_block [--hidden=4096] [--heads=32] [--kvheads=8] [--dim=128] [--rows=1,4,16]
//                           [--dtype=bf16] [--samples=15] [--fused=cpu.qkv_fused,cpu.qkv_bf16_avx512] [--log=error]
// A fused kernel that does not take the problem (another dtype, a CPU without its ISA) is
// listed as not run, with the library's reason.
#include "block_bench.hpp"

#include <arbiter/arbiter.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

using namespace arbiter::bench;

namespace {

struct Options : CommonOptions {
  int64_t hidden = 4096, heads = 32, kv_heads = 8, dim = 128;
};

Options parse(int argc, char** argv) {
  Options o;
  o.fused = {"cpu.qkv_fused", "cpu.qkv_bf16_avx512"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) { return a.rfind(key, 0) == 0 ? a.substr(std::strlen(key)) : std::string(); };
    if (auto v = value("--hidden="); !v.empty()) o.hidden = std::stoll(v);
    else if (auto v = value("--heads="); !v.empty()) o.heads = std::stoll(v);
    else if (auto v = value("--kvheads="); !v.empty()) o.kv_heads = std::stoll(v);
    else if (auto v = value("--dim="); !v.empty()) o.dim = std::stoll(v);
    else if (!o.take(a)) {
      std::fprintf(stderr, "usage: arbiter_bench_qkv_block [--hidden=N] [--heads=N] [--kvheads=N] [--dim=N] [--rows=1,4,16] "
                           "[--dtype=bf16|f16|f32] [--samples=N] [--fused=KERNEL,...] [--log=error|warn|info]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("OMP_NUM_THREADS", "1", 1);
  const Options o = parse(argc, argv);
  const DLDataType dl = o.dl_dtype();
  const int32_t arb = o.arb_dtype();
  const BlockContexts contexts("qkv", "chain.qkv", o);
  arb_context chain = contexts.chain;

  const int64_t all_heads = o.heads + 2 * o.kv_heads, out = all_heads * o.dim;
  Buffer norm({o.hidden}, dl, arb, 1.0f, 1), weight({out, o.hidden}, dl, arb, 1.0f / std::sqrt(static_cast<float>(o.hidden)), 2);
  const double weight_bytes = static_cast<double>(weight.size_bytes);
  std::printf("# The attention block's input, fused vs chain: %s hidden=%lld heads=%lld kvheads=%lld dim=%lld "
              "(the fused QKV weight %.0f MB)\n\n",
              o.dtype.c_str(), static_cast<long long>(o.hidden), static_cast<long long>(o.heads),
              static_cast<long long>(o.kv_heads), static_cast<long long>(o.dim), weight_bytes / 1e6);

  std::string per_op, blocks, tuning;
  for (const int64_t rows : o.rows) {
    Buffer x0({rows, o.hidden}, dl, arb, 1.0f, 10 + rows), x1({rows, o.hidden}, dl, arb, 1.0f, 20 + rows);
    Buffer y0({rows, all_heads, o.dim}, dl, arb, 0.0f, 0), y1({rows, all_heads, o.dim}, dl, arb, 0.0f, 0),
        yf({rows, all_heads, o.dim}, dl, arb, 0.0f, 0);
    std::vector<int32_t> position_values(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) position_values[static_cast<size_t>(r)] = static_cast<int32_t>(100 + r);
    std::vector<int64_t> position_shape = {rows};
    DLTensor positions{};
    positions.data = position_values.data();
    positions.device = {kDLCPU, 0};
    positions.ndim = 1;
    positions.dtype = {kDLInt, 32, 1};
    positions.shape = position_shape.data();
    arb_qkv_args args = ARB_QKV_ARGS_INIT;
    args.norm_weight = &norm.t;
    args.weight = &weight.t;
    args.positions = &positions;
    args.heads = o.heads;
    args.kv_heads = o.kv_heads;
    auto set = [&](int i, DLTensor* y) {
      args.x = i % 2 ? &x1.t : &x0.t;
      args.y = y != nullptr ? y : i % 2 ? &y1.t : &y0.t;
    };
    // 3. Tuning, then 2. block time.
    BlockRace race;
    race.rows = rows;
    race.samples = o.samples;
    race.weight_bytes = weight_bytes;
    race_block(race, ARB_OP_QKV, &args, chain, contexts.fused, o.fused, y0, y1, yf, [&](arb_context ctx, int i, DLTensor* y) {
      set(i, y);
      return arb_qkv(ctx, &args, nullptr);
    });
    tuning += race.tuning;
    blocks += race.blocks;
    const std::string& explanation = race.explanation;

    // 1. Each step alone, as the chain's explain lists it, with the kernel it got: rope turns the
    // projection's q and k heads where they lie in y.
    Buffer normed({rows, o.hidden}, dl, arb, 0.0f, 0);
    std::vector<int64_t> flat_shape = {rows, out}, q_shape = {rows, o.heads, o.dim}, k_shape = {rows, o.kv_heads, o.dim},
                         head_strides = {out, o.dim, 1};
    DLTensor projected = y0.t, q_part = y0.t, k_part = y0.t;
    projected.ndim = 2;
    projected.shape = flat_shape.data();
    q_part.shape = q_shape.data();
    q_part.strides = head_strides.data();
    k_part.shape = k_shape.data();
    k_part.strides = head_strides.data();
    k_part.byte_offset = static_cast<uint64_t>(o.heads * o.dim) * (dl.bits / 8);
    arb_rmsnorm_args rn = ARB_RMSNORM_ARGS_INIT;
    rn.x = &x0.t;
    rn.weight = &norm.t;
    rn.y = &normed.t;
    rn.eps = args.eps;
    arb_gemm_args project = ARB_GEMM_ARGS_INIT;
    project.a = &normed.t;
    project.b = &weight.t;
    project.trans_b = 1;
    project.d = &projected;
    arb_rope_args turn_q = ARB_ROPE_ARGS_INIT;
    turn_q.x = &q_part;
    turn_q.positions = &positions;
    turn_q.theta = args.theta;
    turn_q.max_position = args.max_position;
    turn_q.layout = args.layout;
    arb_rope_args turn_k = turn_q;
    turn_k.x = &k_part;
    append_steps(per_op, rows, explanation,
                 {{"rmsnorm", timed(o.samples, [&](int) { check(arb_rmsnorm(chain, &rn, nullptr), "arb_rmsnorm"); })},
                  {"gemm qkv (n = (heads + 2 kvheads) dim, tb=1)",
                   timed(o.samples, [&](int) { check(arb_gemm(chain, &project, nullptr), "arb_gemm (qkv)"); })},
                  {"rope q", timed(o.samples, [&](int) { check(arb_rope(chain, &turn_q, nullptr), "arb_rope (q)"); })},
                  {"rope k", timed(o.samples, [&](int) { check(arb_rope(chain, &turn_k, nullptr), "arb_rope (k)"); })}},
                 "chain.qkv", race.chain_median);
  }
  print_block_report(o.samples, "chain.qkv", "the weight", per_op, blocks, tuning,
                     "uniform inputs, the weight scaled by 1/sqrt(hidden); positions 100 + row");
  return 0;
}
