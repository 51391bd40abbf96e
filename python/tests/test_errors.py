"""Every bad input the C API rejects is a Python exception with the status and the library's
message; never a crash."""

import numpy as np
import pytest

import arbiter


def f32(*shape):
    return np.ones(shape, np.float32)


def tokens(n, dtype=np.int32):
    """rope positions 0..n-1."""
    return np.arange(n, dtype=dtype)


def mlp_weights(hidden=8, inter=16, dtype=np.float32):
    """(norm_weight, gate, up, down) of ones, shaped as mlp takes them."""
    return (np.ones(hidden, dtype), np.ones((inter, hidden), dtype), np.ones((inter, hidden), dtype),
            np.ones((hidden, inter), dtype))


W, G, U, D = mlp_weights()
# qkv with hidden 8, heads 4, kv_heads 2 (8 heads in all) of head_dim 8: a fused weight [64, 8].
QKV_W = f32(64, 8)


def test_error_classes():
    assert issubclass(arbiter.InvalidArgumentError, ValueError)
    assert issubclass(arbiter.DTypeError, TypeError) and issubclass(arbiter.DTypeError, arbiter.InvalidArgumentError)
    assert issubclass(arbiter.OutOfMemoryError, MemoryError)
    assert issubclass(arbiter.UnsupportedError, NotImplementedError)
    e = arbiter.InvalidArgumentError(1, "a message")
    assert e.status == 1 and e.status_name == "invalid_argument" and "a message" in str(e)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda c: c.gemm(np.ones((4, 4), np.int32), np.ones((4, 4), np.int32)), arbiter.DTypeError, "int32"),
        (lambda c: c.gemm(f32(4, 4), np.ones((4, 4), np.float64)), arbiter.DTypeError, "float64"),
        (lambda c: c.gemm(f32(4, 4), np.ones((4, 4), np.float16)), arbiter.InvalidArgumentError, None),
        (lambda c: c.gemm(f32(4, 5), f32(4, 5)), arbiter.InvalidArgumentError, None),
        (lambda c: c.gemm(f32(4), f32(4, 5)), arbiter.InvalidArgumentError, "2-D"),
        (lambda c: c.gemm(f32(4, 4), f32(4, 4), bias=f32(3)), arbiter.InvalidArgumentError, "bias"),
        (lambda c: c.gemm(f32(4, 4), f32(4, 4), out=f32(4, 3)), arbiter.InvalidArgumentError, None),
        (lambda c: c.gemm(f32(4, 4), f32(4, 4), act="tanh"), arbiter.InvalidArgumentError, "act"),
        (lambda c: c.rmsnorm(f32(4, 8), f32(7)), arbiter.InvalidArgumentError, "weight"),
        (lambda c: c.rmsnorm(f32(4, 8), f32(8), residual=f32(4, 7)), arbiter.InvalidArgumentError, None),
        (lambda c: c.softmax(f32(4, 8), out=f32(4, 9)), arbiter.InvalidArgumentError, None),
        (lambda c: c.softmax(f32(4, 8), out=np.ones((4, 8), np.float16)), arbiter.InvalidArgumentError, None),
        (lambda c: c.swiglu(f32(4, 8), f32(4, 9)), arbiter.InvalidArgumentError, "up"),
        (lambda c: c.swiglu(f32(4, 8), f32(8, 4)), arbiter.InvalidArgumentError, "up"),
        (lambda c: c.swiglu(f32(2, 4, 8), f32(4, 8)), arbiter.InvalidArgumentError, "up"),
        (lambda c: c.swiglu(f32(4, 8), f32(4, 8), out=f32(4, 4)), arbiter.InvalidArgumentError, "y"),
        (lambda c: c.swiglu(f32(4, 9)), arbiter.InvalidArgumentError, "even"),
        (lambda c: c.swiglu(f32(4, 8), out=f32(4, 8)), arbiter.InvalidArgumentError, "halved"),
        (lambda c: c.swiglu(f32(4, 8), np.ones((4, 8), np.float16)), arbiter.InvalidArgumentError, None),
        (lambda c: c.swiglu(f32(4, 8), f32(4, 8), out=np.ones((4, 8), np.float16)), arbiter.InvalidArgumentError, None),
        (lambda c: c.swiglu(np.ones((4, 8), np.float64), np.ones((4, 8), np.float64)), arbiter.DTypeError, "float64"),
        (lambda c: c.swiglu(np.ones((4, 8), np.int32)), arbiter.DTypeError, "int32"),
        (lambda c: c.swiglu(f32(4, 0), f32(4, 0)), arbiter.InvalidArgumentError, None),
        (lambda c: c.swiglu("not an array"), TypeError, None),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4, np.int64)), arbiter.DTypeError, "int64.*int32: convert"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4, np.float32)), arbiter.DTypeError, "positions has dtype float32"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4, np.uint32)), arbiter.DTypeError, "positions has dtype uint32"),
        (lambda c: c.rope(np.ones((4, 2, 8), np.float64), tokens(4)), arbiter.DTypeError, "x has dtype float64"),
        (lambda c: c.rope(np.ones((4, 2, 8), np.int32), tokens(4)), arbiter.DTypeError, "x has dtype int32"),
        (lambda c: c.rope(f32(4, 16), tokens(4)), arbiter.InvalidArgumentError, r"x must be \[\.\.\., heads, head_dim\]"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(3)), arbiter.InvalidArgumentError, "leading shape"),
        (lambda c: c.rope(f32(2, 4, 2, 8), tokens(8)), arbiter.InvalidArgumentError, "leading shape"),
        (lambda c: c.rope(f32(4, 2, 7), tokens(4)), arbiter.InvalidArgumentError, "dim = 7 must be even"),
        (lambda c: c.rope(f32(4, 2, 0), tokens(4)), arbiter.InvalidArgumentError, "size 0"),
        (lambda c: c.rope(f32(4, 2, 1), tokens(4)), arbiter.InvalidArgumentError, "dim >= 2"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), max_position=3), arbiter.InvalidArgumentError,
         r"positions\[3\] = 3 is outside \[0, max_position = 3\)"),
        (lambda c: c.rope(f32(4, 2, 8), -tokens(4)), arbiter.InvalidArgumentError, r"positions\[1\] = -1 is outside"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), max_position=0), arbiter.InvalidArgumentError, "max_position = 0"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), max_position=2**24 + 1), arbiter.InvalidArgumentError,
         "max_position = 16777217"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), theta=1.0), arbiter.InvalidArgumentError, "theta = 1 must be"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), theta=float("nan")), arbiter.InvalidArgumentError, "theta"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), layout="neox"), arbiter.InvalidArgumentError,
         "layout='neox': expected one of 'half', 'interleaved'"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), layout=1), arbiter.InvalidArgumentError, "layout=1"),
        (lambda c: c.rope(f32(4, 2, 8), "not an array"), TypeError, None),
        (lambda c: c.rope("not an array", tokens(4)), TypeError, None),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), stream=7), arbiter.InvalidArgumentError, "stream must be NULL"),
        (lambda c: c.rope(f32(4, 2, 8), tokens(4), stream="default"), TypeError, "stream"),
        (lambda c: c.mlp(f32(2, 8), f32(7), G, U, D), arbiter.InvalidArgumentError,
         "norm_weight must be 1-D of size 8"),
        (lambda c: c.mlp(f32(2, 8), f32(8, 1), G, U, D), arbiter.InvalidArgumentError, "norm_weight must be 1-D"),
        (lambda c: c.mlp(f32(2, 8), W, f32(16, 7), U, D), arbiter.InvalidArgumentError,
         r"gate must be \[16, 8\], got \[16, 7\]"),
        (lambda c: c.mlp(f32(2, 8), W, f32(16), U, D), arbiter.InvalidArgumentError, "gate must be 2-D"),
        (lambda c: c.mlp(f32(2, 8), W, G, f32(12, 8), D), arbiter.InvalidArgumentError, r"up must be \[16, 8\]"),
        (lambda c: c.mlp(f32(2, 8), W, G, U, f32(16, 8)), arbiter.InvalidArgumentError,
         r"down must be \[8, 16\], got \[16, 8\]"),
        (lambda c: c.mlp(f32(2, 8), W, f32(15, 8), down=D), arbiter.InvalidArgumentError, r"\(15\) must be even"),
        (lambda c: c.mlp(f32(2, 8), W, f32(32, 8), down=f32(8, 32)), arbiter.InvalidArgumentError,
         r"down must be \[8, 16\]"),  # a fused gate/up weight of 2 x 16 rows: inter is 16
        (lambda c: c.mlp(f32(2, 8), W, G, U), arbiter.InvalidArgumentError, "down .* is required"),
        (lambda c: c.mlp(f32(2, 8), W, np.ones((32, 8), np.float32), D), arbiter.InvalidArgumentError,
         "down .* is required.*by name"),  # down given in up's place
        (lambda c: c.mlp(f32(2, 8), W, G, U, D, out=f32(2, 9)), arbiter.InvalidArgumentError,
         "y must have the shape of x"),
        (lambda c: c.mlp(f32(2, 8), W, G, U, D, out=np.ones((2, 8), np.float16)), arbiter.InvalidArgumentError,
         "y has dtype f16, but the first operand has f32"),
        (lambda c: c.mlp(f32(2, 8), W, G, np.ones((16, 8), np.float16), D), arbiter.InvalidArgumentError,
         "up has dtype f16"),
        (lambda c: c.mlp(np.ones((2, 8), np.float64), *mlp_weights(dtype=np.float64)), arbiter.DTypeError, "float64"),
        (lambda c: c.mlp(f32(2, 8), W, G, U, np.ones((8, 16), np.int32)), arbiter.DTypeError, "down.*int32"),
        (lambda c: c.mlp(f32(2, 8), W, G, U, D, eps=-1.0), arbiter.InvalidArgumentError, "eps must be finite and >= 0"),
        (lambda c: c.mlp(f32(2, 8), W, G, U, D, eps=float("inf")), arbiter.InvalidArgumentError, "eps"),
        (lambda c: c.mlp(f32(2, 8), W, G, U, D, stream=7), arbiter.InvalidArgumentError, "stream must be NULL"),
        (lambda c: c.mlp(f32(2, 8), W, G, U, D, stream="default"), TypeError, "stream"),
        (lambda c: c.mlp(f32(2, 8), W, G, "not an array", D), TypeError, None),
        (lambda c: c.mlp("not an array", W, G, U, D), TypeError, None),
        (lambda c: c.explain("mlp", f32(2, 8), W, G, U, f32(16, 8)), arbiter.InvalidArgumentError,
         r"down must be \[8, 16\]"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2, np.int64), 4, 2), arbiter.DTypeError,
         "positions has dtype int64.*int32: convert"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2, np.float32), 4, 2), arbiter.DTypeError,
         "positions has dtype float32"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(3), 4, 2), arbiter.InvalidArgumentError, "leading shape"),
        (lambda c: c.qkv(f32(2, 3, 8), f32(8), QKV_W, tokens(6), 4, 2), arbiter.InvalidArgumentError, "leading shape"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 0, 2), arbiter.InvalidArgumentError,
         r"heads \(0\) and kv_heads \(2\) must be >= 1"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 0, out=f32(2, 4, 16)), arbiter.InvalidArgumentError,
         r"heads \(4\) and kv_heads \(0\) must be >= 1"),  # given out: the library's check
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(60, 8), tokens(2), 4, 2), arbiter.InvalidArgumentError,
         r"60 rows, not a multiple of heads \+ 2 kv_heads"),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64, 8), tokens(2), 4, 3), arbiter.InvalidArgumentError,
         "not a multiple"),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64), tokens(2), 4, 2), arbiter.InvalidArgumentError,
         "weight must be 2-D"),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(8, 8, 8), tokens(2), 4, 2), arbiter.InvalidArgumentError,
         "weight must be 2-D"),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64), tokens(2), 4, 2, out=f32(2, 8, 8)), arbiter.InvalidArgumentError,
         "weight must be 2-D"),  # given out: the library's check
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(64, 7), tokens(2), 4, 2), arbiter.InvalidArgumentError,
         r"weight must be \[64, 8\], got \[64, 7\]"),
        (lambda c: c.qkv(f32(2, 8), f32(8), f32(24, 8), tokens(2), 4, 2), arbiter.InvalidArgumentError,
         "head_dim .* must be even"),
        (lambda c: c.qkv(f32(2, 8), f32(7), QKV_W, tokens(2), 4, 2), arbiter.InvalidArgumentError,
         "norm_weight must be 1-D of size 8"),
        (lambda c: c.qkv(f32(4, 8), f32(8), QKV_W, tokens(4), 4, 2, max_position=3), arbiter.InvalidArgumentError,
         r"positions\[3\] = 3 is outside \[0, max_position = 3\)"),
        (lambda c: c.qkv(f32(4, 8), f32(8), QKV_W, -tokens(4), 4, 2), arbiter.InvalidArgumentError,
         r"positions\[1\] = -1 is outside"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, max_position=0), arbiter.InvalidArgumentError,
         "max_position = 0"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, theta=1.0), arbiter.InvalidArgumentError,
         "theta = 1 must be"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, layout="neox"), arbiter.InvalidArgumentError,
         "layout='neox': expected one of 'half', 'interleaved'"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, eps=-1.0), arbiter.InvalidArgumentError,
         "eps must be finite and >= 0"),
        (lambda c: c.qkv(np.ones((2, 8)), np.ones(8), np.ones((64, 8)), tokens(2), 4, 2), arbiter.DTypeError,
         "x has dtype float64"),
        (lambda c: c.qkv(f32(2, 8), f32(8), np.ones((64, 8), np.float16), tokens(2), 4, 2),
         arbiter.InvalidArgumentError, "weight has dtype f16"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, out=np.ones((2, 8, 8), np.float16)),
         arbiter.InvalidArgumentError, "y has dtype f16, but the first operand has f32"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, out=f32(2, 64)), arbiter.InvalidArgumentError,
         r"y must be \[\.\.\., heads \+ 2 kv_heads, head_dim\]"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, out=f32(2, 7, 8)), arbiter.InvalidArgumentError,
         r"second-to-last dimension \(7\) must be heads \+ 2 kv_heads = 8"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, stream=7), arbiter.InvalidArgumentError,
         "stream must be NULL"),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, stream="default"), TypeError, "stream"),
        (lambda c: c.qkv(f32(2, 8), f32(8), "not an array", tokens(2), 4, 2), TypeError, None),
        (lambda c: c.qkv(f32(2, 8), f32(8), QKV_W, "not an array", 4, 2), TypeError, None),
        (lambda c: c.qkv("not an array", f32(8), QKV_W, tokens(2), 4, 2), TypeError, None),
        (lambda c: c.explain("qkv", f32(2, 8), f32(8), QKV_W, tokens(2)), TypeError, "missing arguments"),
        (lambda c: c.explain("qkv", f32(2, 8), f32(8), f32(64, 7), tokens(2), 4, 2), arbiter.InvalidArgumentError,
         r"weight must be \[64, 8\]"),
        (lambda c: c.explain("gemm f32 m=0 n=1"), arbiter.InvalidArgumentError, None),
        (lambda c: c.explain("conv2d f32"), arbiter.InvalidArgumentError, None),
        (lambda c: c.explain("convolution", f32(2, 2)), arbiter.InvalidArgumentError, "unknown op"),
        (lambda c: c.verify("gemm f32 m=8 n=8 k=8", kernel="nosuch.kernel"), arbiter.InvalidArgumentError, "nosuch"),
        (lambda c: c.tune([]), arbiter.InvalidArgumentError, None),
        (lambda c: c.gemm("not an array", f32(4, 4)), TypeError, None),
    ],
)
def test_bad_inputs(ctx, call, error, match):
    with pytest.raises(error, match=match) as info:
        call(ctx)
    if isinstance(info.value, arbiter.Error):
        assert info.value.message and info.value.status != 0


def test_outputs_overlapping_inputs_are_refused(ctx):
    a = f32(8, 8)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        ctx.gemm(a, f32(8, 8), out=a)
    x = f32(4, 8)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        ctx.softmax(x, out=x)
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        ctx.rmsnorm(x, f32(8), out=x)
    gate, up = f32(4, 8), f32(4, 8)
    for out in (gate, up):  # in place is refused too: y must not overlap gate or up
        with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
            ctx.swiglu(gate, up, out=out)
    fused = f32(4, 16)
    for out in (fused[:, :8], fused[:, 8:]):  # a fused gate's halves
        with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
            ctx.swiglu(fused, out=out)
    big = f32(4, 16)  # rows of gate and out interleaved in one buffer
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        ctx.swiglu(big[:, :8], f32(4, 8), out=big[:, 8:])
    assert np.all(gate == 1) and np.all(up == 1) and np.all(fused == 1)
    x, (weight, gate, up, down) = f32(4, 8), mlp_weights()
    for out in (x, gate[:4], up[4:8], down.reshape(-1)[:32].reshape(4, 8)):  # y must not overlap any input
        with pytest.raises(arbiter.InvalidArgumentError, match="y overlaps"):
            ctx.mlp(x, weight, gate, up, down, out=out)
    fused = f32(32, 8)
    with pytest.raises(arbiter.InvalidArgumentError, match="y overlaps"):
        ctx.mlp(x, weight, fused, down=down, out=fused[20:24])  # inside the fused weight's up rows
    assert all(np.all(t == 1) for t in (x, weight, gate, up, down, fused))
    # qkv: y must not overlap x, norm_weight, the weight or positions.
    memory = f32(2 * 8 * 8 + 64 * 8)
    out = memory[:128].reshape(2, 8, 8)
    for inputs in ((memory[:16].reshape(2, 8), f32(8), QKV_W, tokens(2)),
                   (f32(2, 8), memory[120:128], QKV_W, tokens(2)),
                   (f32(2, 8), f32(8), memory[64:576].reshape(64, 8), tokens(2)),
                   (f32(2, 8), f32(8), QKV_W, memory[:2].view(np.int32))):
        with pytest.raises(arbiter.InvalidArgumentError, match="y overlaps"):
            ctx.qkv(*inputs, 4, 2, out=out)
    assert np.all(memory == 1)
    ctx.qkv(f32(2, 8), f32(8), memory[128:].reshape(64, 8), tokens(2), 4, 2, out=out)  # right after the weight: taken


def test_mlp_out_right_after_a_fused_weight(ctx):
    """y in the memory just past a fused gate/up weight shares none of it; its two halves as views
    (the same problem) are taken."""
    hidden, inter, rows = 16, 8, 2
    memory = np.zeros(2 * inter * hidden + rows * hidden, np.float32)
    gate_up = memory[:2 * inter * hidden].reshape(2 * inter, hidden)
    out = memory[2 * inter * hidden:].reshape(rows, hidden)
    x, norm_weight, down = f32(rows, hidden), f32(hidden), f32(hidden, inter)
    ctx.mlp(x, norm_weight, gate_up[:inter], gate_up[inter:], down, out=out)
    ctx.mlp(x, norm_weight, gate_up, down=down, out=out)


def test_rope_refusals_leave_x_as_it_was(ctx):
    x = np.arange(4 * 2 * 8, dtype=np.float32).reshape(4, 2, 8)
    before = x.copy()
    for call in (lambda: ctx.rope(x, tokens(4), max_position=3),  # positions[3] out of range
                 lambda: ctx.rope(x, tokens(4, np.int64)),
                 lambda: ctx.rope(x, tokens(4), layout="neither")):
        with pytest.raises(arbiter.InvalidArgumentError):
            call()
        assert np.array_equal(x, before)
    # positions inside x's own memory, which the call writes
    inside = x.reshape(-1).view(np.int32)[:4]
    with pytest.raises(arbiter.InvalidArgumentError, match="overlap"):
        ctx.rope(x, inside)
    assert np.array_equal(x, before)
    read_only = x.copy()
    read_only.flags.writeable = False
    with pytest.raises(arbiter.InvalidArgumentError, match="rope rotates x in place, and this numpy array is read-only"):
        ctx.rope(read_only, tokens(4))
    assert np.array_equal(read_only, before)


def test_read_only_output_is_refused(ctx):
    out = f32(4, 4)
    out.flags.writeable = False
    with pytest.raises((ValueError, TypeError)):
        ctx.gemm(f32(4, 4), f32(4, 4), out=out)
    with pytest.raises(arbiter.InvalidArgumentError, match="read-only"):
        ctx.swiglu(f32(4, 4), f32(4, 4), out=out)
    with pytest.raises(arbiter.InvalidArgumentError, match="read-only"):
        ctx.mlp(f32(4, 8), *mlp_weights(), out=np.broadcast_to(f32(8), (4, 8)))
    with pytest.raises(arbiter.InvalidArgumentError, match="read-only"):
        ctx.qkv(f32(2, 8), f32(8), QKV_W, tokens(2), 4, 2, out=np.broadcast_to(f32(8), (2, 8, 8)))


def test_config_errors(tmp_path):
    with pytest.raises(arbiter.ConfigError):
        arbiter.Context("[dispatch]\non_miss = 12\n")
    with pytest.raises(arbiter.ConfigError):
        arbiter.Context(str(tmp_path / "missing.toml"))
    with pytest.raises(arbiter.ConfigError):
        arbiter.Context(str(tmp_path))  # a directory is not a config file
    with pytest.raises(TypeError):
        arbiter.Context(42)


def test_closed_context():
    context = arbiter.Context()
    context.close()
    context.close()  # twice is fine
    with pytest.raises(arbiter.Error, match="closed"):
        context.gemm(f32(2, 2), f32(2, 2))
