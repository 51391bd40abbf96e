"""Plans (Context.plan_gemm / plan_rmsnorm / plan_softmax / plan_swiglu / plan_rope / plan_attention /
plan_mlp / plan_qkv): numerics against float64 references over many runs of one plan on fresh
data, every refusal of a run that does not match the plan, threads running one plan, and the
lifetime rules (a plan keeps its context alive; closing either refuses later runs, never crashes)."""

import gc
import re
import threading
import time

import numpy as np
import pytest

import arbiter
import reference as ref
from concurrency import assert_releases_gil, run_in_threads

DTYPE_IDS = lambda d: np.dtype(d).name  # noqa: E731


def f32(*shape):
    return np.ones(shape, np.float32)


def gemm_magnitude(a, b, alpha=1.0, beta=0.0, c=None, bias=None):
    magnitude = abs(alpha) * (np.abs(ref.f64(a)) @ np.abs(ref.f64(b)))
    if c is not None and beta != 0:
        magnitude = magnitude + abs(beta) * np.abs(ref.f64(c))
    if bias is not None:
        magnitude = magnitude + np.abs(ref.f64(bias))
    return magnitude


# ---- numerics: each run of one plan on new data ------------------------------------------


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 5, 7), (16, 32, 8), (17, 33, 65), (64, 64, 64)])
@pytest.mark.parametrize("transposed_b", [False, True])
def test_gemm_plan_runs_on_fresh_data(ctx, rng, dtype, m, n, k, transposed_b):
    def operands():
        a = ref.random(rng, (m, k), dtype)
        b = ref.random(rng, (n, k), dtype).T if transposed_b else ref.random(rng, (k, n), dtype)
        return a, b

    a, b = operands()
    plan = ctx.plan_gemm(a, b)
    assert isinstance(plan, arbiter.Plan) and isinstance(plan, arbiter.GemmPlan)
    for _ in range(4):
        a, b = operands()
        d = plan.run(a, b)
        assert type(d) is np.ndarray and d.shape == (m, n) and d.dtype == np.dtype(dtype)
        ref.assert_close(d, ref.gemm(a, b), dtype, k, gemm_magnitude(a, b))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("act", ["none", "relu", "gelu_tanh", "silu"])
def test_gemm_plan_epilogue_and_scalars_are_the_plans(ctx, rng, dtype, act):
    m, n, k = 24, 40, 56
    alpha, beta = 0.75, 0.5
    args = lambda: (ref.random(rng, (m, k), dtype), ref.random(rng, (k, n), dtype),  # noqa: E731
                    ref.random(rng, (n,), dtype), ref.random(rng, (m, n), dtype))
    a, b, bias, c = args()
    out = np.empty((m, n), dtype)
    plan = ctx.plan_gemm(a, b, bias=bias, c=c, alpha=alpha, beta=beta, act=act, out=out)
    for _ in range(3):
        a, b, bias, c = args()
        assert plan.run(a, b, bias=bias, c=c, out=out) is out
        ref.assert_close(out, ref.gemm(a, b, bias, c, alpha, beta, act), dtype, k,
                         gemm_magnitude(a, b, alpha, beta, c, bias))


def test_gemm_plan_in_place_c_defaults_to_out(ctx, rng):
    a, b = ref.random(rng, (8, 16), np.float32), ref.random(rng, (16, 4), np.float32)
    acc = ref.random(rng, (8, 4), np.float32)
    plan = ctx.plan_gemm(a, b, c=acc, beta=1.0, out=acc)  # D = A.B + D
    for _ in range(3):
        a, b = ref.random(rng, (8, 16), np.float32), ref.random(rng, (16, 4), np.float32)
        want = ref.gemm(a, b, c=acc, beta=1.0)
        assert plan.run(a, b, out=acc) is acc
        ref.assert_close(acc, want, np.float32, 16, gemm_magnitude(a, b) + np.abs(want))
    other = np.zeros((8, 4), np.float32)
    with pytest.raises(arbiter.InvalidArgumentError, match="same address"):
        plan.run(a, b, c=other, out=acc)  # planned in place: c must be out


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1), (4, 64), (3, 5, 32), (7, 4096)])
@pytest.mark.parametrize("with_residual", [False, True])
def test_rmsnorm_plan_runs_on_fresh_data(ctx, rng, dtype, shape, with_residual):
    x, weight = ref.random(rng, shape, dtype), ref.random(rng, shape[-1:], dtype)
    residual = ref.random(rng, shape, dtype) if with_residual else None
    plan = ctx.plan_rmsnorm(x, weight, eps=1e-5, residual=residual)
    for _ in range(3):
        x, weight = ref.random(rng, shape, dtype), ref.random(rng, shape[-1:], dtype)
        residual = ref.random(rng, shape, dtype) if with_residual else None
        x_before = x.copy()
        want = ref.rmsnorm(x, weight, 1e-5, residual)
        y = plan.run(x, weight, residual=residual)
        assert y.shape == shape and y.dtype == np.dtype(dtype)
        ref.assert_close(y, want, dtype, shape[-1], np.abs(want) + 1e-3)
        if with_residual:  # x += residual, in place
            ref.assert_close(x, ref.f64(x_before) + ref.f64(residual), dtype, 1,
                             np.abs(ref.f64(x_before)) + np.abs(ref.f64(residual)))
        else:
            assert np.array_equal(x.view(np.uint8), x_before.view(np.uint8))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (8, 128), (3, 5, 33), (2, 32000)])
def test_softmax_plan_runs_on_fresh_data(ctx, rng, dtype, shape):
    plan = ctx.plan_softmax(ref.random(rng, shape, dtype))
    out = np.empty(shape, dtype)
    for i in range(3):
        x = ref.random(rng, shape, dtype, scale=4.0)
        y = plan.run(x, out=out if i % 2 else None)  # into out and allocated, alternately
        assert y.shape == shape and y.dtype == np.dtype(dtype) and (y is out) == bool(i % 2)
        want = ref.softmax(x)
        ref.assert_close(y, want, dtype, shape[-1], want)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
def test_attention_plan_runs_on_fresh_data(ctx, rng, dtype):
    """A decode step planned once: each run a new query and a new cache at new addresses."""
    q_shape, kv_shape = (2, 1, 8, 64), (2, 100, 2, 64)
    plan = ctx.plan_attention(ref.random(rng, q_shape, dtype), ref.random(rng, kv_shape, dtype),
                              ref.random(rng, kv_shape, dtype), causal=True, scale=0.2)
    assert plan.op == "attention"
    out = np.empty(q_shape, dtype)
    for i in range(3):
        q, k, v = ref.random(rng, q_shape, dtype), ref.random(rng, kv_shape, dtype), ref.random(rng, kv_shape, dtype)
        y = plan.run(q, k, v, out=out if i % 2 else None)
        assert y.shape == q_shape and (y is out) == bool(i % 2)
        want = ref.attention(q, k, v, True, 0.2)
        ref.assert_close(y, want, dtype, 100 * 64, np.abs(ref.f64(v)).max())
        assert np.array_equal(y.view(np.uint8), ctx.attention(q, k, v, causal=True, scale=0.2).view(np.uint8))


def mlp_operands(rng, rows, hidden, inter, dtype, fused):
    """x, norm_weight, gate, up, down of one MLP block, scaled so that the projections and y stay
    near 1 (f16's range holds them); fused: gate the [2 inter, hidden] gate/up weight, up None."""
    x = ref.random(rng, (rows, hidden), dtype)
    norm_weight = (1 + ref.random(rng, (hidden,), np.float64, scale=0.2)).astype(dtype)
    gate = ref.random(rng, (inter, hidden), dtype, scale=hidden**-0.5)
    up = ref.random(rng, (inter, hidden), dtype, scale=hidden**-0.5)
    down = ref.random(rng, (hidden, inter), dtype, scale=inter**-0.5)
    if fused:
        return x, norm_weight, ref.fused_gate_up(gate, up), None, down
    return x, norm_weight, gate, up, down


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("fused", [False, True])
def test_mlp_plan_runs_on_fresh_data(ctx, rng, dtype, fused):
    """The MLP block of a decode step planned once (application ABI 1.8: a run takes its six
    tensors): each run new activations and weights, the call's bits on the same tensors."""
    rows, hidden, inter = 2, 64, 176
    plan = ctx.plan_mlp(*mlp_operands(rng, rows, hidden, inter, dtype, fused))
    assert isinstance(plan, arbiter.MLPPlan) and plan.op == "mlp"
    assert re.match(r"plan: runs \S*mlp\S* ", plan.explain())
    out = np.empty((rows, hidden), dtype)
    for i in range(3):
        x, norm_weight, gate, up, down = mlp_operands(rng, rows, hidden, inter, dtype, fused)
        y = plan.run(x, norm_weight, gate, up, down=down, out=out if i % 2 else None)
        assert y.shape == x.shape and y.dtype == np.dtype(dtype) and (y is out) == bool(i % 2)
        ref.assert_mlp_close(y, x, norm_weight, gate, up, down, dtype)
        assert np.array_equal(y.view(np.uint8), ctx.mlp(x, norm_weight, gate, up, down=down).view(np.uint8))


def test_mlp_plan_refusals(ctx):
    x, norm_weight, gate, up, down = f32(2, 16), f32(16), f32(8, 16), f32(8, 16), f32(16, 8)
    plan = ctx.plan_mlp(x, norm_weight, gate, up, down)
    with pytest.raises(arbiter.InvalidArgumentError, match="made with up, and none was given"):
        plan.run(x, norm_weight, f32(16, 16), down=down)
    with pytest.raises(arbiter.InvalidArgumentError, match=r"down has shape \(16, 9\).*\(16, 8\)"):
        plan.run(x, norm_weight, gate, up, f32(16, 9))
    with pytest.raises(arbiter.DTypeError, match="up has dtype float16"):
        plan.run(x, norm_weight, gate, np.ones((8, 16), np.float16), down)
    for onto in (x, gate, up):  # out over an input: the library's check, before anything is written
        with pytest.raises(arbiter.InvalidArgumentError, match="overlaps"):
            plan.run(x, norm_weight, gate, up, down, out=onto[:2])
    with pytest.raises(arbiter.InvalidArgumentError, match="overlaps"):
        plan.run(x, norm_weight, gate, up, down, out=down.reshape(-1)[:32].reshape(2, 16))
    with pytest.raises(arbiter.InvalidArgumentError, match="down .* is required"):
        plan.run(x, norm_weight, gate, up)
    gate_up = f32(16, 16)
    fused = ctx.plan_mlp(x, norm_weight, gate_up, down=down)
    with pytest.raises(arbiter.InvalidArgumentError, match="up was given, but the plan was made with one fused"):
        fused.run(x, norm_weight, gate, up, down)
    with pytest.raises(arbiter.InvalidArgumentError, match=r"gate has shape \(8, 16\).*\(16, 16\)"):
        fused.run(x, norm_weight, gate, down=down)
    with pytest.raises(arbiter.InvalidArgumentError, match=r"tensors\[5\] \(y\) overlaps tensors\[2\] \(gate\)"):
        fused.run(x, norm_weight, gate_up, down=down, out=gate_up[8:10])  # out over up's rows
    for t in (x, norm_weight, gate, up, down, gate_up):
        assert np.all(t == 1)


# qkv of a decode step: 4 q heads and 2 k/v heads of head_dim 16 over hidden 64.
QKV_HIDDEN, QKV_HEADS, QKV_KV_HEADS, QKV_DIM = 64, 4, 2, 16


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_qkv_plan_runs_on_fresh_data(ctx, rng, dtype, layout):
    """The attention block's input planned once (a run takes its five tensors): each run new
    activations, weights and positions, the call's bits on the same tensors; the head counts,
    theta, max_position, layout and eps are the plan's."""
    rows, heads, kv_heads = 2, QKV_HEADS, QKV_KV_HEADS
    scalars = dict(theta=10000.0, max_position=4096, layout=layout, eps=1e-3)

    def operands():
        return ref.qkv_operands(rng, (rows,), QKV_HIDDEN, heads, kv_heads, QKV_DIM, dtype, max_position=4096)

    plan = ctx.plan_qkv(*operands(), heads, kv_heads, **scalars)
    assert isinstance(plan, arbiter.Plan) and isinstance(plan, arbiter.QKVPlan) and plan.op == "qkv"
    text = plan.explain()
    assert re.match(r"plan: runs \S*qkv\S* ", text), text
    problem = rf"qkv \S+ rows=2 hidden=64 heads=4 kvheads=2 dim=16 layout={layout} theta=10000 maxpos=4096"
    assert re.search(problem, text), text
    shape = (rows, heads + 2 * kv_heads, QKV_DIM)
    out = np.empty(shape, dtype)
    for i in range(3):
        x, norm_weight, weight, positions = operands()
        y = plan.run(x, norm_weight, weight, positions, out=out if i % 2 else None)
        assert y.shape == shape and y.dtype == np.dtype(dtype) and (y is out) == bool(i % 2)
        ref.assert_qkv_close(y, x, norm_weight, weight, positions, heads, kv_heads, dtype, 10000.0, layout, 1e-3)
        want = ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads, **scalars)
        assert np.array_equal(y.view(np.uint8), want.view(np.uint8))


def test_qkv_plan_of_views(ctx, rng):
    """Planned on a padded weight (read where it lies) and on N-d rows: runs take weights with the
    same padding; strided positions are copied at every run, as by the call."""
    heads, kv_heads, dim, hidden = QKV_HEADS, QKV_KV_HEADS, QKV_DIM, QKV_HIDDEN
    rows_shape = (2, 3)

    def padded(weight):
        return np.concatenate([weight, np.ones((weight.shape[0], 8), weight.dtype)], axis=1)[:, :hidden]

    x, norm_weight, weight, positions = ref.qkv_operands(rng, rows_shape, hidden, heads, kv_heads, dim, np.float32)
    plan = ctx.plan_qkv(x, norm_weight, padded(weight), positions, heads, kv_heads)
    assert "ldw=72" in plan.explain(), plan.explain()
    for _ in range(2):
        x, norm_weight, weight, positions = ref.qkv_operands(rng, rows_shape, hidden, heads, kv_heads, dim, np.float32)
        strided = np.repeat(positions, 2, axis=-1)[..., ::2]
        y = plan.run(x, norm_weight, padded(weight), strided)
        assert y.shape == (*rows_shape, heads + 2 * kv_heads, dim)
        ref.assert_qkv_close(y, x, norm_weight, weight, positions, heads, kv_heads, np.float32)
        want = ctx.qkv(x, norm_weight, weight, positions, heads, kv_heads)
        assert np.array_equal(y.view(np.uint8), want.view(np.uint8))
    with pytest.raises(arbiter.InvalidArgumentError, match=r"weight has strides \(64, 1\).*\(72, 1\)"):
        plan.run(x, norm_weight, weight, positions)  # compact: not the plan's


def test_qkv_plan_refusals(ctx):
    heads, kv_heads, dim, hidden = 4, 2, 8, 8  # out [2, 8, 8]: 128 elements
    x, norm_weight, weight, positions = f32(2, hidden), f32(hidden), f32(8 * dim, hidden), np.zeros(2, np.int32)
    plan = ctx.plan_qkv(x, norm_weight, weight, positions, heads, kv_heads, max_position=100)
    with pytest.raises(arbiter.InvalidArgumentError, match=r"x has shape \(3, 8\).*\(2, 8\)"):
        plan.run(f32(3, hidden), norm_weight, weight, np.zeros(3, np.int32))
    with pytest.raises(arbiter.InvalidArgumentError, match=r"weight has shape \(48, 8\).*\(64, 8\)"):
        plan.run(x, norm_weight, f32(48, hidden), positions)
    with pytest.raises(arbiter.InvalidArgumentError, match=r"out has shape"):
        plan.run(x, norm_weight, weight, positions, out=f32(2, 8, 4))
    with pytest.raises(arbiter.DTypeError, match="weight has dtype float16"):
        plan.run(x, norm_weight, np.ones((8 * dim, hidden), np.float16), positions)
    with pytest.raises(arbiter.DTypeError, match="positions has dtype int64"):
        plan.run(x, norm_weight, weight, np.zeros(2, np.int64))
    # CPU positions are checked against the plan's max_position, as the call checks them.
    with pytest.raises(arbiter.InvalidArgumentError, match=r"positions\[1\] = 100 is outside \[0, max_position = 100"):
        plan.run(x, norm_weight, weight, np.array([0, 100], np.int32))
    # out over an input: the library's check, before anything is written.
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        plan.run(x, norm_weight, weight, positions, out=weight.reshape(-1)[:128].reshape(2, 8, 8))
    buffer = f32(16 + 128)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        plan.run(buffer[:16].reshape(2, hidden), norm_weight, weight, positions, out=buffer[8:136].reshape(2, 8, 8))
    zeros = np.zeros(128, np.int32)  # read as positions: 0, in range
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        plan.run(x, norm_weight, weight, zeros[:2], out=zeros.view(np.float32).reshape(2, 8, 8))
    read_only = f32(2, 8, 8)
    read_only.flags.writeable = False
    with pytest.raises(arbiter.InvalidArgumentError, match="read-only"):
        plan.run(x, norm_weight, weight, positions, out=read_only)
    with pytest.raises(arbiter.InvalidArgumentError, match="qkv plan, run with mlp"):
        plan._p.mlp(x, norm_weight, weight, None, f32(8, 8), f32(2, 8), 0, 0)
    for t in (x, norm_weight, weight, buffer):
        assert np.all(t == 1)
    assert np.all(zeros == 0) and np.all(positions == 0)


def swiglu_close(y, gate, up, dtype):
    want = ref.swiglu(gate, up)
    ref.assert_close(y, want, dtype, 1, np.abs(want))


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1), (4, 64), (3, 5, 33), (2, 3, 4, 17), (3, 4099)])
@pytest.mark.parametrize("fused", [False, True])
def test_swiglu_plan_runs_on_fresh_data(ctx, rng, dtype, shape, fused):
    n = shape[-1]

    def operands():  # (gate, up): separate tensors, or one fused [..., 2n] gate and up None
        if fused:
            return ref.random(rng, shape[:-1] + (2 * n,), dtype, scale=3.0), None
        return ref.random(rng, shape, dtype, scale=3.0), ref.random(rng, shape, dtype)

    plan = ctx.plan_swiglu(*operands())
    assert isinstance(plan, arbiter.Plan) and isinstance(plan, arbiter.SwiGLUPlan) and plan.op == "swiglu"
    out = np.empty(shape, dtype)
    for i in range(3):
        gate, up = operands()
        y = plan.run(gate, up, out=out if i % 2 else None)  # into out and allocated, alternately
        assert y.shape == shape and y.dtype == np.dtype(dtype) and (y is out) == bool(i % 2)
        swiglu_close(y, gate, up, dtype)
        # The call on the same tensors runs the same problem: the same bits.
        assert np.array_equal(ctx.swiglu(gate, up).view(np.uint8), y.view(np.uint8))


def test_swiglu_plan_of_a_fused_gate_is_made_on_its_halves(ctx, rng):
    """The library plans gate and up as two tensors and refuses a fused one (up NULL) as
    unsupported; plan_swiglu(gate) plans its halves as views, the same problem as the call's."""
    fused = ref.random(rng, (4, 64), np.float32)
    with pytest.raises(arbiter.UnsupportedError, match="views"):
        ctx._c.plan_swiglu(fused, None, np.empty((4, 32), np.float32), 0)
    plan = ctx.plan_swiglu(fused)
    text = plan.explain()
    assert re.match(r"plan: runs \S*swiglu\S* ", text), text
    assert "swiglu f32 rows=4 cols=32 ldgate=64 ldup=64 ldy=32" in text, text
    assert "ldgate=64 ldup=64" in ctx.explain("swiglu", fused)
    # Padded fused rows and N-d tensors: the halves keep the whole's row stride.
    big = ref.random(rng, (2, 3, 80), np.float16)
    padded = ctx.plan_swiglu(big[..., :64])
    for _ in range(2):
        big = ref.random(rng, (2, 3, 80), np.float16)
        swiglu_close(padded.run(big[..., :64]), big[..., :64], None, np.float16)
    with pytest.raises(arbiter.InvalidArgumentError, match="strides"):
        padded.run(ref.random(rng, (2, 3, 64), np.float16))  # compact rows: not the plan's layout


def test_swiglu_plan_refusals(ctx, rng):
    gate, up = f32(4, 16), f32(4, 16)
    plan = ctx.plan_swiglu(gate, up)
    with pytest.raises(arbiter.InvalidArgumentError, match="made with up, and none was given"):
        plan.run(f32(4, 32))
    with pytest.raises(arbiter.InvalidArgumentError, match=r"up has shape \(4, 8\).*\(4, 16\)"):
        plan.run(gate, f32(4, 8))
    with pytest.raises(arbiter.InvalidArgumentError, match="out has shape"):
        plan.run(gate, up, out=f32(4, 8))
    with pytest.raises(arbiter.DTypeError, match="up has dtype float16"):
        plan.run(gate, np.ones((4, 16), np.float16))
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        plan.run(gate, up, out=up)
    fused = ctx.plan_swiglu(f32(4, 32))
    with pytest.raises(arbiter.InvalidArgumentError, match="up was given, but the plan was made with one fused"):
        fused.run(gate, up)
    with pytest.raises(arbiter.InvalidArgumentError, match=r"gate has shape \(4, 34\).*\(4, 32\)"):
        fused.run(f32(4, 34))
    with pytest.raises(arbiter.DTypeError, match="gate has dtype float16"):
        fused.run(np.ones((4, 32), np.float16))
    with pytest.raises(TypeError):
        fused.run("not an array")
    padded_out = ctx.plan_swiglu(f32(4, 32), out=f32(4, 32)[:, 16:])  # out rows of 16 in rows of 32
    padded_out.run(f32(4, 32), out=f32(4, 32)[:, 16:])
    whole = f32(4, 32)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        padded_out.run(whole, out=whole[:, 16:])  # out is the up half
    assert np.all(whole == 1) and np.all(gate == 1) and np.all(up == 1)


def rope_positions(rng, shape, max_position=8192):
    return rng.integers(0, max_position, shape[:-2], dtype=np.int32)


@pytest.mark.parametrize("dtype", ref.DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1, 2), (5, 8, 64), (2, 3, 4, 34)])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_plan_runs_on_fresh_data(ctx, rng, dtype, shape, layout):
    plan = ctx.plan_rope(ref.random(rng, shape, dtype), rope_positions(rng, shape, 4096), theta=10000.0, max_position=4096,
                         layout=layout)
    assert isinstance(plan, arbiter.Plan) and isinstance(plan, arbiter.RopePlan) and plan.op == "rope"
    for _ in range(3):
        x, positions = ref.random(rng, shape, dtype), rope_positions(rng, shape, 4096)
        before = x.copy()
        assert plan.run(x, positions) is x  # in place
        ref.assert_rope_close(x, before, positions, 10000.0, layout, dtype)
        # The call on the same tensors runs the same problem: the same bits.
        again = before.copy()
        ctx.rope(again, positions, theta=10000.0, max_position=4096, layout=layout)
        assert np.array_equal(again.view(np.uint8), x.view(np.uint8))


def test_rope_plan_of_fused_qkv_columns(ctx, rng):
    """Planned on the Q columns of a fused QKV output (token stride the whole row): runs take the
    Q columns of each new QKV output, and nothing else of it is written."""
    tokens, heads, kv_heads, dim = 6, 4, 2, 32
    width = (heads + 2 * kv_heads) * dim

    def q_of(qkv):
        return qkv[:, :heads * dim].reshape(tokens, heads, dim)

    plan = ctx.plan_rope(q_of(np.ones((tokens, width), np.float16)), np.zeros(tokens, np.int32), layout="interleaved")
    assert "ldhead=32 ldtoken=256" in plan.explain(), plan.explain()
    for _ in range(2):
        qkv = ref.random(rng, (tokens, width), np.float16)
        before = qkv.copy()
        positions = rope_positions(rng, (tokens, heads, dim))
        q = q_of(qkv)
        assert plan.run(q, positions) is q
        ref.assert_rope_close(q_of(qkv), q_of(before), positions, 500000.0, "interleaved", np.float16)
        assert np.array_equal(qkv[:, heads * dim:].view(np.uint8), before[:, heads * dim:].view(np.uint8))
    with pytest.raises(arbiter.InvalidArgumentError, match=r"x has strides \(128, 32, 1\).*\(256, 32, 1\)"):
        plan.run(ref.random(rng, (tokens, heads, dim), np.float16), np.zeros(tokens, np.int32))  # compact: not the plan's


def test_rope_plan_refusals(ctx, rng):
    plan = ctx.plan_rope(f32(4, 2, 8), np.zeros(4, np.int32), max_position=100)
    x = f32(4, 2, 8)
    with pytest.raises(arbiter.InvalidArgumentError, match=r"x has shape \(4, 2, 6\).*\(4, 2, 8\)"):
        plan.run(f32(4, 2, 6), np.zeros(4, np.int32))
    with pytest.raises(arbiter.InvalidArgumentError, match=r"positions has shape \(5,\).*\(4,\)"):
        plan.run(x, np.zeros(5, np.int32))
    with pytest.raises(arbiter.DTypeError, match="x has dtype float16"):
        plan.run(np.ones((4, 2, 8), np.float16), np.zeros(4, np.int32))
    with pytest.raises(arbiter.DTypeError, match="positions has dtype int64.*convert"):
        plan.run(x, np.zeros(4, np.int64))
    # A run's CPU positions are checked against the plan's max_position, as the call checks them.
    with pytest.raises(arbiter.InvalidArgumentError, match=r"positions\[2\] = 100 is outside \[0, max_position = 100\)"):
        plan.run(x, np.array([0, 99, 100, 1], np.int32))
    with pytest.raises(arbiter.InvalidArgumentError, match=r"positions\[0\] = -5 is outside"):
        plan.run(x, np.array([-5, 0, 0, 0], np.int32))
    zeros = np.zeros((4, 2, 8), np.float32)  # read as int32 positions: 0, in range
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        plan.run(zeros, zeros.reshape(-1).view(np.int32)[:4])
    assert np.all(x == 1) and np.all(zeros == 0)
    read_only = f32(4, 2, 8)
    read_only.flags.writeable = False
    with pytest.raises(arbiter.InvalidArgumentError, match="in place"):
        plan.run(read_only, np.zeros(4, np.int32))
    with pytest.raises(arbiter.InvalidArgumentError, match="in place"):
        ctx.plan_rope(read_only, np.zeros(4, np.int32))
    with pytest.raises(arbiter.InvalidArgumentError, match="rope plan, run with softmax"):
        plan._p.softmax(x, f32(4, 2, 8), 0, 0)
    with pytest.raises(TypeError):
        plan.run("not an array", np.zeros(4, np.int32))
    # Strided positions are copied, at creation and at every run, as by the call.
    every_other = np.arange(8, dtype=np.int32)[::2]
    before = ref.random(rng, (4, 2, 8), np.float32)
    x = before.copy()
    plan.run(x, every_other)
    ref.assert_rope_close(x, before, every_other, 500000.0, "half", np.float32)
    assert np.all(x[0] == before[0])


def test_one_plan_many_runs(ctx, rng):
    """A decode loop: hundreds of runs of one plan, each on new random data at new addresses,
    each checked (a plan that reused the first run's data or addresses would fail here)."""
    m, n, k = 4, 48, 32
    plan = ctx.plan_gemm(f32(m, k), f32(k, n), bias=f32(n), act="relu")
    softmax = ctx.plan_softmax(f32(m, n))
    for _ in range(300):
        a, b, bias = ref.random(rng, (m, k), np.float32), ref.random(rng, (k, n), np.float32), ref.random(rng, (n,), np.float32)
        d = plan.run(a, b, bias=bias)
        ref.assert_close(d, ref.gemm(a, b, bias, act="relu"), np.float32, k, gemm_magnitude(a, b, bias=bias))
        p = softmax.run(d)
        ref.assert_close(p, ref.softmax(d), np.float32, n, ref.softmax(d))


def test_views_plan_as_their_calls_take_them(ctx, rng):
    # A padded row stride is planned as it is; runs take the same padding.
    big = ref.random(rng, (6, 80), np.float32)
    weight = ref.random(rng, (64,), np.float32)
    plan = ctx.plan_rmsnorm(big[:, :64], weight)
    big2 = ref.random(rng, (6, 80), np.float32)
    ref.assert_close(plan.run(big2[:, :64], weight), ref.rmsnorm(big2[:, :64], weight, 1e-6), np.float32, 64, 1.0)
    # A view the ABI cannot take (non-unit last stride) is copied at creation and at every run, so
    # the plan is for the compact layout: strided and compact inputs both run.
    xs = big[:, ::2]
    w2 = ref.random(rng, (40,), np.float32)
    strided = ctx.plan_rmsnorm(xs, w2)
    for x in (big2[:, ::2], np.ascontiguousarray(big2[:, ::2])):
        ref.assert_close(strided.run(x, w2), ref.rmsnorm(x, w2, 1e-6), np.float32, 40, 1.0)


def test_jax_plan(ctx, rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed (tools/install-deps.sh installs it)")
    jnp = jax.numpy
    a, b = ref.random(rng, (9, 12), np.float32), ref.random(rng, (12, 4), np.float32)
    plan = ctx.plan_gemm(jnp.asarray(a), jnp.asarray(b))
    for _ in range(2):
        a, b = ref.random(rng, (9, 12), np.float32), ref.random(rng, (12, 4), np.float32)
        d = plan.run(jnp.asarray(a), jnp.asarray(b))
        assert isinstance(d, jax.Array)
        np.testing.assert_allclose(np.asarray(d), ref.gemm(a, b), rtol=1e-5, atol=1e-5)


def test_torch_cpu_plan(ctx, rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x = ref.random(rng, (5, 64), np.float32)
    plan = ctx.plan_softmax(torch.from_numpy(x))
    for _ in range(2):
        x = ref.random(rng, (5, 64), np.float32)
        y = plan.run(torch.from_numpy(x))
        assert isinstance(y, torch.Tensor)
        np.testing.assert_allclose(y.numpy(), ref.softmax(x), rtol=1e-5, atol=1e-6)


# ---- refusals: what the C plan cannot see is checked before it runs ---------------------


def test_creation_refuses_what_the_call_refuses(ctx):
    cases = [
        (lambda c: c.gemm(f32(4, 5), f32(4, 5)), lambda c: c.plan_gemm(f32(4, 5), f32(4, 5))),
        (lambda c: c.gemm(f32(4, 4), f32(4, 4), bias=f32(3)), lambda c: c.plan_gemm(f32(4, 4), f32(4, 4), bias=f32(3))),
        (lambda c: c.gemm(f32(4, 4), np.ones((4, 4), np.float64)),
         lambda c: c.plan_gemm(f32(4, 4), np.ones((4, 4), np.float64))),
        (lambda c: c.rmsnorm(f32(4, 8), f32(7)), lambda c: c.plan_rmsnorm(f32(4, 8), f32(7))),
        (lambda c: c.softmax(f32(4, 8), out=f32(4, 9)), lambda c: c.plan_softmax(f32(4, 8), out=f32(4, 9))),
        (lambda c: c.gemm(f32(4, 4), f32(4, 4), act="tanh"), lambda c: c.plan_gemm(f32(4, 4), f32(4, 4), act="tanh")),
        (lambda c: c.swiglu(f32(4, 8), f32(4, 9)), lambda c: c.plan_swiglu(f32(4, 8), f32(4, 9))),
        (lambda c: c.swiglu(f32(4, 9)), lambda c: c.plan_swiglu(f32(4, 9))),  # odd: not split, the library's error
        (lambda c: c.swiglu(f32(4, 8), out=f32(4, 8)), lambda c: c.plan_swiglu(f32(4, 8), out=f32(4, 8))),
        (lambda c: c.swiglu(f32(4, 8), np.ones((4, 8), np.float64)),
         lambda c: c.plan_swiglu(f32(4, 8), np.ones((4, 8), np.float64))),
        (lambda c: c.rope(f32(4, 2, 7), np.zeros(4, np.int32)), lambda c: c.plan_rope(f32(4, 2, 7), np.zeros(4, np.int32))),
        (lambda c: c.rope(f32(4, 2, 8), np.zeros(3, np.int32)), lambda c: c.plan_rope(f32(4, 2, 8), np.zeros(3, np.int32))),
        (lambda c: c.rope(f32(4, 2, 8), np.zeros(4, np.int64)), lambda c: c.plan_rope(f32(4, 2, 8), np.zeros(4, np.int64))),
        (lambda c: c.rope(f32(4, 2, 8), np.zeros(4, np.int32), theta=0.5),
         lambda c: c.plan_rope(f32(4, 2, 8), np.zeros(4, np.int32), theta=0.5)),
        (lambda c: c.rope(f32(4, 2, 8), np.zeros(4, np.int32), layout="both"),
         lambda c: c.plan_rope(f32(4, 2, 8), np.zeros(4, np.int32), layout="both")),
        (lambda c: c.mlp(f32(2, 16), f32(16), f32(8, 16), f32(8, 16), f32(8, 16)),
         lambda c: c.plan_mlp(f32(2, 16), f32(16), f32(8, 16), f32(8, 16), f32(8, 16))),
        (lambda c: c.mlp(f32(2, 16), f32(16), f32(9, 16), down=f32(16, 4)),
         lambda c: c.plan_mlp(f32(2, 16), f32(16), f32(9, 16), down=f32(16, 4))),
        (lambda c: c.mlp(f32(2, 16), f32(16), f32(8, 16), f32(8, 16), f32(16, 8), eps=-1.0),
         lambda c: c.plan_mlp(f32(2, 16), f32(16), f32(8, 16), f32(8, 16), f32(16, 8), eps=-1.0)),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(60, 8), np.zeros(2, np.int32), 4, 2),  # rows: not 8 heads
         lambda c: c.plan_qkv(f32(2, 8), f32(8), f32(60, 8), np.zeros(2, np.int32), 4, 2)),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(24, 8), np.zeros(2, np.int32), 4, 2),  # head_dim 3: odd
         lambda c: c.plan_qkv(f32(2, 8), f32(8), f32(24, 8), np.zeros(2, np.int32), 4, 2)),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int64), 4, 2),
         lambda c: c.plan_qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int64), 4, 2)),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(3, np.int32), 4, 2),
         lambda c: c.plan_qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(3, np.int32), 4, 2)),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int32), 4, 2, theta=0.5),
         lambda c: c.plan_qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int32), 4, 2, theta=0.5)),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int32), 4, 2, layout="both"),
         lambda c: c.plan_qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int32), 4, 2, layout="both")),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int32), 4, 2, eps=-1.0),
         lambda c: c.plan_qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int32), 4, 2, eps=-1.0)),
    ]
    for call, plan in cases:
        with pytest.raises(arbiter.Error) as by_call:
            call(ctx)
        with pytest.raises(arbiter.Error) as by_plan:
            plan(ctx)
        assert type(by_plan.value) is type(by_call.value)
        assert (by_plan.value.status, by_plan.value.message) == (by_call.value.status, by_call.value.message)


@pytest.fixture
def gemm_plan(ctx):
    return ctx.plan_gemm(f32(8, 16), f32(16, 4), bias=f32(4))


@pytest.mark.parametrize(
    "run, error, match",
    [
        (lambda p: p.run(f32(8, 8), f32(8, 4), bias=f32(4)), arbiter.InvalidArgumentError, r"a has shape \(8, 8\).*\(8, 16\)"),
        (lambda p: p.run(f32(8, 16), f32(16, 5), bias=f32(5)), arbiter.InvalidArgumentError, "b has shape"),
        (lambda p: p.run(f32(8, 16), f32(16, 4), bias=f32(4), out=f32(8, 5)), arbiter.InvalidArgumentError, "out has shape"),
        (lambda p: p.run(f32(8, 16, 1), f32(16, 4), bias=f32(4)), arbiter.InvalidArgumentError, "a has shape"),
        (lambda p: p.run(np.ones((8, 16), np.float16), f32(16, 4), bias=f32(4)), arbiter.DTypeError, "a has dtype float16"),
        (lambda p: p.run(f32(8, 16), f32(16, 4), bias=f32(4), out=np.ones((8, 4), np.float16)), arbiter.DTypeError,
         "out has dtype float16"),
        (lambda p: p.run(f32(8, 16), f32(16, 4), bias=np.ones(4, ref.bfloat16)), arbiter.DTypeError, "bias has dtype bfloat16"),
        (lambda p: p.run(np.ones((8, 16), np.int32), f32(16, 4), bias=f32(4)), arbiter.DTypeError, "int32"),
        (lambda p: p.run(f32(32, 16)[:8], f32(16, 4), bias=f32(4)), None, None),  # a row slice: same strides, runs
        (lambda p: p.run(f32(8, 32)[:, :16], f32(16, 4), bias=f32(4)), arbiter.InvalidArgumentError,
         r"a has strides \(32, 1\).*\(16, 1\)"),
        (lambda p: p.run(f32(16, 8).T, f32(16, 4), bias=f32(4)), arbiter.InvalidArgumentError, "a is a transposed view"),
        (lambda p: p.run(f32(8, 16), f32(16, 4)), arbiter.InvalidArgumentError, "made with bias, and none was given"),
        (lambda p: p.run(f32(8, 16), f32(16, 4), bias=f32(4), c=f32(8, 4)), None, None),  # beta = 0: c ignored, as by gemm
        ("not an array", TypeError, None),
    ],
)
def test_run_refuses_tensors_unlike_the_plans(gemm_plan, run, error, match):
    if run == "not an array":
        with pytest.raises(TypeError):
            gemm_plan.run("not an array", f32(16, 4), bias=f32(4))
        return
    if error is None:
        assert run(gemm_plan).shape == (8, 4)
        return
    with pytest.raises(error, match=match) as info:
        run(gemm_plan)
    assert info.value.status == 1 and info.value.status_name == "invalid_argument" and info.value.message


def test_run_refuses_a_stray_optional_tensor(ctx):
    plan = ctx.plan_gemm(f32(8, 16), f32(16, 4))
    with pytest.raises(arbiter.InvalidArgumentError, match="bias was given, but the plan was made without it"):
        plan.run(f32(8, 16), f32(16, 4), bias=f32(4))
    norm = ctx.plan_rmsnorm(f32(4, 8), f32(8))
    with pytest.raises(arbiter.InvalidArgumentError, match="residual was given"):
        norm.run(f32(4, 8), f32(8), residual=f32(4, 8))
    with_residual = ctx.plan_rmsnorm(f32(4, 8), f32(8), residual=f32(4, 8))
    with pytest.raises(arbiter.InvalidArgumentError, match="made with residual"):
        with_residual.run(f32(4, 8), f32(8))
    c_plan = ctx.plan_gemm(f32(8, 16), f32(16, 4), c=f32(8, 4), beta=0.5)
    with pytest.raises(arbiter.InvalidArgumentError, match="made with c"):
        c_plan.run(f32(8, 16), f32(16, 4))


def test_run_refuses_a_read_only_output_and_a_read_only_x_it_must_update(ctx):
    out = f32(8, 4)
    out.flags.writeable = False
    plan = ctx.plan_gemm(f32(8, 16), f32(16, 4))
    with pytest.raises(arbiter.InvalidArgumentError, match="out is read-only"):
        plan.run(f32(8, 16), f32(16, 4), out=out)
    with pytest.raises(arbiter.InvalidArgumentError, match="out is read-only"):
        ctx.plan_gemm(f32(8, 16), f32(16, 4), out=out)
    norm = ctx.plan_rmsnorm(f32(4, 8), f32(8), residual=f32(4, 8))
    x = f32(4, 8)
    x.flags.writeable = False
    with pytest.raises(arbiter.InvalidArgumentError, match="in place"):
        norm.run(x, f32(8), residual=f32(4, 8))
    assert np.all(x == 1)
    with pytest.raises(arbiter.InvalidArgumentError, match="in place"):  # as ctx.rmsnorm refuses it
        ctx.plan_rmsnorm(x, f32(8), residual=f32(4, 8))


def test_run_refuses_outputs_overlapping_inputs(ctx):
    a, b = f32(8, 8), f32(8, 8)
    plan = ctx.plan_gemm(a, b)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        plan.run(a, b, out=a)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        plan.run(a, b, out=b)
    x = f32(4, 8)
    softmax = ctx.plan_softmax(x)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        softmax.run(x, out=x)
    padded = ctx.plan_softmax(f32(4, 16)[:, :8], out=f32(4, 16)[:, 8:])  # rows of 8 in rows of 16
    big = f32(4, 16)
    padded.run(big[:, :8], out=f32(4, 16)[:, 8:])
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        padded.run(big[:, :8], out=big[:, 8:])  # out's rows interleaved with x's
    norm = ctx.plan_rmsnorm(x, f32(8))
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        norm.run(x, f32(8), out=x)


def test_a_plan_of_one_op_refuses_another_ops_run(ctx):
    plan = ctx.plan_softmax(f32(4, 8))
    with pytest.raises(arbiter.InvalidArgumentError, match="softmax plan"):
        plan._p.gemm(f32(4, 8), f32(8, 4), None, None, f32(4, 4), 0, 0)


# ---- explain ------------------------------------------------------------------------------


def test_explain_names_the_kernel_the_plan_runs(ctx):
    a, b = f32(16, 32), f32(32, 8)
    plan = ctx.plan_gemm(a, b)
    text = plan.explain()
    chosen = re.match(r"plan: runs (\S+) ", text)
    assert chosen, text
    kernel = chosen.group(1)
    gemm_kernels = {k.name for p in ctx.plugins() if p.status == "loaded" for k in p.kernels if k.op == "gemm"}
    assert kernel in gemm_kernels, (kernel, gemm_kernels)
    assert "gemm f32 m=16 n=8 k=32" in text
    assert re.search(r"^kernel:\s+" + re.escape(kernel), ctx.explain("gemm", a, b), re.M)  # the call's choice too
    softmax = ctx.plan_softmax(f32(4, 128))
    assert re.match(r"plan: runs \S*softmax\S* ", softmax.explain()), softmax.explain()
    rope = ctx.plan_rope(f32(4, 8, 64), np.zeros(4, np.int32), layout="interleaved")
    assert re.match(r"plan: runs \S*rope\S* ", rope.explain()), rope.explain()
    assert "rope f32 tokens=4 heads=8 dim=64 layout=interleaved" in rope.explain()


# ---- lifetime -----------------------------------------------------------------------------


def test_run_after_plan_close_is_refused():
    with arbiter.Context() as context:
        plan = context.plan_softmax(f32(2, 8))
        plan.run(f32(2, 8))
        plan.close()
        plan.close()  # twice is fine
        with pytest.raises(arbiter.InvalidArgumentError, match="this plan is closed"):
            plan.run(f32(2, 8))
        with pytest.raises(arbiter.InvalidArgumentError, match="this plan is closed"):
            plan.explain()
        with context.plan_softmax(f32(2, 8)) as scoped:
            scoped.run(f32(2, 8))
        with pytest.raises(arbiter.InvalidArgumentError, match="closed"):
            scoped.run(f32(2, 8))
        context.softmax(f32(2, 8))  # the context goes on


def test_run_after_context_close_is_refused():
    context = arbiter.Context()
    plans = [context.plan_softmax(f32(2, 8)), context.plan_gemm(f32(2, 2), f32(2, 2)),
             context.plan_rmsnorm(f32(2, 8), f32(8)), context.plan_swiglu(f32(2, 16)),
             context.plan_rope(f32(2, 1, 8), np.zeros(2, np.int32)),
             context.plan_mlp(f32(2, 8), f32(8), f32(8, 8), down=f32(8, 4)),
             context.plan_qkv(f32(2, 8), f32(8), f32(64, 8), np.zeros(2, np.int32), 4, 2)]
    context.close()
    for plan in plans:
        with pytest.raises(arbiter.InvalidArgumentError, match="context is closed"):
            plan.explain()
    with pytest.raises(arbiter.InvalidArgumentError, match="context is closed"):
        plans[0].run(f32(2, 8))
    with pytest.raises(arbiter.InvalidArgumentError, match="context is closed"):
        context.plan_softmax(f32(2, 8))
    for plan in plans:
        plan.close()  # after the context: nothing left to free, no crash


def test_a_plan_keeps_its_context_alive():
    plan = arbiter.Context().plan_softmax(f32(3, 16))  # no other reference to the context
    gc.collect()
    x = np.arange(48, dtype=np.float32).reshape(3, 16)
    ref.assert_close(plan.run(x), ref.softmax(x), np.float32, 16, ref.softmax(x))


def test_closing_while_threads_run_refuses_later_runs_and_never_crashes():
    for close_what in ("plan", "context"):
        context = arbiter.Context()
        a = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
        plan = context.plan_gemm(a, a)
        outcomes, started = [], threading.Barrier(5)

        def worker():
            out = np.empty((64, 64), np.float32)
            started.wait()
            try:
                while True:
                    plan.run(a, a, out=out)
                    np.testing.assert_allclose(out, a.astype(np.float64) @ a, rtol=1e-4, atol=1e-3)
            except arbiter.InvalidArgumentError as e:
                outcomes.append(str(e))
            except Exception as e:  # pragma: no cover - reported below
                outcomes.append(repr(e))

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        started.wait()
        time.sleep(0.05)
        (plan if close_what == "plan" else context).close()
        for t in threads:
            t.join()
        assert len(outcomes) == 4 and all("closed" in o for o in outcomes), outcomes


# ---- threads ------------------------------------------------------------------------------


def test_threads_run_one_plan_at_once(ctx):
    m, n, k = 16, 24, 40
    plan = ctx.plan_gemm(f32(m, k), f32(k, n), act="silu")
    softmax = ctx.plan_softmax(f32(m, n))

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(60):
            a, b = ref.random(rng, (m, k), np.float32), ref.random(rng, (k, n), np.float32)
            d = plan.run(a, b)
            ref.assert_close(d, ref.gemm(a, b, act="silu"), np.float32, k, gemm_magnitude(a, b))
            ref.assert_close(softmax.run(d), ref.softmax(d), np.float32, n, ref.softmax(d))

    run_in_threads(worker, 8)


def test_threads_run_one_rope_plan_at_once(ctx):
    plan = ctx.plan_rope(f32(12, 4, 64), np.zeros(12, np.int32), layout="interleaved")

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(60):
            x, positions = ref.random(rng, (12, 4, 64), np.float32), rope_positions(rng, (12, 4, 64))
            before = x.copy()
            plan.run(x, positions)
            ref.assert_rope_close(x, before, positions, 500000.0, "interleaved", np.float32)

    run_in_threads(worker, 8)


def test_gil_is_released_during_a_run(ctx):
    a = np.ones((384, 384), np.float32)
    plan = ctx.plan_gemm(a, a)
    out = np.empty_like(a)
    plan.run(a, a, out=out)
    assert_releases_gil(lambda: plan.run(a, a, out=out))
