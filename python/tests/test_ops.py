"""Every op against NumPy in float64, over shapes, strides, transposes, epilogues and dtypes."""

import itertools

import numpy as np
import pytest

import arbiter
import reference as ref

SHAPES = [(1, 1, 1), (3, 5, 7), (16, 32, 8), (64, 64, 64), (17, 33, 65), (128, 96, 200)]


def stored(rng, shape, dtype, transposed):
    """A logical [r, c] matrix, held either row-major or as the transpose view of a [c, r] array."""
    if transposed:
        return ref.random(rng, shape[::-1], dtype).T
    return ref.random(rng, shape, dtype)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("ta,tb", list(itertools.product([False, True], repeat=2)))
def test_gemm_shapes_transposes_dtypes(ctx, rng, dtype, m, n, k, ta, tb):
    a = stored(rng, (m, k), dtype, ta)
    b = stored(rng, (k, n), dtype, tb)
    d = ctx.gemm(a, b)
    assert type(d) is np.ndarray and d.shape == (m, n) and d.dtype == np.dtype(dtype)
    ref.assert_close(d, ref.gemm(a, b), dtype, k, ref.f64(np.abs(ref.f64(a)) @ np.abs(ref.f64(b))))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("act", list(ref.ACTIVATIONS))
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("with_c", [False, True])
def test_gemm_epilogues(ctx, rng, dtype, act, with_bias, with_c):
    m, n, k = 24, 40, 56
    a, b = ref.random(rng, (m, k), dtype), ref.random(rng, (k, n), dtype)
    bias = ref.random(rng, (n,), dtype) if with_bias else None
    c = ref.random(rng, (m, n), dtype) if with_c else None
    alpha, beta = 0.75, (0.5 if with_c else 0.0)
    d = ctx.gemm(a, b, bias=bias, c=c, alpha=alpha, beta=beta, act=act)
    magnitude = alpha * (np.abs(ref.f64(a)) @ np.abs(ref.f64(b)))
    if with_c:
        magnitude += beta * np.abs(ref.f64(c))
    if with_bias:
        magnitude += np.abs(ref.f64(bias))
    ref.assert_close(d, ref.gemm(a, b, bias, c, alpha, beta, act), dtype, k, magnitude)


def test_gemm_into_out_and_in_place_c(ctx, rng):
    a, b = ref.random(rng, (8, 16), np.float32), ref.random(rng, (16, 4), np.float32)
    out = np.full((8, 4), np.nan, np.float32)
    assert ctx.gemm(a, b, out=out) is out
    ref.assert_close(out, ref.gemm(a, b), np.float32, 16, np.abs(a) @ np.abs(b))
    c = ref.random(rng, (8, 4), np.float32)
    want = ref.gemm(a, b, c=c, beta=1.0)
    assert ctx.gemm(a, b, c=c, beta=1.0, out=c) is c  # C = D exactly: documented in-place case
    ref.assert_close(c, want, np.float32, 16, np.abs(a) @ np.abs(b) + np.abs(want))


def test_gemm_strided_views_are_copied_and_padded_rows_are_not(ctx, rng):
    big = ref.random(rng, (32, 64), np.float32)
    a = big[::2, ::3]  # no unit stride in either dimension: copied by the Python layer
    b = ref.random(rng, (a.shape[1], 8), np.float32)
    ref.assert_close(ctx.gemm(a, b), ref.gemm(a, b), np.float32, a.shape[1], np.abs(a) @ np.abs(b))
    padded = big[:, :20]  # a padded row stride: passed as is
    b2 = ref.random(rng, (20, 8), np.float32)
    ref.assert_close(ctx.gemm(padded, b2), ref.gemm(padded, b2), np.float32, 20, np.abs(padded) @ np.abs(b2))
    reversed_rows = big[::-1, :16]  # a negative stride: copied
    b3 = ref.random(rng, (16, 8), np.float32)
    ref.assert_close(ctx.gemm(reversed_rows, b3), ref.gemm(reversed_rows, b3), np.float32, 16,
                     np.abs(reversed_rows) @ np.abs(b3))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (1, 8), (4, 64), (3, 5, 32), (7, 4096), (2, 3, 4, 48)])
@pytest.mark.parametrize("with_residual", [False, True])
def test_rmsnorm(ctx, rng, dtype, shape, with_residual):
    x = ref.random(rng, shape, dtype)
    weight = ref.random(rng, shape[-1:], dtype)
    residual = ref.random(rng, shape, dtype) if with_residual else None
    x_before = x.copy()
    want = ref.rmsnorm(x, weight, 1e-5, residual)
    y = ctx.rmsnorm(x, weight, eps=1e-5, residual=residual)
    assert y.shape == shape and y.dtype == np.dtype(dtype)
    ref.assert_close(y, want, dtype, shape[-1], np.abs(want) + 1e-3)
    if with_residual:  # x += residual, in place, rounded to the dtype
        ref.assert_close(x, ref.f64(x_before) + ref.f64(residual), dtype, 1,
                         np.abs(ref.f64(x_before)) + np.abs(ref.f64(residual)))
    else:
        assert np.array_equal(x.view(np.uint8), x_before.view(np.uint8))


def test_rmsnorm_padded_rows_and_strided_copy(ctx, rng):
    big = ref.random(rng, (6, 80), np.float32)
    x = big[:, :64]  # padded rows: no copy
    weight = ref.random(rng, (64,), np.float32)
    ref.assert_close(ctx.rmsnorm(x, weight), ref.rmsnorm(x, weight, 1e-6), np.float32, 64, 1.0)
    xs = big[:, ::2]  # non-unit last stride: copied
    w2 = ref.random(rng, (40,), np.float32)
    ref.assert_close(ctx.rmsnorm(xs, w2), ref.rmsnorm(xs, w2, 1e-6), np.float32, 40, 1.0)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (8, 128), (3, 5, 33), (2, 32000)])
def test_softmax(ctx, rng, dtype, shape):
    x = ref.random(rng, shape, dtype, scale=4.0)
    y = ctx.softmax(x)
    assert y.shape == shape and y.dtype == np.dtype(dtype)
    want = ref.softmax(x)
    ref.assert_close(y, want, dtype, shape[-1], want)
    out = np.empty_like(x)
    assert ctx.softmax(x[..., :], out=out) is out


def test_softmax_transposed_input_is_copied(ctx, rng):
    x = ref.random(rng, (64, 16), np.float32).T
    ref.assert_close(ctx.softmax(x), ref.softmax(x), np.float32, 64, ref.softmax(x))


SWIGLU_SHAPES = [(1, 1), (1, 7), (4, 64), (3, 5, 33), (2, 3, 4, 17), (5, 100), (2, 1000), (3, 4099)]


def swiglu_close(y, gate, up, dtype):
    """y against the float64 reference: one product per element (terms=1), error relative to it."""
    want = ref.swiglu(gate, up)
    ref.assert_close(y, want, dtype, 1, np.abs(want))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SWIGLU_SHAPES)
def test_swiglu(ctx, rng, dtype, shape):
    gate, up = ref.random(rng, shape, dtype, scale=3.0), ref.random(rng, shape, dtype)
    gate_before, up_before = gate.copy(), up.copy()
    y = ctx.swiglu(gate, up)
    assert type(y) is np.ndarray and y.shape == shape and y.dtype == np.dtype(dtype)
    swiglu_close(y, gate, up, dtype)
    assert np.array_equal(gate.view(np.uint8), gate_before.view(np.uint8))
    assert np.array_equal(up.view(np.uint8), up_before.view(np.uint8))
    out = np.full(shape, np.nan, dtype)
    assert ctx.swiglu(gate, up, out=out) is out
    assert np.array_equal(out.view(np.uint8), y.view(np.uint8))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SWIGLU_SHAPES)
def test_swiglu_fused_gate_up(ctx, rng, dtype, shape):
    """up=None: gate is one [..., 2n] gate/up output; the same as its two halves given as views
    (the same problem, bit for bit), and as compact copies of them (close to the reference)."""
    n = shape[-1]
    fused = ref.random(rng, shape[:-1] + (2 * n,), dtype, scale=3.0)
    y = ctx.swiglu(fused)
    assert type(y) is np.ndarray and y.shape == shape and y.dtype == np.dtype(dtype)
    swiglu_close(y, fused, None, dtype)
    gate, up = fused[..., :n], fused[..., n:]
    assert np.array_equal(ctx.swiglu(gate, up).view(np.uint8), y.view(np.uint8))
    swiglu_close(ctx.swiglu(np.ascontiguousarray(gate), np.ascontiguousarray(up)), gate, up, dtype)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
def test_swiglu_wide_gates(ctx, rng, dtype):
    # Gates far from zero on both sides (silu's tails: e^-g large, and silu(g) = g), all in f32's range.
    gate = rng.uniform(-60, 60, (8, 257)).astype(dtype)
    up = ref.random(rng, (8, 257), dtype, scale=10.0)
    y = ctx.swiglu(gate, up)
    assert np.all(np.isfinite(ref.f64(y)))
    swiglu_close(y, gate, up, dtype)


def test_swiglu_padded_strided_and_transposed_views(ctx, rng):
    big = ref.random(rng, (6, 80), np.float32)
    big_up = ref.random(rng, (6, 80), np.float32)
    gate, up = big[:, :33], big_up[:, 40:73]  # padded rows, an offset: passed as they are
    swiglu_close(ctx.swiglu(gate, up), gate, up, np.float32)
    out_big = np.full((6, 48), np.nan, np.float32)
    out = out_big[:, 8:41]  # a padded output
    assert ctx.swiglu(gate, up, out=out) is out
    swiglu_close(out, gate, up, np.float32)
    assert np.all(np.isnan(out_big[:, :8])) and np.all(np.isnan(out_big[:, 41:]))  # nothing outside it written
    gs, us = big[:, ::2], big_up[:, 1::2]  # non-unit last strides: copied
    swiglu_close(ctx.swiglu(gs, us), gs, us, np.float32)
    gt = ref.random(rng, (40, 6), np.float32).T  # a transposed view: copied (rows must be contiguous)
    swiglu_close(ctx.swiglu(gt, us), gt, us, np.float32)
    # A fused gate with padded rows, N-d, and as a strided view (copied whole).
    fused_big = ref.random(rng, (2, 3, 50), np.float32)
    fused = fused_big[..., :42]
    swiglu_close(ctx.swiglu(fused), fused, None, np.float32)
    fused_strided = ref.random(rng, (4, 84), np.float32)[:, ::2]
    swiglu_close(ctx.swiglu(fused_strided), fused_strided, None, np.float32)


def test_swiglu_bfloat16_numpy_and_explain(ctx, rng):
    if ref.bfloat16 is None:
        pytest.skip("ml_dtypes is not installed")
    fused = ref.random(rng, (4, 2 * 96), ref.bfloat16)
    y = ctx.swiglu(fused)
    assert y.dtype == ref.bfloat16 and y.shape == (4, 96)
    swiglu_close(y, fused, None, ref.bfloat16)
    text = ctx.explain("swiglu", fused)
    assert "swiglu bf16 rows=4 cols=96" in text and "ldgate=192" in text and "ldup=192" in text, text
    assert "kernel:" in text


# rope: x [..., heads, head_dim] rotated in place; positions int32 of x's leading shape.
ROPE_SHAPES = [(1, 1, 2), (3, 5, 6), (5, 8, 64), (17, 4, 128), (2, 3, 4, 34), (4, 2, 1022)]


def positions_for(rng, shape, max_position=8192):
    """int32 positions for x of `shape`: one per token, over the whole range [0, max_position)."""
    return rng.integers(0, max_position, shape[:-2], dtype=np.int32)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", ROPE_SHAPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope(ctx, rng, dtype, shape, layout):
    x = ref.random(rng, shape, dtype)
    positions = positions_for(rng, shape)
    x_before, positions_before = x.copy(), positions.copy()
    assert ctx.rope(x, positions, layout=layout) is x  # in place
    assert x.shape == shape and x.dtype == np.dtype(dtype)
    ref.assert_rope_close(x, x_before, positions, 500000.0, layout, dtype)
    assert np.array_equal(positions, positions_before)
    # The same problem as a compact copy: the same bits.
    again = x_before.copy()
    ctx.rope(again, positions, 500000.0, 8192, layout)
    assert np.array_equal(again.view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_theta_max_position_and_position_zero(ctx, rng, layout):
    x = ref.random(rng, (6, 4, 16), np.float32)
    positions = np.array([0, 1, 2, 99, 100, 0], np.int32)
    before = x.copy()
    ctx.rope(x, positions, theta=10000.0, max_position=101, layout=layout)
    ref.assert_rope_close(x, before, positions, 10000.0, layout, np.float32)
    assert np.array_equal(x[0], before[0]) and np.array_equal(x[5], before[5])  # position 0: unturned
    # The two layouts pair different elements: they differ wherever a position is not 0.
    other = before.copy()
    ctx.rope(other, positions, theta=10000.0, max_position=101, layout="half" if layout == "interleaved" else "interleaved")
    assert not np.allclose(other[1:5], x[1:5])


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_fused_qkv_columns_in_place(ctx, rng, dtype, layout):
    """The Q and K columns of one fused QKV output [tokens, (heads + 2 kv_heads) * dim], viewed as
    [tokens, heads, dim] (a token stride of the whole row), rotate where they are; V is untouched."""
    tokens, heads, kv_heads, dim = 7, 4, 2, 64
    qkv = ref.random(rng, (tokens, (heads + 2 * kv_heads) * dim), dtype)
    before = qkv.copy()
    q = qkv[:, :heads * dim].reshape(tokens, heads, dim)
    k = qkv[:, heads * dim:(heads + kv_heads) * dim].reshape(tokens, kv_heads, dim)
    assert np.shares_memory(q, qkv) and np.shares_memory(k, qkv) and not q.flags.c_contiguous
    positions = positions_for(rng, q.shape)
    assert ctx.rope(q, positions, layout=layout) is q
    assert ctx.rope(k, positions, layout=layout) is k
    ref.assert_rope_close(q, before[:, :heads * dim].reshape(tokens, heads, dim), positions, 500000.0, layout, dtype)
    ref.assert_rope_close(k, before[:, heads * dim:(heads + kv_heads) * dim].reshape(tokens, kv_heads, dim), positions,
                          500000.0, layout, dtype)
    v = slice((heads + kv_heads) * dim, None)
    assert np.array_equal(qkv[:, v].view(np.uint8), before[:, v].view(np.uint8))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_head_strides_of_their_own(ctx, rng, layout):
    """Heads apart from each other: per-head [q, k, v] blocks (head stride 3 * dim) and padded
    heads (head stride dim + 6). The gaps between heads are left as they are."""
    tokens, heads, dim = 5, 3, 32
    per_head = ref.random(rng, (tokens, heads, 3, dim), np.float32)
    before = per_head.copy()
    q = per_head[:, :, 0, :]
    assert q.strides[1] == 3 * dim * 4
    positions = positions_for(rng, q.shape)
    ctx.rope(q, positions, layout=layout)
    ref.assert_rope_close(q, before[:, :, 0, :], positions, 500000.0, layout, np.float32)
    assert np.array_equal(per_head[:, :, 1:], before[:, :, 1:])
    padded = ref.random(rng, (2, tokens, heads, dim + 6), np.float16)  # N-d: [batch, seq, heads, dim]
    before = padded.copy()
    x = padded[..., :dim]
    positions = positions_for(rng, x.shape)
    ctx.rope(x, positions, layout=layout)
    ref.assert_rope_close(x, before[..., :dim], positions, 500000.0, layout, np.float16)
    assert np.array_equal(padded[..., dim:].view(np.uint8), before[..., dim:].view(np.uint8))


def test_rope_positions_views_are_copied_x_never(ctx, rng):
    x = ref.random(rng, (6, 2, 8), np.float32)
    before = x.copy()
    every_other = np.arange(12, dtype=np.int32)[::2]  # a strided view of positions: copied
    ctx.rope(x, every_other, max_position=12)
    ref.assert_rope_close(x, before, every_other, 500000.0, "half", np.float32)
    big = ref.random(rng, (6, 2, 16), np.float32)
    with pytest.raises(arbiter.InvalidArgumentError, match="last dimension must be contiguous"):
        ctx.rope(big[..., ::2], np.zeros(6, np.int32))  # x is rotated in place: never copied


def test_rope_bfloat16_numpy_and_explain(ctx, rng):
    if ref.bfloat16 is None:
        pytest.skip("ml_dtypes is not installed")
    x = ref.random(rng, (4, 8, 128), ref.bfloat16)
    positions = positions_for(rng, x.shape)
    before = x.copy()
    assert ctx.rope(x, positions, layout="interleaved") is x
    ref.assert_rope_close(x, before, positions, 500000.0, "interleaved", ref.bfloat16)
    rotated = x.copy()
    text = ctx.explain("rope", x, positions, layout="interleaved", theta=10000.0)
    assert "rope bf16 tokens=4 heads=8 dim=128 layout=interleaved theta=10000 maxpos=8192" in text, text
    assert "kernel:" in text
    assert np.array_equal(x.view(np.uint16), rotated.view(np.uint16))  # explain wrote nothing


def attention_close(out, q, k, v, causal, scale, dtype):
    want = ref.attention(q, k, v, causal, scale)
    # A convex combination of the values: errors relative to the largest value of each head.
    magnitude = np.broadcast_to(np.abs(ref.f64(v)).max(axis=(1, 3), keepdims=True).max(), want.shape)
    ref.assert_close(out, want, dtype, k.shape[1] * q.shape[-1], magnitude)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("b,sq,skv,h,hkv,d", [(1, 1, 1, 1, 1, 8), (1, 1, 300, 8, 2, 64), (2, 5, 67, 4, 1, 128),
                                             (1, 17, 17, 2, 2, 40)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention(ctx, rng, dtype, b, sq, skv, h, hkv, d, causal):
    q = ref.random(rng, (b, sq, h, d), dtype)
    k, v = ref.random(rng, (b, skv, hkv, d), dtype), ref.random(rng, (b, skv, hkv, d), dtype)
    out = ctx.attention(q, k, v, causal=causal)
    assert type(out) is np.ndarray and out.shape == q.shape and out.dtype == np.dtype(dtype)
    attention_close(out, q, k, v, causal, None, dtype)
    again = np.empty_like(q)
    assert ctx.attention(q, k, v, causal=causal, out=again) is again  # into out: the same bits
    assert np.array_equal(again.view(np.uint8), out.view(np.uint8))


def test_attention_bhsd_views_fused_qkv_and_scale(ctx, rng):
    """BHSD tensors passed as their [b, s, h, d] transpose views, and the Q, K and V columns of one
    fused QKV output [tokens, (heads + 2 kv_heads) * dim] viewed in place: read where they lie."""
    b, sq, skv, h, hkv, d = 2, 3, 20, 4, 2, 16
    q = ref.random(rng, (b, h, sq, d), np.float32).transpose(0, 2, 1, 3)
    k = ref.random(rng, (b, hkv, skv, d), np.float32).transpose(0, 2, 1, 3)
    v = ref.random(rng, (b, hkv, skv, d), np.float32).transpose(0, 2, 1, 3)
    assert not q.flags.c_contiguous
    attention_close(ctx.attention(q, k, v, causal=True, scale=0.3), q, k, v, True, 0.3, np.float32)
    tokens = 9
    qkv = ref.random(rng, (tokens, (h + 2 * hkv) * d), np.float32)
    fq = qkv[:, :h * d].reshape(1, tokens, h, d)
    fk = qkv[:, h * d:(h + hkv) * d].reshape(1, tokens, hkv, d)
    fv = qkv[:, (h + hkv) * d:].reshape(1, tokens, hkv, d)
    assert not fq.flags.c_contiguous and fq.base is not None and fk.base is not None
    attention_close(ctx.attention(fq, fk, fv, causal=True), fq, fk, fv, True, None, np.float32)


def test_attention_refusals(ctx, rng):
    q = ref.random(rng, (1, 2, 6, 8), np.float32)
    k = ref.random(rng, (1, 4, 4, 8), np.float32)
    with pytest.raises(arbiter.InvalidArgumentError, match="heads = 6 is not a multiple of kv_heads = 4"):
        ctx.attention(q, k, k)
    with pytest.raises(arbiter.InvalidArgumentError, match="kv_len = 1 below q_len = 2"):
        ctx.attention(q[:, :, :4], k[:, :1], k[:, :1], causal=True)
    with pytest.raises(arbiter.InvalidArgumentError, match="o overlaps"):
        ctx.attention(q[:, :, :4], k[:, :2], k[:, :2], out=k[:, :2])


# mlp: y = x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * norm_weight; the weights as nn.Linear
# stores them (gate and up [inter, hidden], down [hidden, inter]).
def mlp_operands(rng, rows_shape, hidden, inter, dtype):
    """x [*rows_shape, hidden], norm_weight, gate, up and down, scaled so that the projections and
    y stay near 1 (f16's range holds them)."""
    x = ref.random(rng, (*rows_shape, hidden), dtype)
    norm_weight = (1 + ref.random(rng, (hidden,), np.float64, scale=0.2)).astype(dtype)
    gate = ref.random(rng, (inter, hidden), dtype, scale=hidden**-0.5)
    up = ref.random(rng, (inter, hidden), dtype, scale=hidden**-0.5)
    down = ref.random(rng, (hidden, inter), dtype, scale=inter**-0.5)
    return x, norm_weight, gate, up, down


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("rows_shape,hidden,inter", [((1,), 64, 128), ((4,), 64, 176), ((2, 3), 32, 48), ((3,), 7, 5)])
def test_mlp(ctx, rng, dtype, rows_shape, hidden, inter):
    x, norm_weight, gate, up, down = mlp_operands(rng, rows_shape, hidden, inter, dtype)
    inputs_before = [t.copy() for t in (x, norm_weight, gate, up, down)]
    y = ctx.mlp(x, norm_weight, gate, up, down)
    assert type(y) is np.ndarray and y.shape == x.shape and y.dtype == np.dtype(dtype)
    ref.assert_mlp_close(y, x, norm_weight, gate, up, down, dtype)
    for t, before in zip((x, norm_weight, gate, up, down), inputs_before):
        assert np.array_equal(t.view(np.uint8), before.view(np.uint8))  # inputs are only read
    out = np.full(x.shape, np.nan, dtype)
    assert ctx.mlp(x, norm_weight, gate, up, down, out=out) is out  # into out: the same bits
    assert np.array_equal(out.view(np.uint8), y.view(np.uint8))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("rows,hidden,inter", [(1, 64, 128), (4, 64, 176)])
def test_mlp_fused_gate_up(ctx, rng, dtype, rows, hidden, inter):
    """up=None: gate is one [2 inter, hidden] gate/up weight (gate rows, then up rows); the same
    problem as its two halves given as views (bit for bit), and close to the reference."""
    x, norm_weight, gate, up, down = mlp_operands(rng, (rows,), hidden, inter, dtype)
    gate_up = ref.fused_gate_up(gate, up)
    y = ctx.mlp(x, norm_weight, gate_up, down=down)
    assert type(y) is np.ndarray and y.shape == x.shape and y.dtype == np.dtype(dtype)
    ref.assert_mlp_close(y, x, norm_weight, gate_up, None, down, dtype)
    halves = ctx.mlp(x, norm_weight, gate_up[:inter], gate_up[inter:], down)
    assert np.array_equal(halves.view(np.uint8), y.view(np.uint8))
    ref.assert_mlp_close(ctx.mlp(x, norm_weight, gate, up, down, eps=1e-3), x, norm_weight, gate, up, down, dtype, 1e-3)


def test_mlp_padded_strided_and_transposed_views(ctx, rng):
    rows, hidden, inter = 3, 64, 128
    x, norm_weight, gate, up, down = mlp_operands(rng, (rows,), hidden, inter, np.float32)
    # Padded rows (weights sliced out of wider storage, x and out inside wider rows): read and
    # written where they lie.
    gate_big = np.concatenate([gate, ref.random(rng, (inter, 16), np.float32)], axis=1)
    down_big = np.concatenate([down, ref.random(rng, (hidden, 8), np.float32)], axis=1)
    x_big = np.concatenate([x, ref.random(rng, (rows, 5), np.float32)], axis=1)
    out_big = np.full((rows, hidden + 3), np.nan, np.float32)
    out = out_big[:, :hidden]
    assert ctx.mlp(x_big[:, :hidden], norm_weight, gate_big[:, :hidden], up, down_big[:, :inter], out=out) is out
    ref.assert_mlp_close(out, x, norm_weight, gate, up, down, np.float32)
    assert np.all(np.isnan(out_big[:, hidden:]))  # nothing outside out written
    text = ctx.explain("mlp", x_big[:, :hidden], norm_weight, gate_big[:, :hidden], up, down_big[:, :inter], out=out)
    assert "ldx=69 ldy=67 ldgate=80 ldup=64 lddown=136" in text, text  # no copies: the views' own row strides
    # A fused gate/up weight with padded rows.
    gate_up_big = ref.fused_gate_up(*(np.concatenate([w, ref.random(rng, (inter, 4), np.float32)], axis=1)
                                      for w in (gate, up)))
    ref.assert_mlp_close(ctx.mlp(x, norm_weight, gate_up_big[:, :hidden], down=down), x, norm_weight, gate, up, down,
                         np.float32)
    # Transposed weights (a [hidden, inter] array's .T) and non-unit last strides: copied.
    gate_t = np.ascontiguousarray(gate.T).T
    down_strided = np.repeat(down, 2, axis=1)[:, ::2]
    x_strided = np.repeat(x, 2, axis=1)[:, ::2]
    weight_strided = np.repeat(norm_weight, 2)[::2]
    assert not gate_t.flags.c_contiguous and not down_strided.flags.c_contiguous
    y = ctx.mlp(x_strided, weight_strided, gate_t, up.T.copy().T, down_strided)
    ref.assert_mlp_close(y, x, norm_weight, gate, up, down, np.float32)


def test_mlp_bfloat16_numpy_and_explain(ctx, rng):
    if ref.bfloat16 is None:
        pytest.skip("ml_dtypes is not installed")
    x, norm_weight, gate, up, down = mlp_operands(rng, (2,), 64, 128, ref.bfloat16)
    y = ctx.mlp(x, norm_weight, ref.fused_gate_up(gate, up), down=down)
    assert y.dtype == ref.bfloat16 and y.shape == (2, 64)
    ref.assert_mlp_close(y, x, norm_weight, gate, up, down, ref.bfloat16)
    text = ctx.explain("mlp", x, norm_weight, gate, up, down, eps=1e-6)
    assert "mlp bf16 rows=2 hidden=64 inter=128 ldx=64 ldy=64 ldgate=64 ldup=64 lddown=128" in text, text
    assert "kernel:" in text and ("cpu.mlp_fused" in text or "chain.mlp" in text), text
    assert "chain.mlp" in text  # considered, if not chosen: the fused kernels race the chain


@pytest.mark.parametrize("kernel", ["cpu.mlp_fused", "chain.mlp", "reference.mlp"])
def test_mlp_each_cpu_kernel(rng, kernel):
    """Every CPU kernel of the op, pinned by a dispatch override: the fused kernel, the chain of
    single-op calls (one gate/up GEMM for a fused weight, two otherwise) and the fp64 reference."""
    config = f'[[dispatch.override]]\nop = "mlp"\nkernel = "{kernel}"\n'
    with arbiter.Context(config) as pinned:
        for dtype in (np.float32, np.float16):
            x, norm_weight, gate, up, down = mlp_operands(rng, (3,), 64, 176, dtype)
            gate_up = ref.fused_gate_up(gate, up)
            assert f"kernel:  {kernel} " in pinned.explain("mlp", x, norm_weight, gate_up, down=down)
            ref.assert_mlp_close(pinned.mlp(x, norm_weight, gate, up, down), x, norm_weight, gate, up, down, dtype)
            ref.assert_mlp_close(pinned.mlp(x, norm_weight, gate_up, down=down), x, norm_weight, gate, up, down, dtype)


# qkv: y = rope(n @ weight.T) on its q and k heads, n = rmsnorm(x) * norm_weight; weight the fused
# QKV projection [(heads + 2 kv_heads) * dim, hidden] as nn.Linear stores it; y [..., heads + 2
# kv_heads, dim] with the heads side by side; positions int32 of x's leading shape.
# (rows_shape, hidden, heads, kv_heads, head_dim): a decode step, GQA groups, N-d rows, the smallest heads, MHA.
QKV_SHAPES = [((1,), 64, 4, 2, 16), ((5,), 96, 8, 2, 32), ((2, 3), 32, 2, 2, 8), ((3,), 7, 1, 1, 2),
              ((4,), 128, 4, 4, 64)]


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("rows_shape,hidden,heads,kv_heads,dim", QKV_SHAPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_qkv(ctx, rng, dtype, rows_shape, hidden, heads, kv_heads, dim, layout):
    x, norm_weight, weight, positions = ref.qkv_operands(rng, rows_shape, hidden, heads, kv_heads, dim, dtype)
    inputs_before = [t.copy() for t in (x, norm_weight, weight, positions)]
    y = ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads, layout=layout)
    assert type(y) is np.ndarray and y.shape == (*rows_shape, heads + 2 * kv_heads, dim) and y.dtype == np.dtype(dtype)
    assert y.flags.c_contiguous
    ref.assert_qkv_close(y, x, norm_weight, weight, positions, heads, kv_heads, dtype, layout=layout)
    for t, before in zip((x, norm_weight, weight, positions), inputs_before):
        assert np.array_equal(t.view(np.uint8), before.view(np.uint8))  # inputs are only read
    out = np.full(y.shape, np.nan, dtype)
    assert ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads, layout=layout, out=out) is out  # the same bits
    assert np.array_equal(out.view(np.uint8), y.view(np.uint8))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_qkv_theta_max_position_eps_and_position_zero(ctx, rng, layout):
    heads, kv_heads, dim, hidden = 4, 2, 16, 48
    x, norm_weight, weight, _ = ref.qkv_operands(rng, (6,), hidden, heads, kv_heads, dim, np.float32)
    positions = np.array([0, 1, 2, 99, 100, 0], np.int32)
    y = ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads, theta=10000.0, max_position=101, layout=layout,
                eps=1e-3)
    ref.assert_qkv_close(y, x, norm_weight, weight, positions, heads, kv_heads, np.float32, 10000.0, layout, 1e-3)
    # Position 0 turns nothing: those rows are the plain projection, as are every row's v heads.
    projection = ref.rmsnorm(x, norm_weight, 1e-3) @ ref.f64(weight).T
    plain = projection.reshape(6, heads + 2 * kv_heads, dim)
    ref.assert_close(y[[0, 5]], plain[[0, 5]], np.float32, hidden, np.abs(plain[[0, 5]]) + 1)
    v = slice(heads + kv_heads, None)
    ref.assert_close(y[:, v], plain[:, v], np.float32, hidden, np.abs(plain[:, v]) + 1)
    # The two layouts pair different elements: they differ wherever a position is not 0.
    other = ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads, theta=10000.0, max_position=101, eps=1e-3,
                    layout="half" if layout == "interleaved" else "interleaved")
    assert not np.allclose(other[1:5, :heads + kv_heads], y[1:5, :heads + kv_heads])
    assert np.array_equal(other[:, v], y[:, v])


def test_qkv_views_feed_attention(ctx, rng):
    """q, k and v are views of the result (heads side by side): attention reads them where they lie."""
    tokens, hidden, heads, kv_heads, dim = 9, 64, 4, 2, 16
    x, norm_weight, weight, _ = ref.qkv_operands(rng, (1, tokens), hidden, heads, kv_heads, dim, np.float32)
    positions = np.arange(tokens, dtype=np.int32)[None]
    y = ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads)
    assert y.shape == (1, tokens, heads + 2 * kv_heads, dim)
    q, k, v = y[:, :, :heads], y[:, :, heads:heads + kv_heads], y[:, :, heads + kv_heads:]
    assert np.shares_memory(q, y) and np.shares_memory(k, y) and np.shares_memory(v, y)
    o = ctx.attention(q, k, v, causal=True)
    attention_close(o, q, k, v, True, None, np.float32)


def test_qkv_padded_strided_and_transposed_views(ctx, rng):
    rows, hidden, heads, kv_heads, dim = 3, 64, 4, 2, 16
    total = heads + 2 * kv_heads
    x, norm_weight, weight, positions = ref.qkv_operands(rng, (rows,), hidden, heads, kv_heads, dim, np.float32)
    # Padded rows (the weight sliced out of wider storage, x inside wider rows, out with spare
    # heads after each row's): read and written where they lie.
    weight_big = np.concatenate([weight, ref.random(rng, (total * dim, 16), np.float32)], axis=1)
    x_big = np.concatenate([x, ref.random(rng, (rows, 5), np.float32)], axis=1)
    out_big = np.full((rows, total + 1, dim), np.nan, np.float32)
    out = out_big[:, :total]
    assert ctx.qkv(x_big[:, :hidden], norm_weight, weight_big[:, :hidden], positions, heads, kv_heads, out=out) is out
    ref.assert_qkv_close(out, x, norm_weight, weight, positions, heads, kv_heads, np.float32)
    assert np.all(np.isnan(out_big[:, total:]))  # nothing outside out written
    text = ctx.explain("qkv", x_big[:, :hidden], norm_weight, weight_big[:, :hidden], positions, heads, kv_heads,
                       out=out)
    assert f"ldx=69 ldw=80 ldy={(total + 1) * dim}" in text, text  # no copies: the views' own row strides
    # A transposed weight (a [hidden, n] array's .T), non-unit last strides and strided positions: copied.
    weight_t = np.ascontiguousarray(weight.T).T
    x_strided = np.repeat(x, 2, axis=1)[:, ::2]
    norm_strided = np.repeat(norm_weight, 2)[::2]
    positions_strided = np.repeat(positions, 2)[::2]
    assert not weight_t.flags.c_contiguous and not x_strided.flags.c_contiguous
    y = ctx.qkv(x_strided, norm_strided, weight_t, positions_strided, heads, kv_heads)
    ref.assert_qkv_close(y, x, norm_weight, weight, positions, heads, kv_heads, np.float32)
    # out is never copied: heads apart from each other are refused.
    apart = np.empty((rows, total, dim + 2), np.float32)[..., :dim]
    with pytest.raises(arbiter.InvalidArgumentError, match="heads must lie side by side"):
        ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads, out=apart)


def test_qkv_bfloat16_numpy_and_explain(ctx, rng):
    if ref.bfloat16 is None:
        pytest.skip("ml_dtypes is not installed")
    x, norm_weight, weight, positions = ref.qkv_operands(rng, (2,), 64, 4, 2, 16, ref.bfloat16)
    y = ctx.qkv(x, norm_weight, weight, positions, 4, 2, layout="interleaved")
    assert y.dtype == ref.bfloat16 and y.shape == (2, 8, 16)
    ref.assert_qkv_close(y, x, norm_weight, weight, positions, 4, 2, ref.bfloat16, layout="interleaved")
    text = ctx.explain("qkv", x, norm_weight, weight, positions, 4, 2, layout="interleaved", theta=10000.0)
    assert ("qkv bf16 rows=2 hidden=64 heads=4 kvheads=2 dim=16 layout=interleaved theta=10000 maxpos=8192 "
            "ldx=64 ldw=64 ldy=128") in text, text
    assert "kernel:" in text and "chain.qkv" in text, text  # considered, if not chosen: kernels race the chain
    assert text == ctx.explain("qkv", x, norm_weight, weight, positions, heads=4, kv_heads=2, layout="interleaved",
                               theta=10000.0)


@pytest.mark.parametrize("kernel", ["cpu.qkv_fused", "chain.qkv", "reference.qkv"])
def test_qkv_each_cpu_kernel(ctx, rng, kernel):
    """Every CPU kernel of the op, pinned by a dispatch override: the fused kernel (where the cpu
    plugin has one), the chain of single-op calls and the fp64 reference."""
    if not any(k.name == kernel for p in ctx.plugins() if p.status == "loaded" for k in p.kernels):
        pytest.skip(f"{kernel} is not loaded")
    config = f'[[dispatch.override]]\nop = "qkv"\nkernel = "{kernel}"\n'
    with arbiter.Context(config) as pinned:
        for dtype in (np.float32, np.float16):
            for layout in ("half", "interleaved"):
                x, norm_weight, weight, positions = ref.qkv_operands(rng, (3,), 64, 4, 2, 32, dtype)
                assert f"kernel:  {kernel} " in pinned.explain("qkv", x, norm_weight, weight, positions, 4, 2)
                y = pinned.qkv(x, norm_weight, weight, positions, 4, 2, layout=layout)
                ref.assert_qkv_close(y, x, norm_weight, weight, positions, 4, 2, dtype, layout=layout)
