"""torch.ops.arbiter.*: custom ops with fake implementations, traced by torch.compile."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (tools/install-deps.sh installs it unless ARBITER_PYTHON_TORCH=0)")
import arbiter  # noqa: E402
import arbiter.torch_ops  # noqa: E402,F401  (registers the ops)

import reference as ref  # noqa: E402


def test_ops_match_numpy():
    torch.manual_seed(0)
    a, b, bias = torch.randn(24, 40), torch.randn(40, 16), torch.randn(16)
    d = torch.ops.arbiter.gemm(a, b, bias, None, 1.0, 0.0, "gelu_tanh")
    np.testing.assert_allclose(d.numpy(), ref.gemm(a.numpy(), b.numpy(), bias.numpy(), act="gelu_tanh"), rtol=1e-4, atol=1e-4)
    x, w = torch.randn(6, 128), torch.randn(128)
    np.testing.assert_allclose(torch.ops.arbiter.rmsnorm(x, w, 1e-5).numpy(), ref.rmsnorm(x.numpy(), w.numpy(), 1e-5),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(torch.ops.arbiter.softmax(x).numpy(), ref.softmax(x.numpy()), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(6, 128), (3, 5, 33)])
def test_swiglu_matches_numpy(dtype, shape):
    torch.manual_seed(2)
    np_dtype = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: ref.bfloat16}[dtype]
    if np_dtype is None:
        pytest.skip("ml_dtypes is not installed")
    gate, up = (3 * torch.randn(shape)).to(dtype), torch.randn(shape).to(dtype)
    y = torch.ops.arbiter.swiglu(gate, up)
    assert y.dtype == dtype and y.shape == shape
    want = ref.swiglu(gate.float().numpy(), up.float().numpy())
    ref.assert_close(y.float().numpy(), want, np_dtype, 1, np.abs(want))
    fused = torch.cat([gate, up], dim=-1)  # one gate/up GEMM's output: [..., 2n]
    assert torch.equal(torch.ops.arbiter.swiglu(fused), torch.ops.arbiter.swiglu(fused[..., :shape[-1]],
                                                                                  fused[..., shape[-1]:]))
    ref.assert_close(torch.ops.arbiter.swiglu(fused).float().numpy(), want, np_dtype, 1, np.abs(want))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_rotates_x_in_place(dtype, layout):
    np_dtype = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: ref.bfloat16}[dtype]
    if np_dtype is None:
        pytest.skip("ml_dtypes is not installed")
    torch.manual_seed(3)
    tokens, heads, kv_heads, dim = 9, 4, 2, 64
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim).to(dtype)
    q = qkv[:, :heads * dim].view(tokens, heads, dim)  # the Q columns of a fused QKV output
    positions = torch.randint(0, 8192, (tokens,), dtype=torch.int32)
    before = qkv.clone()
    assert torch.ops.arbiter.rope(q, positions, 500000.0, 8192, layout) is None  # mutates x, returns nothing
    ref.assert_rope_close(q.float().numpy(), before[:, :heads * dim].view(tokens, heads, dim).float().numpy(),
                          positions.numpy(), 500000.0, layout, np_dtype)
    assert torch.equal(qkv[:, heads * dim:], before[:, heads * dim:])
    with pytest.raises(arbiter.DTypeError, match="int32"):
        torch.ops.arbiter.rope(q, positions.long())  # int64 positions: converted by the caller, not here


def test_rope_schema_declares_the_mutation():
    schema = torch.ops.arbiter.rope.default._schema
    # "Tensor(a!) x" or, as torch 2.5+ prints its own alias sets, "Tensor(a0!) x"
    assert re.search(r"\(Tensor\(a\d*!\) x, Tensor positions", str(schema)), str(schema)
    assert schema.arguments[0].name == "x" and schema.arguments[0].alias_info.is_write and not schema.returns


def test_rmsnorm_residual_updates_x_in_place():
    x, residual, w = torch.randn(4, 64), torch.randn(4, 64), torch.randn(64)
    want_x = (x + residual).numpy()
    want_y = ref.rmsnorm(want_x, w.numpy(), 1e-6)
    y = torch.ops.arbiter.rmsnorm_residual(x, residual, w, 1e-6)
    np.testing.assert_allclose(x.numpy(), want_x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-4, atol=1e-4)


def test_fake_implementations_trace_under_torch_compile():
    def block(x, w1, w2, norm):
        x = torch.ops.arbiter.mlp(x, norm, w1[:, :32].t(), w1[:, 32:].t(), w1[:, :32], 1e-6)  # transposed: copied
        h = torch.ops.arbiter.rmsnorm(x, norm, 1e-6)
        h = torch.ops.arbiter.gemm(h, w1, None, None, 1.0, 0.0, "none")  # fused gate/up: [8, 2 * 32]
        h = torch.ops.arbiter.swiglu(h)
        h = torch.ops.arbiter.swiglu(h, torch.ops.arbiter.gemm(x, w1[:, :32], None, None, 1.0, 0.0, "none"))
        return torch.ops.arbiter.softmax(torch.ops.arbiter.gemm(h, w2, None, None, 1.0, 0.0, "none"))

    torch.manual_seed(1)
    x, w1, w2, norm = torch.randn(8, 32), torch.randn(32, 64), torch.randn(32, 16), torch.randn(32)
    eager = block(x, w1, w2, norm)
    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    np.testing.assert_allclose(compiled(x, w1, w2, norm).numpy(), eager.numpy(), rtol=1e-6, atol=1e-6)

    def rotate(q, k, positions):  # rope mutates its inputs: the compiled graph writes them back
        torch.ops.arbiter.rope(q, positions, 10000.0, 4096, "half")
        torch.ops.arbiter.rope(k, positions, 10000.0, 4096, "interleaved")
        return q * 2, k + 1

    q, k, positions = torch.randn(8, 4, 16), torch.randn(8, 2, 16), torch.randint(0, 4096, (8,), dtype=torch.int32)
    eager_q, eager_k = q.clone(), k.clone()
    eager = rotate(eager_q, eager_k, positions)
    compiled_q, compiled_k = q.clone(), k.clone()
    compiled = torch.compile(rotate, backend="aot_eager", fullgraph=True)(compiled_q, compiled_k, positions)
    assert torch.equal(compiled[0], eager[0]) and torch.equal(compiled[1], eager[1])
    assert torch.equal(compiled_q, eager_q) and torch.equal(compiled_k, eager_k) and not torch.equal(eager_q, q)
    # The fake kernels give shapes without running anything.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.ops.arbiter.gemm(torch.empty(5, 7), torch.empty(7, 3), None, None, 1.0, 0.0, "none")
        assert fake.shape == (5, 3)
        assert torch.ops.arbiter.swiglu(torch.empty(2, 3, 10)).shape == (2, 3, 5)
        assert torch.ops.arbiter.swiglu(torch.empty(2, 3, 10), torch.empty(2, 3, 10)).shape == (2, 3, 10)
        assert torch.ops.arbiter.rope(torch.empty(2, 3, 4, 8), torch.empty(2, 3, dtype=torch.int32)) is None
        assert torch.ops.arbiter.mlp(torch.empty(2, 3, 16), torch.empty(16), torch.empty(48, 16), None,
                                     torch.empty(16, 24)).shape == (2, 3, 16)
        assert torch.ops.arbiter.qkv(torch.empty(2, 3, 16), torch.empty(16), torch.empty(8 * 4, 16),
                                     torch.empty(2, 3, dtype=torch.int32), 4, 2).shape == (2, 3, 8, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_numpy(dtype, causal):
    """q [b, sq, h, d] and a grouped k, v [b, skv, hkv, d]; a BHSD q passed as its transpose view."""
    torch.manual_seed(3)
    q = torch.randn(2, 4, 3, 16).to(dtype).transpose(1, 2)  # [2, 3, 4, 16] BHSD storage
    k, v = torch.randn(2, 9, 2, 16).to(dtype), torch.randn(2, 9, 2, 16).to(dtype)
    out = torch.ops.arbiter.attention(q, k, v, causal, 0.25)
    assert out.shape == q.shape and out.dtype == dtype
    want = ref.attention(q.float().numpy(), k.float().numpy(), v.float().numpy(), causal, 0.25)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    np.testing.assert_allclose(out.float().numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_mlp_matches_numpy(dtype):
    """nn.Linear weights as a model holds them: gate and up [inter, hidden], down [hidden, inter];
    separate gate and up, and one fused gate/up weight (up None)."""
    np_dtype = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: ref.bfloat16}[dtype]
    if np_dtype is None:
        pytest.skip("ml_dtypes is not installed")
    torch.manual_seed(4)
    hidden, inter = 64, 176
    x, norm_weight = torch.randn(2, 3, hidden).to(dtype), (1 + 0.2 * torch.randn(hidden)).to(dtype)
    gate = torch.nn.Linear(hidden, inter, bias=False).weight.detach().to(dtype)
    up = torch.nn.Linear(hidden, inter, bias=False).weight.detach().to(dtype)
    down = torch.nn.Linear(inter, hidden, bias=False).weight.detach().to(dtype)
    y = torch.ops.arbiter.mlp(x, norm_weight, gate, up, down, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    host = [t.float().numpy().astype(np_dtype) for t in (x, norm_weight, gate, up, down)]
    ref.assert_mlp_close(y.float().numpy(), *host, np_dtype)
    # Spare rows after the fused weight: see reference.fused_gate_up.
    fused = torch.ops.arbiter.mlp(x, norm_weight, torch.cat([gate, up, up])[:2 * inter], None, down)
    ref.assert_mlp_close(fused.float().numpy(), *host, np_dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_qkv_matches_numpy(dtype, layout):
    """The fused QKV weight as a model's nn.Linear holds it, [(heads + 2 kv_heads) * head_dim, hidden];
    the result [batch, seq, heads + 2 kv_heads, head_dim], q, k and v its views."""
    np_dtype = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: ref.bfloat16}[dtype]
    if np_dtype is None:
        pytest.skip("ml_dtypes is not installed")
    torch.manual_seed(5)
    hidden, heads, kv_heads, dim = 64, 4, 2, 16
    x, norm_weight = torch.randn(2, 3, hidden).to(dtype), (1 + 0.2 * torch.randn(hidden)).to(dtype)
    weight = torch.nn.Linear(hidden, (heads + 2 * kv_heads) * dim, bias=False).weight.to(dtype)
    assert weight.requires_grad  # detached by the op: it has no backward
    positions = torch.randint(0, 8192, (2, 3), dtype=torch.int32)
    y = torch.ops.arbiter.qkv(x, norm_weight, weight, positions, heads, kv_heads, 500000.0, 8192, layout, 1e-5)
    assert y.dtype == dtype and y.shape == (2, 3, heads + 2 * kv_heads, dim)
    host = [t.detach().float().numpy().astype(np_dtype) for t in (x, norm_weight, weight)]
    ref.assert_qkv_close(y.detach().float().numpy(), *host, positions.numpy(), heads, kv_heads, np_dtype, layout=layout)
    q, k, v = y.split([heads, kv_heads, kv_heads], dim=2)  # views, as attention takes them
    assert q.data_ptr() == y.data_ptr() and k.shape == v.shape == (2, 3, kv_heads, dim)
    with pytest.raises(arbiter.DTypeError, match="int32"):
        torch.ops.arbiter.qkv(x, norm_weight, weight, positions.long(), heads, kv_heads)


def test_qkv_traces_under_torch_compile():
    def attention_block(x, norm_weight, weight, positions):
        y = torch.ops.arbiter.qkv(x, norm_weight, weight, positions, 4, 2, 10000.0, 4096, "half", 1e-6)
        q, k, v = y.split([4, 2, 2], dim=2)
        return torch.ops.arbiter.attention(q, k, v, True, None)

    torch.manual_seed(6)
    x, norm_weight, weight = torch.randn(1, 8, 32), torch.randn(32), torch.randn(8 * 16, 32) / 6
    positions = torch.arange(8, dtype=torch.int32).view(1, 8)
    eager = attention_block(x, norm_weight, weight, positions)
    compiled = torch.compile(attention_block, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(x, norm_weight, weight, positions), eager) and eager.shape == (1, 8, 4, 16)


def test_opcheck():
    # torch.library.opcheck: schema, fake kernel and dispatch registrations agree.
    a, b = torch.randn(8, 4), torch.randn(4, 6)
    torch.library.opcheck(torch.ops.arbiter.gemm.default, (a, b, None, None, 1.0, 0.0, "none"))
    torch.library.opcheck(torch.ops.arbiter.softmax.default, (torch.randn(3, 10),))
    torch.library.opcheck(torch.ops.arbiter.swiglu.default, (torch.randn(3, 10), torch.randn(3, 10)))
    torch.library.opcheck(torch.ops.arbiter.swiglu.default, (torch.randn(2, 3, 10),))
    torch.library.opcheck(torch.ops.arbiter.attention.default,
                          (torch.randn(1, 2, 4, 8), torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8), True, None))
    x, norm_weight, down = torch.randn(3, 16), torch.randn(16), torch.randn(16, 24)
    torch.library.opcheck(torch.ops.arbiter.mlp.default,
                          (x, norm_weight, torch.randn(24, 16), torch.randn(24, 16), down, 1e-5))
    torch.library.opcheck(torch.ops.arbiter.mlp.default,  # fused, with spare rows after it (reference.fused_gate_up)
                          (x.view(1, 3, 16), norm_weight, torch.randn(72, 16)[:48], None, down, 1e-6))
    positions = torch.tensor([0, 5, 4095], dtype=torch.int32)
    for layout in ("half", "interleaved"):
        torch.library.opcheck(torch.ops.arbiter.rope.default, (torch.randn(3, 2, 8), positions, 10000.0, 4096, layout))
        torch.library.opcheck(torch.ops.arbiter.qkv.default,
                              (x, norm_weight, torch.randn(8 * 4, 16), positions, 4, 2, 10000.0, 4096, layout, 1e-5))
    torch.library.opcheck(torch.ops.arbiter.qkv.default,  # N-d x, positions of its leading shape; the defaults
                          (x.view(1, 3, 16), norm_weight, torch.randn(3 * 8, 16), positions.view(1, 3), 1, 1))


def test_tensors_that_require_grad_are_accepted():
    a = torch.randn(4, 4, requires_grad=True)
    d = torch.ops.arbiter.gemm(a, a, None, None, 1.0, 0.0, "none")
    assert d.shape == (4, 4)
