"""Threads calling one context at once (the GIL is released during each call)."""

import numpy as np

import reference as ref
from concurrency import assert_releases_gil, run_in_threads


def test_threads_share_one_context(ctx):
    def worker(seed):
        rng = np.random.default_rng(seed)
        for i in range(40):
            m, n, k = 1 + (seed * 7 + i) % 48, 1 + (seed + i * 3) % 40, 1 + (i * 5) % 64
            a, b = ref.random(rng, (m, k), np.float32), ref.random(rng, (k, n), np.float32)
            ref.assert_close(ctx.gemm(a, b), ref.gemm(a, b), np.float32, k, np.abs(a) @ np.abs(b))
            x = ref.random(rng, (m, 64), np.float32)
            ref.assert_close(ctx.softmax(x), ref.softmax(x), np.float32, 64, ref.softmax(x))
            fused = ref.random(rng, (m, 2 * n), np.float32)
            want = ref.swiglu(fused)
            ref.assert_close(ctx.swiglu(fused), want, np.float32, 1, np.abs(want))
            x = ref.random(rng, (m, 1 + i % 4, 2 * n), np.float32)
            positions = rng.integers(0, 8192, m, dtype=np.int32)
            before = x.copy()
            assert ctx.rope(x, positions, layout=("half", "interleaved")[i % 2]) is x
            ref.assert_rope_close(x, before, positions, 500000.0, ("half", "interleaved")[i % 2], np.float32)
            x, norm_weight = ref.random(rng, (m, 16), np.float32), ref.random(rng, (16,), np.float32)
            gate_up = ref.fused_gate_up(*(ref.random(rng, (n, 16), np.float32, 0.25) for _ in range(2)))
            down = ref.random(rng, (16, n), np.float32, 0.25)
            ref.assert_mlp_close(ctx.mlp(x, norm_weight, gate_up, down=down), x, norm_weight, gate_up, None, down,
                                 np.float32)
            heads, kv_heads, layout = 1 + i % 4, 1 + seed % 2, ("half", "interleaved")[(i + seed) % 2]
            weight = ref.random(rng, ((heads + 2 * kv_heads) * 2 * (1 + n % 8), 16), np.float32, 0.25)
            ref.assert_qkv_close(ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads, layout=layout), x,
                                 norm_weight, weight, positions, heads, kv_heads, np.float32, layout=layout)

    run_in_threads(worker, 8)


def test_gil_is_released_during_a_call(ctx):
    a = np.ones((384, 384), np.float32)
    ctx.gemm(a, a)  # selection and first-call checks out of the way
    assert_releases_gil(lambda: ctx.gemm(a, a))


def test_gil_is_released_during_a_swiglu(ctx):
    gate = np.ones((512, 2 * 8192), np.float32)  # 48 MiB moved: milliseconds
    out = np.empty((512, 8192), np.float32)
    ctx.swiglu(gate, out=out)
    assert_releases_gil(lambda: ctx.swiglu(gate, out=out))


def test_gil_is_released_during_a_rope(ctx):
    x = np.ones((2048, 32, 128), np.float32)  # 32 MiB read and written: milliseconds
    positions = np.arange(2048, dtype=np.int32)
    ctx.rope(x, positions)
    assert_releases_gil(lambda: ctx.rope(x, positions))


def test_gil_is_released_during_an_mlp(ctx):
    x, norm_weight = np.ones((16, 512), np.float32), np.ones(512, np.float32)
    gate_up = ref.fused_gate_up(np.full((1024, 512), 0.01, np.float32), np.full((1024, 512), 0.01, np.float32))
    down = np.full((512, 1024), 0.01, np.float32)  # 6 MiB of weights: milliseconds
    out = np.empty_like(x)
    ctx.mlp(x, norm_weight, gate_up, down=down, out=out)
    assert_releases_gil(lambda: ctx.mlp(x, norm_weight, gate_up, down=down, out=out))


def test_gil_is_released_during_a_qkv(ctx):
    x, norm_weight = np.ones((16, 1024), np.float32), np.ones(1024, np.float32)
    weight = np.full(((32 + 2 * 8) * 64, 1024), 0.01, np.float32)  # 12 MiB of weight: milliseconds
    positions = np.arange(16, dtype=np.int32)
    out = np.empty((16, 32 + 2 * 8, 64), np.float32)
    ctx.qkv(x, norm_weight, weight, positions, 32, 8, out=out)
    assert_releases_gil(lambda: ctx.qkv(x, norm_weight, weight, positions, 32, 8, out=out))
