// The Llama MLP block on the CPU, fused against the chain of single ops, as an application sees
// it (the public C API only). Three metrics, never mixed:
//   1. kernel runtime per op: each of the chain's calls (rmsnorm, the gate/up gemm, swiglu, the
//      down gemm with x as C) made by itself, with the kernel dispatch chose for it;
//   2. block time: arb_mlp run by chain.mlp (those calls, dispatched from inside) and by each
//      fused kernel (cpu.mlp_fused; cpu.mlp_bf16_avx512 where it runs), and each fused
//      kernel's speedup over the chain;
//   3. tuning time: the first chain call of a shape, which tunes each step's problem (the
//      table's policy is tune-missing), and the tuning of the block itself (both candidates).
// Method: a table in a fresh folder, so every step is tuned in this run and then used; a block
// time is the median of --samples calls after 3 warm-up calls, x and y rotated over 2 buffer
// sets (the weights, hundreds of MB, are read from memory every call: no cache holds them);
// inputs uniform in [-1, 1] (the weights scaled by 1/sqrt(fan-in), as a trained layer's), and
// the two outputs checked against each other. One thread (OMP_NUM_THREADS=1 is set for the
// vendor libraries): the fused kernel is single-threaded.
//
//   arbiter_bench_mlp_block [--hidden=4096] [--inter=14336] [--rows=1,4,16] [--dtype=bf16] [--samples=15]
//                           [--fused=cpu.mlp_fused,cpu.mlp_bf16_avx512] [--log=error]
// A fused kernel that does not take the problem (another dtype, a CPU without its ISA) is
// listed as not run, with the library's reason.
#include "block_bench.hpp"

#include <arbiter/arbiter.h>
#include <arbiter/float16.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace arbiter::bench;

namespace {

struct Options : CommonOptions {
  int64_t hidden = 4096, inter = 14336;
};

Options parse(int argc, char** argv) {
  Options o;
  o.fused = {"cpu.mlp_fused", "cpu.mlp_bf16_avx512"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) { return a.rfind(key, 0) == 0 ? a.substr(std::strlen(key)) : std::string(); };
    if (auto v = value("--hidden="); !v.empty()) o.hidden = std::stoll(v);
    else if (auto v = value("--inter="); !v.empty()) o.inter = std::stoll(v);
    else if (!o.take(a)) {
      std::fprintf(stderr, "usage: arbiter_bench_mlp_block [--hidden=N] [--inter=N] [--rows=1,4,16] [--dtype=bf16|f16|f32] "
                           "[--samples=N] [--fused=KERNEL,...] [--log=error|warn|info]\n");
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
  const BlockContexts contexts("mlp", "chain.mlp", o);
  arb_context chain = contexts.chain;

  const float w_in = 1.0f / std::sqrt(static_cast<float>(o.hidden)), w_out = 1.0f / std::sqrt(static_cast<float>(o.inter));
  Buffer norm({o.hidden}, dl, arb, 1.0f, 1), gate_up({2 * o.inter, o.hidden}, dl, arb, w_in, 2), down({o.hidden, o.inter}, dl, arb, w_out, 3);
  const double weight_bytes = static_cast<double>(gate_up.size_bytes + down.size_bytes);
  std::printf("# The MLP block, fused vs chain: %s hidden=%lld inter=%lld (weights %.0f MB, gate and up fused)\n\n",
              o.dtype.c_str(), static_cast<long long>(o.hidden), static_cast<long long>(o.inter), weight_bytes / 1e6);

  std::string per_op, blocks, tuning;
  for (const int64_t rows : o.rows) {
    Buffer x0({rows, o.hidden}, dl, arb, 1.0f, 10 + rows), x1({rows, o.hidden}, dl, arb, 1.0f, 20 + rows);
    Buffer y0({rows, o.hidden}, dl, arb, 0.0f, 0), y1({rows, o.hidden}, dl, arb, 0.0f, 0), yf({rows, o.hidden}, dl, arb, 0.0f, 0);
    arb_mlp_args args = ARB_MLP_ARGS_INIT;
    args.norm_weight = &norm.t;
    args.gate = &gate_up.t;
    args.down = &down.t;
    auto set = [&](int i, DLTensor* y) {
      args.x = i % 2 ? &x1.t : &x0.t;
      args.y = y != nullptr ? y : i % 2 ? &y1.t : &y0.t;
    };
    // 3. Tuning, then 2. block time.
    BlockRace race;
    race.rows = rows;
    race.samples = o.samples;
    race.weight_bytes = weight_bytes;
    race_block(race, ARB_OP_MLP, &args, chain, contexts.fused, o.fused, y0, y1, yf, [&](arb_context ctx, int i, DLTensor* y) {
      set(i, y);
      return arb_mlp(ctx, &args, nullptr);
    });
    tuning += race.tuning;
    blocks += race.blocks;
    const std::string& explanation = race.explanation;

    // 1. Each step alone, as the chain's explain lists it, with the kernel it got.
    Buffer normed({rows, o.hidden}, dl, arb, 0.0f, 0), projected({rows, 2 * o.inter}, dl, arb, 0.0f, 0),
        activated({rows, o.inter}, dl, arb, 0.0f, 0);
    arb_rmsnorm_args rn = ARB_RMSNORM_ARGS_INIT;
    rn.x = &x0.t;
    rn.weight = &norm.t;
    rn.y = &normed.t;
    rn.eps = args.eps;
    arb_gemm_args project = ARB_GEMM_ARGS_INIT;
    project.a = &normed.t;
    project.b = &gate_up.t;
    project.trans_b = 1;
    project.d = &projected.t;
    arb_swiglu_args act = ARB_SWIGLU_ARGS_INIT;
    act.gate = &projected.t;
    act.y = &activated.t;
    arb_gemm_args dn = ARB_GEMM_ARGS_INIT;
    dn.a = &activated.t;
    dn.b = &down.t;
    dn.trans_b = 1;
    dn.c = &x0.t;
    dn.beta = 1.0f;
    dn.d = &y0.t;
    append_steps(per_op, rows, explanation,
                 {{"rmsnorm", timed(o.samples, [&](int) { check(arb_rmsnorm(chain, &rn, nullptr), "arb_rmsnorm"); })},
                  {"gemm gate/up (n = 2 inter, tb=1)",
                   timed(o.samples, [&](int) { check(arb_gemm(chain, &project, nullptr), "arb_gemm (gate/up)"); })},
                  {"swiglu", timed(o.samples, [&](int) { check(arb_swiglu(chain, &act, nullptr), "arb_swiglu"); })},
                  {"gemm down (beta 1, c = x)", timed(o.samples, [&](int) { check(arb_gemm(chain, &dn, nullptr), "arb_gemm (down)"); })}},
                 "chain.mlp", race.chain_median);
  }
  print_block_report(o.samples, "chain.mlp", "the weights", per_op, blocks, tuning,
                     "uniform inputs, weights scaled by 1/sqrt(fan-in)");
  return 0;
}
