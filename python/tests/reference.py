"""Float64 references and the tolerances the tests hold the library to."""

import math

import numpy as np

try:
    from ml_dtypes import bfloat16
except ImportError:  # pragma: no cover
    bfloat16 = None

# Unit roundoff of each storage type: results are rounded to it once, on top of f32 math.
UNIT_ROUNDOFF = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float16): 2.0**-11}
if bfloat16 is not None:
    UNIT_ROUNDOFF[np.dtype(bfloat16)] = 2.0**-8

DTYPES = [np.float32, np.float16] + ([bfloat16] if bfloat16 is not None else [])


def f64(x):
    return np.asarray(x).astype(np.float64)


def random(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


ACTIVATIONS = {
    "none": lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "gelu_erf": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "silu": lambda x: x / (1 + np.exp(-x)),
}


def gemm(a, b, bias=None, c=None, alpha=1.0, beta=0.0, act="none"):
    d = alpha * (f64(a) @ f64(b))
    if c is not None and beta != 0:
        d = d + beta * f64(c)
    if bias is not None:
        d = d + f64(bias)
    return ACTIVATIONS[act](d)


def rmsnorm(x, weight, eps, residual=None):
    x = f64(x) + (0 if residual is None else f64(residual))
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * f64(weight)


def softmax(x):
    x = f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def swiglu(gate, up=None):
    """silu(gate) * up; with up None, gate is [..., 2n]: its first n columns the gate, its last n up."""
    g = f64(gate)
    if up is None:
        n = g.shape[-1] // 2
        g, u = g[..., :n], g[..., n:]
    else:
        u = f64(up)
    return ACTIVATIONS["silu"](g) * u


def _finfo(dtype):
    if bfloat16 is not None and np.dtype(dtype) == np.dtype(bfloat16):
        import ml_dtypes

        return ml_dtypes.finfo(bfloat16)
    return np.finfo(dtype)


def assert_close(got, want, dtype, terms, magnitude):
    """|got - want| <= tol * magnitude elementwise, tol from the dtype's unit roundoff: one
    rounding of the result, plus f32 accumulation over `terms` products (sqrt growth, with a
    generous factor: this is a correctness test, not an accuracy benchmark)."""
    u = UNIT_ROUNDOFF[np.dtype(dtype)]
    tol = 4 * u + 8 * math.sqrt(max(terms, 1)) * 2.0**-24
    err = np.abs(f64(got) - want)
    # Results below the dtype's smallest subnormal round to it or to zero (f16: 6e-8).
    tiny = float(_finfo(dtype).smallest_subnormal)
    bound = tol * (magnitude + np.abs(want)) + tiny
    worst = np.unravel_index(np.argmax(err / bound), err.shape) if err.size else None
    assert err.size == 0 or np.all(err <= bound), (
        f"max error {err[worst]:.3g} at {worst} (got {f64(got)[worst]:.6g}, want {want[worst]:.6g}, "
        f"bound {bound[worst]:.3g}, dtype {np.dtype(dtype).name})"
    )
