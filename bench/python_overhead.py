"""Per-call overhead of the Python package on a tiny GEMM, against NumPy's own matmul on the
same shape and against the C call underneath.

    PYTHONPATH=<build>/python python bench/python_overhead.py [--size 8] [--rounds 31] [--calls 2000]
    PYTHONPATH=<build>/python python bench/python_overhead.py --only VARIANT --calls N   (for callgrind)

Method: the variants run interleaved, round after round (so drift hits them alike); in each
round every variant makes `calls` back-to-back calls on fresh random f32 data (checked against
NumPy in float64 first) and the time per call is recorded; the report gives each variant's
median over the rounds with p20 and p80. Variants:
  numpy.matmul         np.matmul(a, b, out=d)
  arbiter.gemm(out=d)  ctx.gemm(a, b, out=d): framework lookup, argument handling, DLPack import, C call
  arbiter.gemm         ctx.gemm(a, b): the same plus allocating the result
  extension            the extension's method called directly (nanobind + DLPack import + C call)
  plan.run(out=d)      plan.run(a, b, out=d) of plan = ctx.plan_gemm(a, b, out=d): the run's checks
                       (shape, strides, dtype against the plan's), DLPack import, arb_plan_run
  plan.run             plan.run(a, b): the same plus allocating the result
  plan extension       the plan's extension method called directly
The C calls alone are counted by bench/dispatch_overhead.sh (api_gemm, plan_gemm: gemm f32 8x8x8);
bench/python_overhead.sh counts the Python variants' instructions the same way (callgrind, by
difference of two call counts).
"""

import argparse
import os
import platform
import statistics
import time

import numpy as np

import arbiter


def variants(ctx, plan, a, b, d):
    c, p = ctx._c, plan._p
    return {
        "numpy.matmul": lambda: np.matmul(a, b, out=d),
        "arbiter.gemm(out=d)": lambda: ctx.gemm(a, b, out=d),
        "arbiter.gemm": lambda: ctx.gemm(a, b),
        "extension": lambda: c.gemm(a, b, None, None, d, 0, 1.0, 0.0, 0, 0, False),
        "plan.run(out=d)": lambda: plan.run(a, b, out=d),
        "plan.run": lambda: plan.run(a, b),
        "plan extension": lambda: p.gemm(a, b, None, None, d, 0, 0),
    }


def bench_config():
    """The embedded default's settings, with the plugin of ARBITER_BENCH_TRUST_PATH trusted by its
    SHA-256 (ARBITER_BENCH_TRUST_SHA256), as bench/dispatch_overhead.cpp does: no verification
    runs, whose cost varies with the gate's random seeds and would not cancel between two call
    counts. None (the embedded default) without them."""
    path, sha = os.environ.get("ARBITER_BENCH_TRUST_PATH"), os.environ.get("ARBITER_BENCH_TRUST_SHA256")
    if not (path and sha):
        return None
    return f'log_level = "warn"\n[[plugins.trust]]\npath = "{path}"\nsha256 = "{sha}"\n'


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8, help="m = n = k (default 8)")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--calls", type=int, default=2000, help="calls per variant per round")
    parser.add_argument("--only", help="run one variant `calls` times and exit (for callgrind)")
    args = parser.parse_args()

    n = args.size
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    d = np.empty((n, n), np.float32)
    ctx = arbiter.Context(bench_config())
    plan = ctx.plan_gemm(a, b, out=d)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for name, call in variants(ctx, plan, a, b, d).items():  # warm-up and correctness, every variant
        d.fill(np.nan)
        result = call()
        got = d if result is None else result
        assert np.allclose(got, want, rtol=1e-4, atol=1e-4), name
    if args.only:
        call = variants(ctx, plan, a, b, d)[args.only]
        for _ in range(args.calls):
            call()
        return

    samples = {name: [] for name in variants(ctx, plan, a, b, d)}
    for _ in range(args.rounds):
        a[...] = rng.standard_normal((n, n))  # fresh data each round, never zeros
        b[...] = rng.standard_normal((n, n))
        for name, call in variants(ctx, plan, a, b, d).items():
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            samples[name].append((time.perf_counter() - start) / args.calls)
    baseline = statistics.median(samples["numpy.matmul"])
    print(f"gemm f32 {n}x{n}x{n}; {cpu_name()}; Python {platform.python_version()}, NumPy {np.__version__}, "
          f"arbiter {arbiter.__version__}")
    print(f"method: {args.rounds} interleaved rounds of {args.calls} calls per variant, time per call, median (p20-p80)")
    print("| variant | median | p20 | p80 | vs numpy.matmul |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, times in samples.items():
        q = statistics.quantiles(times, n=5)
        med = statistics.median(times)
        print(f"| {name} | {med * 1e6:.2f} us | {q[0] * 1e6:.2f} us | {q[3] * 1e6:.2f} us | {med / baseline:.2f}x |")


if __name__ == "__main__":
    main()
