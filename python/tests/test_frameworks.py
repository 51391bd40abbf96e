"""DLPack round trips: tensors of each framework in, the same framework's tensor out."""

import numpy as np
import pytest

import arbiter
import reference as ref


class Wrapped:
    """An array of an unknown framework that only speaks DLPack (results come back as NumPy)."""

    def __init__(self, array):
        self.array, self.shape = array, array.shape

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_numpy_in_numpy_out(ctx, rng):
    a, b = ref.random(rng, (5, 6), np.float32), ref.random(rng, (6, 7), np.float32)
    d = ctx.gemm(a, b)
    assert type(d) is np.ndarray
    np.testing.assert_allclose(d, ref.gemm(a, b), rtol=1e-5, atol=1e-5)


def test_jax_in_jax_out(ctx, rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed (tools/install-deps.sh installs it)")
    jnp = jax.numpy
    a, b = ref.random(rng, (9, 12), np.float32), ref.random(rng, (12, 4), np.float32)
    d = ctx.gemm(jnp.asarray(a), jnp.asarray(b))
    assert isinstance(d, jax.Array)
    np.testing.assert_allclose(np.asarray(d), ref.gemm(a, b), rtol=1e-5, atol=1e-5)
    x = ref.random(rng, (3, 64), np.float32)
    w = ref.random(rng, (64,), np.float32)
    y = ctx.rmsnorm(jnp.asarray(x), jnp.asarray(w))
    assert isinstance(y, jax.Array)
    np.testing.assert_allclose(np.asarray(y), ref.rmsnorm(x, w, 1e-6), rtol=1e-5, atol=1e-5)
    s = ctx.softmax(jnp.asarray(x).astype(jnp.bfloat16))
    assert isinstance(s, jax.Array) and s.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(s, dtype=np.float64), ref.softmax(x.astype(ref.bfloat16)), rtol=2e-2, atol=1e-3)
    # A transposed JAX view is materialised by JAX itself (its arrays are always compact).
    at = jnp.asarray(a).T
    np.testing.assert_allclose(np.asarray(ctx.gemm(at, jnp.asarray(a))), ref.gemm(a.T, a), rtol=1e-5, atol=1e-5)


def test_jax_residual_is_refused_because_jax_arrays_are_immutable(ctx, rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed (tools/install-deps.sh installs it)")
    import arbiter

    x = jax.numpy.ones((2, 8), dtype=np.float32)
    with pytest.raises(arbiter.InvalidArgumentError, match="in place"):
        ctx.rmsnorm(x, jax.numpy.ones((8,), np.float32), residual=x)


def test_torch_in_torch_out(ctx, rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    a, b = ref.random(rng, (33, 17), np.float32), ref.random(rng, (17, 9), np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    d = ctx.gemm(ta, tb)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float32
    np.testing.assert_allclose(d.numpy(), ref.gemm(a, b), rtol=1e-5, atol=1e-5)
    # A transposed torch view goes in as trans_b, without a copy.
    d2 = ctx.gemm(ta, torch.from_numpy(b.T.copy()).T)
    np.testing.assert_allclose(d2.numpy(), ref.gemm(a, b), rtol=1e-5, atol=1e-5)
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(4, 64, dtype=dtype)
        w = torch.randn(64, dtype=dtype)
        y = ctx.rmsnorm(x, w)
        assert y.dtype == dtype
        want = ref.rmsnorm(x.float().numpy(), w.float().numpy(), 1e-6)
        np.testing.assert_allclose(y.float().numpy(), want, rtol=3e-2, atol=3e-2)


def test_numpy_bfloat16_through_ml_dtypes(ctx, rng):
    if ref.bfloat16 is None:
        pytest.skip("ml_dtypes is not installed")
    a, b = ref.random(rng, (16, 32), ref.bfloat16), ref.random(rng, (32, 8), ref.bfloat16)
    d = ctx.gemm(a, b)
    assert d.dtype == ref.bfloat16
    ref.assert_close(d, ref.gemm(a, b), ref.bfloat16, 32, np.abs(ref.f64(a)) @ np.abs(ref.f64(b)))


def test_any_dlpack_object(ctx, rng):
    a, b = ref.random(rng, (4, 4), np.float32), ref.random(rng, (4, 4), np.float32)
    d = ctx.gemm(Wrapped(a), Wrapped(b))
    assert type(d) is np.ndarray
    np.testing.assert_allclose(d, ref.gemm(a, b), rtol=1e-5, atol=1e-5)


def test_a_read_only_dlpack_object_is_not_written(ctx):
    x = np.ones((2, 8), np.float32)
    x.flags.writeable = False  # DLPack 1.0 says so: rmsnorm's residual update is refused
    with pytest.raises(arbiter.InvalidArgumentError, match="in place, and this dlpack array is read-only"):
        ctx.rmsnorm(Wrapped(x), np.ones(8, np.float32), residual=np.ones((2, 8), np.float32))
    assert np.all(x == 1)


def swiglu_case(rng):
    """(gate, up, the same as one fused [..., 2n] tensor, check(y, kind)) for the framework tests."""
    gate, up = ref.random(rng, (3, 2, 40), np.float32, scale=3.0), ref.random(rng, (3, 2, 40), np.float32)
    want = ref.swiglu(gate, up)

    def check(y, kind):
        assert isinstance(y, kind) and tuple(y.shape) == (3, 2, 40)
        ref.assert_close(np.asarray(y), want, np.float32, 1, np.abs(want))

    return gate, up, np.concatenate([gate, up], axis=-1), check


def test_swiglu_any_dlpack_object(ctx, rng):
    gate, up, fused, check = swiglu_case(rng)
    check(ctx.swiglu(Wrapped(gate), Wrapped(up)), np.ndarray)
    check(ctx.swiglu(Wrapped(fused)), np.ndarray)
    check(ctx.plan_swiglu(Wrapped(fused)).run(Wrapped(fused)), np.ndarray)  # split as NumPy views of it


def test_swiglu_torch_in_torch_out(ctx, rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    gate, up, fused, check = swiglu_case(rng)
    check(ctx.swiglu(torch.from_numpy(gate), torch.from_numpy(up)), torch.Tensor)
    check(ctx.swiglu(torch.from_numpy(fused)), torch.Tensor)
    check(ctx.plan_swiglu(torch.from_numpy(fused)).run(torch.from_numpy(fused)), torch.Tensor)
    check(ctx.swiglu(torch.from_numpy(fused.copy()).transpose(0, 1).contiguous().transpose(0, 1)), torch.Tensor)


def test_swiglu_jax_in_jax_out(ctx, rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed (tools/install-deps.sh installs it)")
    jnp = jax.numpy
    gate, up, fused, check = swiglu_case(rng)
    check(ctx.swiglu(jnp.asarray(gate), jnp.asarray(up)), jax.Array)
    check(ctx.swiglu(jnp.asarray(fused)), jax.Array)
    plan = ctx.plan_swiglu(jnp.asarray(fused))  # JAX slices are copies: planned on compact halves
    check(plan.run(jnp.asarray(fused)), jax.Array)
    b = ctx.swiglu(jnp.asarray(fused).astype(jnp.bfloat16))
    assert isinstance(b, jax.Array) and b.dtype == jnp.bfloat16
    want_bf16 = ref.swiglu(fused.astype(ref.bfloat16))
    ref.assert_close(np.asarray(b), want_bf16, ref.bfloat16, 1, np.abs(want_bf16))


def rope_case(rng):
    """(x [tokens, heads, dim], positions, check(x_after, kind)) for the framework tests."""
    x, positions = ref.random(rng, (5, 3, 16), np.float32), np.array([0, 7, 100, 3, 8191], np.int32)

    def check(y, kind, layout="half"):
        assert isinstance(y, kind) and tuple(y.shape) == (5, 3, 16)
        ref.assert_rope_close(np.asarray(y), x, positions, 500000.0, layout, np.float32)

    return x, positions, check


def test_rope_any_dlpack_object(ctx, rng):
    x, positions, check = rope_case(rng)
    mine = x.copy()
    wrapped = Wrapped(mine)
    assert ctx.rope(wrapped, Wrapped(positions)) is wrapped  # in place: x itself comes back
    check(mine, np.ndarray)
    mine = x.copy()
    ctx.plan_rope(Wrapped(mine), Wrapped(positions), layout="interleaved").run(Wrapped(mine), Wrapped(positions))
    check(mine, np.ndarray, "interleaved")
    read_only = x.copy()
    read_only.flags.writeable = False  # DLPack says so: refused, not written
    with pytest.raises(arbiter.InvalidArgumentError, match="rope rotates x in place, and this dlpack array is read-only"):
        ctx.rope(Wrapped(read_only), Wrapped(positions))
    assert np.array_equal(read_only, x)


def test_rope_torch_in_place(ctx, rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x, positions, check = rope_case(rng)
    t = torch.from_numpy(x.copy())
    assert ctx.rope(t, torch.from_numpy(positions)) is t
    check(t.numpy(), np.ndarray)
    t = torch.from_numpy(x.copy())
    ctx.plan_rope(t, torch.from_numpy(positions)).run(t, torch.from_numpy(positions))
    check(t.numpy(), np.ndarray)
    with pytest.raises(arbiter.DTypeError, match="int64.*int32"):
        ctx.rope(t, torch.from_numpy(positions).long())


def test_rope_jax(ctx, rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed (tools/install-deps.sh installs it)")
    jnp = jax.numpy
    x, positions, check = rope_case(rng)
    with pytest.raises(arbiter.InvalidArgumentError, match="rope rotates x in place, and this jax array is read-only"):
        ctx.rope(jnp.asarray(x), jnp.asarray(positions))
    with pytest.raises(arbiter.InvalidArgumentError, match="in place"):
        ctx.plan_rope(jnp.asarray(x), jnp.asarray(positions))
    mine = x.copy()  # JAX positions with a NumPy x
    ctx.rope(mine, jnp.asarray(positions))
    check(mine, np.ndarray)
    assert "rope f32 tokens=5 heads=3 dim=16" in ctx.explain("rope", jnp.asarray(x), jnp.asarray(positions))


def mlp_case(rng):
    """(x, norm_weight, gate, up, down, check(y, kind)) for the framework tests: rows of 2 x 3."""
    hidden, inter = 32, 48
    x = ref.random(rng, (2, 3, hidden), np.float32)
    norm_weight = ref.random(rng, (hidden,), np.float32)
    gate = ref.random(rng, (inter, hidden), np.float32, scale=hidden**-0.5)
    up = ref.random(rng, (inter, hidden), np.float32, scale=hidden**-0.5)
    down = ref.random(rng, (hidden, inter), np.float32, scale=inter**-0.5)

    def check(y, kind, dtype=np.float32):
        assert isinstance(y, kind) and tuple(y.shape) == x.shape
        cast = [t.astype(dtype) for t in (x, norm_weight, gate, up, down)]
        ref.assert_mlp_close(np.asarray(y), *cast, dtype)

    return x, norm_weight, gate, up, down, check


def test_mlp_any_dlpack_object(ctx, rng):
    x, norm_weight, gate, up, down, check = mlp_case(rng)
    check(ctx.mlp(*(Wrapped(t) for t in (x, norm_weight, gate, up, down))), np.ndarray)
    fused = Wrapped(ref.fused_gate_up(gate, up))
    check(ctx.mlp(Wrapped(x), Wrapped(norm_weight), fused, down=Wrapped(down)), np.ndarray)


def test_mlp_torch_in_torch_out(ctx, rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x, norm_weight, gate, up, down, check = mlp_case(rng)
    tx, tw, tg, tu, td = (torch.from_numpy(t) for t in (x, norm_weight, gate, up, down))
    check(ctx.mlp(tx, tw, tg, tu, td), torch.Tensor)
    check(ctx.mlp(tx, tw, torch.from_numpy(ref.fused_gate_up(gate, up)), down=td), torch.Tensor)
    # nn.Linear weights as a model holds them, and a transposed view (copied with .contiguous()).
    check(ctx.mlp(tx, tw, tg, tu.t().contiguous().t(), td), torch.Tensor)
    y = ctx.mlp(tx.bfloat16(), tw.bfloat16(), tg.bfloat16(), tu.bfloat16(), td.bfloat16())
    assert y.dtype == torch.bfloat16
    check(y.float().numpy().astype(ref.bfloat16), np.ndarray, ref.bfloat16)


def test_mlp_jax_in_jax_out(ctx, rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed (tools/install-deps.sh installs it)")
    jnp = jax.numpy
    x, norm_weight, gate, up, down, check = mlp_case(rng)
    jx, jw, jg, ju, jd = (jnp.asarray(t) for t in (x, norm_weight, gate, up, down))
    check(ctx.mlp(jx, jw, jg, ju, jd), jax.Array)
    y = ctx.mlp(*(t.astype(jnp.bfloat16) for t in (jx, jw, jg, ju, jd)))
    assert isinstance(y, jax.Array) and y.dtype == jnp.bfloat16
    check(np.asarray(y), np.ndarray, ref.bfloat16)


def qkv_case(rng):
    """(x, norm_weight, weight, positions, check(y, kind)) for the framework tests: rows of 2 x 3,
    4 q heads and 2 each of k and v, head_dim 16."""
    hidden, heads, kv_heads, dim = 32, 4, 2, 16
    x = ref.random(rng, (2, 3, hidden), np.float32)
    norm_weight = ref.random(rng, (hidden,), np.float32)
    weight = ref.random(rng, ((heads + 2 * kv_heads) * dim, hidden), np.float32, scale=hidden**-0.5)
    positions = np.array([[0, 7, 100], [3, 8191, 42]], np.int32)

    def check(y, kind, dtype=np.float32, layout="half"):
        assert isinstance(y, kind) and tuple(y.shape) == (2, 3, heads + 2 * kv_heads, dim)
        cast = [t.astype(dtype) for t in (x, norm_weight, weight)]
        ref.assert_qkv_close(np.asarray(y), *cast, positions, heads, kv_heads, dtype, layout=layout)

    return x, norm_weight, weight, positions, check


def test_qkv_any_dlpack_object(ctx, rng):
    x, norm_weight, weight, positions, check = qkv_case(rng)
    check(ctx.qkv(*(Wrapped(t) for t in (x, norm_weight, weight, positions)), 4, 2), np.ndarray)
    out = np.empty((2, 3, 8, 16), np.float32)
    assert ctx.qkv(Wrapped(x), Wrapped(norm_weight), Wrapped(weight), Wrapped(positions), 4, 2, layout="interleaved",
                   out=out) is out
    check(out, np.ndarray, layout="interleaved")


def test_qkv_torch_in_torch_out(ctx, rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x, norm_weight, weight, positions, check = qkv_case(rng)
    tx, tn, tw, tp = (torch.from_numpy(t) for t in (x, norm_weight, weight, positions))
    check(ctx.qkv(tx, tn, tw, tp, 4, 2), torch.Tensor)
    # nn.Linear's weight as a model holds it (requires grad: detached by the caller), and a
    # transposed view (copied with .contiguous()).
    linear = torch.nn.Linear(32, 128, bias=False)
    with torch.no_grad():
        linear.weight.copy_(tw)
    check(ctx.qkv(tx, tn, linear.weight.detach(), tp, 4, 2), torch.Tensor)
    check(ctx.qkv(tx, tn, tw.t().contiguous().t(), tp, 4, 2), torch.Tensor)
    y = ctx.qkv(tx.bfloat16(), tn.bfloat16(), tw.bfloat16(), tp, 4, 2)
    assert y.dtype == torch.bfloat16
    check(y.float().numpy().astype(ref.bfloat16), np.ndarray, ref.bfloat16)
    with pytest.raises(arbiter.DTypeError, match="int64.*int32"):
        ctx.qkv(tx, tn, tw, tp.long(), 4, 2)


def test_qkv_jax_in_jax_out(ctx, rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed (tools/install-deps.sh installs it)")
    jnp = jax.numpy
    x, norm_weight, weight, positions, check = qkv_case(rng)
    jx, jn, jw, jp = (jnp.asarray(t) for t in (x, norm_weight, weight, positions))
    check(ctx.qkv(jx, jn, jw, jp, 4, 2), jax.Array)
    y = ctx.qkv(*(t.astype(jnp.bfloat16) for t in (jx, jn, jw)), jp, 4, 2)
    assert isinstance(y, jax.Array) and y.dtype == jnp.bfloat16
    check(np.asarray(y), np.ndarray, ref.bfloat16)
    assert "qkv f32 rows=6 hidden=32 heads=4 kvheads=2 dim=16" in ctx.explain("qkv", jx, jn, jw, jp, 4, 2)
