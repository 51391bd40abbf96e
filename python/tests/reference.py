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


def rope_pairs(layout, dim):
    """The indices of each pair's two elements in a head of `dim`: (i, i + dim/2) for "half",
    (2i, 2i + 1) for "interleaved"."""
    i = np.arange(dim // 2)
    return (i, i + dim // 2) if layout == "half" else (2 * i, 2 * i + 1)


def rope_angles(positions, dim, theta):
    """position * theta^(-2i / dim) for each token and pair: [..., 1, dim/2] (a head axis of 1)."""
    return np.asarray(positions, np.float64)[..., None, None] * theta ** (-2.0 * np.arange(dim // 2) / dim)


def rope(x, positions, theta=500000.0, layout="half"):
    """x [..., heads, dim] with each pair (x1, x2) turned by its angle: x1 cos - x2 sin, x2 cos + x1 sin."""
    x = f64(x)
    first, second = rope_pairs(layout, x.shape[-1])
    angle = rope_angles(positions, x.shape[-1], theta)
    c, s = np.cos(angle), np.sin(angle)
    y = np.empty_like(x)
    y[..., first] = x[..., first] * c - x[..., second] * s
    y[..., second] = x[..., second] * c + x[..., first] * s
    return y


def assert_rope_close(got, x, positions, theta, layout, dtype):
    """`got` against rope(x): each element is two products of its pair, so the error is relative
    to |x1| + |x2|; on top of that, a kernel that computes the angle as an f32 product (as the
    library allows) turns the pair by up to 8 f32 ulps of the angle."""
    x = f64(x)
    first, second = rope_pairs(layout, x.shape[-1])
    pair = np.abs(x[..., first]) + np.abs(x[..., second])
    magnitude = np.empty_like(x)
    magnitude[..., first] = magnitude[..., second] = pair
    angle_error = np.empty_like(x)
    angle_error[..., first] = angle_error[..., second] = 8 * 2.0**-24 * rope_angles(positions, x.shape[-1], theta) * pair
    assert_close(got, rope(x, positions, theta, layout), dtype, 2, magnitude, slack=angle_error)


def _finfo(dtype):
    if bfloat16 is not None and np.dtype(dtype) == np.dtype(bfloat16):
        import ml_dtypes

        return ml_dtypes.finfo(bfloat16)
    return np.finfo(dtype)


def assert_close(got, want, dtype, terms, magnitude, slack=0.0):
    """|got - want| <= tol * magnitude (+ `slack`) elementwise, tol from the dtype's unit
    roundoff: one rounding of the result, plus f32 accumulation over `terms` products (sqrt
    growth, with a generous factor: this is a correctness test, not an accuracy benchmark)."""
    u = UNIT_ROUNDOFF[np.dtype(dtype)]
    tol = 4 * u + 8 * math.sqrt(max(terms, 1)) * 2.0**-24
    err = np.abs(f64(got) - want)
    # Results below the dtype's smallest subnormal round to it or to zero (f16: 6e-8).
    tiny = float(_finfo(dtype).smallest_subnormal)
    bound = tol * (magnitude + np.abs(want)) + tiny + slack
    worst = np.unravel_index(np.argmax(err / bound), err.shape) if err.size else None
    assert err.size == 0 or np.all(err <= bound), (
        f"max error {err[worst]:.3g} at {worst} (got {f64(got)[worst]:.6g}, want {want[worst]:.6g}, "
        f"bound {bound[worst]:.3g}, dtype {np.dtype(dtype).name})"
    )


def attention(q, k, v, causal=False, scale=None):
    """softmax(scale q k^T) v per batch and head: q [b, sq, h, d], k and v [b, skv, hkv, d]; query
    head i reads key/value head i // (h // hkv); causal: query i sees key j <= i + skv - sq."""
    q, k, v = f64(q), f64(k), f64(v)
    _, sq, h, d = q.shape
    skv, hkv = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    k = np.repeat(k, h // hkv, axis=2)
    v = np.repeat(v, h // hkv, axis=2)
    s = scale * np.einsum("bihd,bjhd->bhij", q, k)
    if causal:
        visible = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + skv - sq
        s = np.where(visible, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhij,bjhd->bihd", p, v)


def fused_gate_up(gate, up):
    """gate and up [inter, hidden] as one fused [2 inter, hidden] weight (the gate rows, then the up
    rows), a view of a buffer with inter spare rows after it. arb_mlp with up NULL checks y against
    an up that it takes to span inter rows past the fused weight's end (core/problem/ops/mlp.cpp:
    up keeps the whole weight's byte span; test_mlp_out_right_after_a_fused_weight): the spare rows
    keep every other allocation out of that span, so that no test depends on where y is allocated."""
    return np.concatenate([gate, up, np.zeros_like(up)])[: 2 * gate.shape[0]]


def mlp_parts(x, norm_weight, gate, up, down, eps=1e-5):
    """The MLP block in float64, with the scale of its rounding errors: (y, magnitude). y = x +
    down(silu(gate(n)) * up(n)), n = rmsnorm(x) * norm_weight, the weights as nn.Linear stores them
    (gate(n) = n @ gate.T); up None: gate is [2 inter, hidden], the gate rows then the up rows.
    A kernel may round n, both projections and the activation to the dtype: each projection's
    error scales with its own sum of absolute products (|n| @ |gate|.T, as a GEMM's), carried into
    h = silu(g) * u by the derivatives (silu'(g) u and silu(g)), and h's into y by |down|."""
    n = rmsnorm(x, norm_weight, eps)
    gate = f64(gate)
    if up is None:
        gate, up = gate[: gate.shape[0] // 2], gate[gate.shape[0] // 2:]
    up, down = f64(up), f64(down)
    g, u = n @ gate.T, n @ up.T
    sigmoid = 1 / (1 + np.exp(-g))
    h = g * sigmoid * u
    y = f64(x) + h @ down.T
    scale_g, scale_u = np.abs(n) @ np.abs(gate).T, np.abs(n) @ np.abs(up).T
    silu_slope = sigmoid * (1 + g * (1 - sigmoid))
    scale_h = np.abs(h) + np.abs(silu_slope * u) * scale_g + np.abs(g * sigmoid) * scale_u
    return y, np.abs(f64(x)) + scale_h @ np.abs(down).T


def mlp(x, norm_weight, gate, up, down, eps=1e-5):
    return mlp_parts(x, norm_weight, gate, up, down, eps)[0]


def assert_mlp_close(got, x, norm_weight, gate, up, down, dtype, eps=1e-5):
    """`got` against mlp(...): sums over hidden then inter terms, on the magnitude of mlp_parts."""
    want, magnitude = mlp_parts(x, norm_weight, gate, up, down, eps)
    inter = f64(down).shape[1]
    assert_close(got, want, dtype, f64(x).shape[-1] + inter, magnitude)


def qkv_operands(rng, rows_shape, hidden, heads, kv_heads, dim, dtype, max_position=8192):
    """qkv's inputs: x [*rows_shape, hidden], norm_weight, the fused weight [(heads + 2 kv_heads) *
    dim, hidden] and int32 positions in [0, max_position), scaled so that the projection stays
    near 1 (f16's range holds it)."""
    x = random(rng, (*rows_shape, hidden), dtype)
    norm_weight = (1 + random(rng, (hidden,), np.float64, scale=0.2)).astype(dtype)
    weight = random(rng, ((heads + 2 * kv_heads) * dim, hidden), dtype, scale=hidden**-0.5)
    positions = rng.integers(0, max_position, rows_shape, dtype=np.int32)
    return x, norm_weight, weight, positions


def qkv_parts(x, norm_weight, weight, positions, heads, kv_heads, theta=500000.0, layout="half", eps=1e-5):
    """The attention block's input in float64, with the scale of its rounding errors: (y,
    magnitude, slack). y [..., heads + 2 kv_heads, dim] is p = n @ weight.T, n = rmsnorm(x) *
    norm_weight, with rope (positions, theta, layout) on its q and k heads (the first heads +
    kv_heads) and its v heads as projected. A kernel may round n and p to the dtype: p's error
    scales with its sum of absolute products (|n| @ |weight|.T, as a GEMM's), and a turned
    element carries both of its pair's. slack: a kernel's f32 angles, as assert_rope_close's."""
    n = rmsnorm(x, norm_weight, eps)
    w = f64(weight)
    total = heads + 2 * kv_heads
    dim = w.shape[0] // total
    shape = n.shape[:-1] + (total, dim)
    p = (n @ w.T).reshape(shape)
    scale = (np.abs(n) @ np.abs(w).T).reshape(shape)
    turned = slice(0, heads + kv_heads)
    first, second = rope_pairs(layout, dim)
    y, magnitude, slack = p.copy(), scale.copy(), np.zeros(shape)
    y[..., turned, :] = rope(p[..., turned, :], positions, theta, layout)
    pair_scale = scale[..., turned, first] + scale[..., turned, second]
    magnitude[..., turned, first] = magnitude[..., turned, second] = pair_scale
    pair = np.abs(p[..., turned, first]) + np.abs(p[..., turned, second])
    slack[..., turned, first] = slack[..., turned, second] = 8 * 2.0**-24 * rope_angles(positions, dim, theta) * pair
    return y, magnitude, slack


def qkv(x, norm_weight, weight, positions, heads, kv_heads, theta=500000.0, layout="half", eps=1e-5):
    return qkv_parts(x, norm_weight, weight, positions, heads, kv_heads, theta, layout, eps)[0]


def assert_qkv_close(got, x, norm_weight, weight, positions, heads, kv_heads, dtype, theta=500000.0, layout="half",
                     eps=1e-5):
    """`got` against qkv(...): sums over hidden terms, on the magnitude of qkv_parts."""
    want, magnitude, slack = qkv_parts(x, norm_weight, weight, positions, heads, kv_heads, theta, layout, eps)
    assert tuple(np.shape(got)) == want.shape, (np.shape(got), want.shape)
    assert_close(got, want, dtype, f64(x).shape[-1], magnitude, slack=slack)
