"""Every op against NumPy in float64, over shapes, strides, transposes, epilogues and dtypes."""

import itertools

import numpy as np
import pytest

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
