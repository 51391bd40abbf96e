#!/usr/bin/env bash
# The Python package as a user gets it: builds the wheel from the repository (scikit-build-core,
# the build requirements from .venv/, so no network for the build), installs it into a fresh
# virtual environment, and from another folder imports it, lists its plugins and runs each op
# against NumPy. Prints the wheel's size and the installed package's. CTest: python.wheel.
#   tools/check-wheel.sh [python]    (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${1:-$root/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

settings=()
if command -v ccache >/dev/null 2>&1; then
  settings=(--config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache
            --config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
echo "check-wheel: building the wheel"
"$python" -m pip wheel -q --no-build-isolation --no-deps --disable-pip-version-check "${settings[@]}" -w "$work/dist" .
wheel=$(ls "$work"/dist/arbiter-*.whl)

echo "check-wheel: installing $(basename "$wheel") into a fresh virtual environment"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"

mkdir "$work/elsewhere"
cd "$work/elsewhere"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
import numpy as np
import arbiter

venv = sys.argv[1]
assert arbiter.__file__.startswith(venv), f"imported {arbiter.__file__}, not the installed package"
ctx = arbiter.Context()
plugins = {p.name: p for p in ctx.plugins()}
for p in plugins.values():
    print(f"  plugin {p.name or p.path}: {p.status}{' (' + p.reason + ')' if p.reason else ''}")
assert plugins["cpu"].status == "loaded", plugins["cpu"]
assert all(p.path.startswith(os.path.dirname(arbiter.__file__)) for p in plugins.values() if p.path), \
    "a plugin was found outside the package"
if os.path.isfile("/usr/local/cuda/bin/nvcc"):  # the CUDA plugins come along with the toolkit
    for name in ("cuda", "cublaslt", "generated"):
        assert any(name in os.path.basename(p.path) for p in plugins.values()), f"no {name} plugin in the package"
rng = np.random.default_rng(0)
a, b = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 24)).astype(np.float32)
np.testing.assert_allclose(ctx.gemm(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
x = rng.standard_normal((4, 64)).astype(np.float32)
e = np.exp(x - x.max(-1, keepdims=True))
np.testing.assert_allclose(ctx.softmax(x), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
y = ctx.rmsnorm(x, np.ones(64, np.float32))
np.testing.assert_allclose(y, x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6), rtol=1e-4, atol=1e-5)
g = rng.standard_normal((4, 128)).astype(np.float32)  # one fused gate/up output: the halves
s = ctx.swiglu(g)
np.testing.assert_allclose(s, g[:, :64] / (1 + np.exp(-g[:, :64].astype(np.float64))) * g[:, 64:], rtol=1e-5, atol=1e-6)
q = rng.standard_normal((4, 2, 64)).astype(np.float32)  # [tokens, heads, head_dim], rotated in place
positions = np.array([0, 1, 100, 8191], np.int32)
angle = positions[:, None, None] * 500000.0 ** (-np.arange(32) / 32)
want = np.concatenate([q[..., :32] * np.cos(angle) - q[..., 32:] * np.sin(angle),
                       q[..., 32:] * np.cos(angle) + q[..., :32] * np.sin(angle)], axis=-1)
assert ctx.rope(q, positions) is q
np.testing.assert_allclose(q, want, rtol=1e-4, atol=1e-4)
# The MLP block, with the built-in chain plugin's candidate among the packaged ones.
xm = rng.standard_normal((2, 32)).astype(np.float32)
norm_w = rng.uniform(0.5, 1.5, 32).astype(np.float32)
gate_up = (rng.standard_normal((2 * 48, 32)) / 6).astype(np.float32)
down = (rng.standard_normal((32, 48)) / 7).astype(np.float32)
n = xm / np.sqrt((xm.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5) * norm_w
g, u = n @ gate_up[:48].T, n @ gate_up[48:].T
np.testing.assert_allclose(ctx.mlp(xm, norm_w, gate_up, down=down), xm + (g / (1 + np.exp(-g)) * u) @ down.T,
                           rtol=1e-4, atol=1e-4)
# The attention block's input: 2 q heads, 1 k and 1 v head of 16 from one fused weight, q and k rotated.
w_qkv = (rng.standard_normal(((2 + 2 * 1) * 16, 32)) / 6).astype(np.float32)
p = (n @ w_qkv.T).reshape(2, 4, 16)
angle = np.array([3, 4000])[:, None, None] * 500000.0 ** (-np.arange(8) / 8)
p[:, :3] = np.concatenate([p[:, :3, :8] * np.cos(angle) - p[:, :3, 8:] * np.sin(angle),
                           p[:, :3, 8:] * np.cos(angle) + p[:, :3, :8] * np.sin(angle)], axis=-1)
np.testing.assert_allclose(ctx.qkv(xm, norm_w, w_qkv, np.array([3, 4000], np.int32), 2, 1), p, rtol=1e-4, atol=1e-4)
print(f"  arbiter {arbiter.__version__} from {os.path.dirname(arbiter.__file__)}: "
      "gemm, softmax, rmsnorm, swiglu, rope, mlp, qkv agree with NumPy")
PY
"$work/venv/bin/arbiter" plugins >/dev/null
package=$("$work/venv/bin/python" -c "import arbiter, os; print(os.path.dirname(arbiter.__file__))")
echo "check-wheel: wheel $(du -k "$wheel" | cut -f1) KiB; installed package $(du -sk "$package" | cut -f1) KiB" \
     "(plugins $(du -sk "$package/lib/arbiter/plugins" | cut -f1) KiB)"
echo "check-wheel: passed"
