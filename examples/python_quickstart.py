"""arbiter from Python: each op on NumPy data, checked against NumPy; explain, plugins, verify,
and a small tune into a table that a second context then replays.

    pip install .                       # from the repository root (docs/python.md)
    python examples/python_quickstart.py
"""

import os
import tempfile

import numpy as np

import arbiter

rng = np.random.default_rng(0)
ctx = arbiter.Context()

# GEMM with a bias and a GELU epilogue; b given as a transposed view (no copy: trans_b).
a = rng.standard_normal((128, 64)).astype(np.float32)
b = rng.standard_normal((32, 64)).astype(np.float32).T
bias = rng.standard_normal(32).astype(np.float32)
d = ctx.gemm(a, b, bias=bias, act="gelu_erf")
h = a.astype(np.float64) @ b + bias
want = 0.5 * h * (1 + np.vectorize(__import__("math").erf)(h / np.sqrt(2)))
error = np.abs(d - want).max()
print(f"gemm: max |error| {error:.2e}")
assert error < 1e-3, "the GEMM disagrees with NumPy"

# RMSNorm with a residual (x += residual in place, then normalised), and softmax, in bfloat16.
from ml_dtypes import bfloat16

x = rng.standard_normal((8, 256)).astype(bfloat16)
y = ctx.rmsnorm(x, np.ones(256, bfloat16), eps=1e-5, residual=np.ones((8, 256), bfloat16))
p = ctx.softmax(y)
print(f"rmsnorm + softmax in {p.dtype}: rows sum to {p.astype(np.float32).sum(-1).round(2)}")

# SwiGLU on the output of one fused gate/up GEMM: its first half the gate, its second half up.
gate_up = ctx.gemm(a, rng.standard_normal((64, 2 * 48)).astype(np.float32))  # [128, 96]
s = ctx.swiglu(gate_up)                                                        # [128, 48]
g, u = gate_up[:, :48].astype(np.float64), gate_up[:, 48:].astype(np.float64)
want = g / (1 + np.exp(-g)) * u
error = (np.abs(s - want) / (1 + np.abs(want))).max()
print(f"swiglu: max relative error {error:.2e}")
assert error < 1e-3, "the SwiGLU disagrees with NumPy"

# Rotary position embedding in place on [tokens, heads, head_dim], one int32 position per token.
q = rng.standard_normal((4, 8, 64)).astype(np.float32)
positions = np.array([7, 0, 4000, 12], np.int32)
before = q.astype(np.float64)
ctx.rope(q, positions, theta=500000.0, max_position=8192)  # split-half pairs (Hugging Face's layout)
angle = positions[:, None, None] * 500000.0 ** (-2 * np.arange(32) / 64)
x1, x2 = before[..., :32], before[..., 32:]
want = np.concatenate([x1 * np.cos(angle) - x2 * np.sin(angle), x2 * np.cos(angle) + x1 * np.sin(angle)], -1)
error = np.abs(q - want).max()
print(f"rope: max |error| {error:.2e}")
assert error < 1e-4, "the RoPE disagrees with NumPy"

print(ctx.explain("gemm", a, b, bias=bias, act="gelu_erf"))
for plugin in ctx.plugins():
    print(f"plugin {plugin.name or os.path.basename(plugin.path)}: {plugin.status} {plugin.reason}")
print(ctx.verify("softmax f32 rows=8 cols=4096"))

with tempfile.TemporaryDirectory() as folder:
    table = os.path.join(folder, "table.toml")
    report = ctx.tune(["gemm f32 m=128 n=32 k=64 tb=1", "softmax bf16 rows=8 cols=256"], table=table)
    print(report)
    with arbiter.Context(f'[table]\npath = "{table}"\n') as tuned:
        print(tuned.explain("softmax bf16 rows=8 cols=256"))
