"""CUDA tensors: PyTorch and CuPy arrays on a GPU, against float64 references on the host.

Skipped (and reported so) where there is no CUDA device or no framework that can make one of
its tensors; the GPU check (bench/gpu-check.sh) runs it on a GPU."""

import numpy as np
import pytest

import arbiter
import reference as ref

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device (torch.cuda.is_available() is False)", allow_module_level=True)

TORCH_DTYPES = {torch.float32: np.float32, torch.float16: np.float16}
if ref.bfloat16 is not None:
    TORCH_DTYPES[torch.bfloat16] = ref.bfloat16


def host64(t):
    return t.detach().float().cpu().numpy().astype(np.float64)


def cuda_randn(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


@pytest.fixture(scope="module")
def ctx():
    with arbiter.Context() as context:
        loaded = {p.name for p in context.plugins() if p.status == "loaded"}
        if "cuda" not in loaded and "cublaslt" not in loaded:
            pytest.fail(f"a CUDA device is present but no CUDA plugin loaded: {context.plugins()}")
        yield context


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES), ids=str)
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (16, 1024, 512), (128, 256, 64), (257, 129, 33)])
def test_torch_gemm(ctx, dtype, m, n, k):
    a, b = cuda_randn((m, k), dtype, m + k), cuda_randn((k, n), dtype, n + 7)
    d = ctx.gemm(a, b)
    torch.cuda.synchronize()
    assert isinstance(d, torch.Tensor) and d.is_cuda and d.shape == (m, n) and d.dtype == dtype
    a64, b64 = host64(a), host64(b)
    ref.assert_close(host64(d), a64 @ b64, TORCH_DTYPES[dtype], k, np.abs(a64) @ np.abs(b64))


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES), ids=str)
def test_torch_gemm_transposed_with_epilogue(ctx, dtype):
    m, n, k = 96, 160, 224
    a = cuda_randn((k, m), dtype, 1).T  # transposed views: trans_a / trans_b, no copy
    b = cuda_randn((n, k), dtype, 2).T
    bias, c = cuda_randn((n,), dtype, 3), cuda_randn((m, n), dtype, 4)
    d = ctx.gemm(a, b, bias=bias, c=c, alpha=0.5, beta=0.25, act="silu")
    torch.cuda.synchronize()
    want = ref.gemm(host64(a), host64(b), host64(bias), host64(c), 0.5, 0.25, "silu")
    magnitude = 0.5 * np.abs(host64(a)) @ np.abs(host64(b)) + np.abs(host64(bias)) + 0.25 * np.abs(host64(c))
    ref.assert_close(host64(d), want, TORCH_DTYPES[dtype], 2 * k, magnitude)


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES), ids=str)
@pytest.mark.parametrize("shape", [(1, 4096), (64, 8192), (3, 5, 1000)])
def test_torch_rmsnorm_and_softmax(ctx, dtype, shape):
    x, w = cuda_randn(shape, dtype, 11), cuda_randn(shape[-1:], dtype, 12)
    y = ctx.rmsnorm(x, w, 1e-5)
    s = ctx.softmax(x)
    torch.cuda.synchronize()
    assert y.is_cuda and s.is_cuda and y.dtype == dtype and s.dtype == dtype
    want = ref.rmsnorm(host64(x), host64(w), 1e-5)
    ref.assert_close(host64(y), want, TORCH_DTYPES[dtype], shape[-1], np.abs(want) + 1e-3)
    want = ref.softmax(host64(x))
    ref.assert_close(host64(s), want, TORCH_DTYPES[dtype], shape[-1], np.abs(want) + 1e-6)


def test_torch_runs_on_the_current_stream(ctx):
    # Work queued on a side stream before the call must be seen by it, and the result must be
    # complete once that stream is synchronized: arbiter launches on torch's current stream.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.zeros((512, 512), device="cuda")
        b = cuda_randn((512, 512), torch.float32, 5)
        a.add_(cuda_randn((512, 512), torch.float32, 6))  # queued on `side`
        d = ctx.gemm(a, b)
    side.synchronize()
    want = host64(a) @ host64(b)
    ref.assert_close(host64(d), want, np.float32, 512, np.abs(host64(a)) @ np.abs(host64(b)))


def test_torch_rmsnorm_residual_in_place(ctx):
    x, r, w = (cuda_randn((8, 2048), torch.bfloat16, s) for s in (21, 22, 23))
    want_x = host64(x) + host64(r)
    y = ctx.rmsnorm(x, w, 1e-6, residual=r)
    torch.cuda.synchronize()
    ref.assert_close(host64(x), want_x, ref.bfloat16 or np.float32, 1, np.abs(want_x))
    want = ref.rmsnorm(host64(x), host64(w), 1e-6)
    ref.assert_close(host64(y), want, ref.bfloat16 or np.float32, 2048, np.abs(want) + 1e-3)


def test_mixed_host_and_device_operands_are_refused(ctx):
    a = cuda_randn((8, 8), torch.float32, 31)
    with pytest.raises(arbiter.Error):
        ctx.gemm(a, torch.randn(8, 8))


def test_torch_explain_names_a_cuda_kernel(ctx):
    a, b = cuda_randn((128, 256), torch.bfloat16, 41), cuda_randn((256, 512), torch.bfloat16, 42)
    text = ctx.explain("gemm", a, b)
    print(text)
    assert "cuda" in text


def test_torch_ops_on_cuda(ctx):
    import arbiter.torch_ops  # noqa: F401  (registers the ops)

    a, b = cuda_randn((64, 96), torch.float32, 51), cuda_randn((96, 32), torch.float32, 52)
    d = torch.ops.arbiter.gemm(a, b, None, None, 1.0, 0.0, "none")
    torch.cuda.synchronize()
    assert d.is_cuda
    ref.assert_close(host64(d), host64(a) @ host64(b), np.float32, 96, np.abs(host64(a)) @ np.abs(host64(b)))


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    with arbiter.Context() as context:
        rng = np.random.default_rng(61)
        a_h, b_h = rng.standard_normal((48, 80)).astype(np.float32), rng.standard_normal((80, 24)).astype(np.float32)
        d = context.gemm(cupy.asarray(a_h), cupy.asarray(b_h))
        cupy.cuda.get_current_stream().synchronize()
        assert isinstance(d, cupy.ndarray)
        ref.assert_close(cupy.asnumpy(d), ref.gemm(a_h, b_h), np.float32, 80, np.abs(a_h) @ np.abs(b_h))
        x = cupy.asarray(rng.standard_normal((4, 300)).astype(np.float32))
        s = context.softmax(x)
        cupy.cuda.get_current_stream().synchronize()
        ref.assert_close(cupy.asnumpy(s), ref.softmax(cupy.asnumpy(x)), np.float32, 300, ref.softmax(cupy.asnumpy(x)) + 1e-6)


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES), ids=str)
def test_torch_plans_on_cuda(ctx, dtype):
    m, n, k = 16, 1024, 512
    plan = ctx.plan_gemm(cuda_randn((m, k), dtype, 71), cuda_randn((k, n), dtype, 72), act="relu")
    softmax = ctx.plan_softmax(cuda_randn((m, n), dtype, 73))
    side = torch.cuda.Stream()
    for seed in range(3):
        with torch.cuda.stream(side):  # runs go on the caller's current stream, as calls do
            a, b = cuda_randn((m, k), dtype, 80 + seed), cuda_randn((k, n), dtype, 90 + seed)
            d = plan.run(a, b)
            s = softmax.run(d)
        side.synchronize()
        assert d.is_cuda and d.dtype == dtype and s.is_cuda
        a64, b64 = host64(a), host64(b)
        ref.assert_close(host64(d), ref.gemm(a64, b64, act="relu"), TORCH_DTYPES[dtype], k, np.abs(a64) @ np.abs(b64))
        want = ref.softmax(host64(d))
        ref.assert_close(host64(s), want, TORCH_DTYPES[dtype], n, np.abs(want) + 1e-6)
    assert "cuda" in plan.explain()
    with pytest.raises(arbiter.InvalidArgumentError, match="is on cpu:0, but the plan was made for cuda:0"):
        softmax.run(torch.zeros((m, n), dtype=dtype))


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES), ids=str)
@pytest.mark.parametrize("shape", [(4, 14336), (3, 5, 1001)])
def test_torch_swiglu_calls_and_plans_on_cuda(ctx, dtype, shape):
    n = shape[-1]
    fused = cuda_randn(shape[:-1] + (2 * n,), dtype, 101)
    gate, up = fused[..., :n], fused[..., n:]  # views of one gate/up output: row stride 2n
    y = ctx.swiglu(fused)
    y2 = ctx.swiglu(gate.contiguous(), up.contiguous())
    plan = ctx.plan_swiglu(fused)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # runs on the caller's current stream
        fresh = cuda_randn(fused.shape, dtype, 102)
        y3 = plan.run(fresh)
    side.synchronize()
    torch.cuda.synchronize()
    assert y.is_cuda and y.dtype == dtype and tuple(y.shape) == shape and y3.is_cuda
    for got, source in ((y, fused), (y2, fused), (y3, fresh)):
        want = ref.swiglu(host64(source))
        ref.assert_close(host64(got), want, TORCH_DTYPES[dtype], 1, np.abs(want))
    assert torch.equal(y, ctx.swiglu(gate, up))  # the fused call is its halves' problem
    assert "cuda" in plan.explain()


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES), ids=str)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_torch_rope_calls_and_plans_on_cuda(ctx, dtype, layout):
    if not any(k.op == "rope" and k.device == "cuda" for p in ctx.plugins() if p.status == "loaded" for k in p.kernels):
        pytest.skip("no CUDA rope kernel is loaded")
    tokens, heads, kv_heads, dim = 33, 8, 2, 128
    qkv = cuda_randn((tokens, (heads + 2 * kv_heads) * dim), dtype, 111)
    q = qkv[:, :heads * dim].view(tokens, heads, dim)  # the Q columns of a fused QKV output, in place
    g = torch.Generator(device="cuda").manual_seed(112)
    positions = torch.randint(0, 8192, (tokens,), generator=g, device="cuda", dtype=torch.int32)
    before = host64(qkv)
    assert ctx.rope(q, positions, layout=layout) is q
    plan = ctx.plan_rope(q, positions, layout=layout)
    fresh = cuda_randn(qkv.shape, dtype, 113)
    fresh_before = host64(fresh)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # runs on the caller's current stream
        plan.run(fresh[:, :heads * dim].view(tokens, heads, dim), positions)
    side.synchronize()
    torch.cuda.synchronize()
    p = positions.cpu().numpy()
    for got, source in ((qkv, before), (fresh, fresh_before)):
        x = source[:, :heads * dim].reshape(tokens, heads, dim)
        ref.assert_rope_close(host64(got)[:, :heads * dim].reshape(tokens, heads, dim), x, p, 500000.0, layout,
                              TORCH_DTYPES[dtype])
        assert np.array_equal(host64(got)[:, heads * dim:], source[:, heads * dim:])
    with pytest.raises(arbiter.DTypeError, match="int32"):
        ctx.rope(q, positions.long())  # not converted behind the caller's back
    assert "cuda" in plan.explain()
