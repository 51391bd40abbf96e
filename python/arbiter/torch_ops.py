"""PyTorch custom operators: ``import arbiter.torch_ops`` registers

    torch.ops.arbiter.gemm(a, b, bias=None, c=None, alpha=1.0, beta=0.0, act="none") -> Tensor
    torch.ops.arbiter.rmsnorm(x, weight, eps=1e-6) -> Tensor
    torch.ops.arbiter.rmsnorm_residual(x, residual, weight, eps=1e-6) -> Tensor   (x += residual, in place)
    torch.ops.arbiter.softmax(x) -> Tensor
    torch.ops.arbiter.swiglu(gate, up=None) -> Tensor    (silu(gate) * up; up None: gate is [..., 2n], both halves)
    torch.ops.arbiter.rope(x, positions, theta=500000.0, max_position=8192, layout="half") -> None
        (rotary position embedding of x [..., heads, head_dim] in place: Tensor(a!) x; int32 positions)
    torch.ops.arbiter.attention(q, k, v, causal=False, scale=None) -> Tensor
        (q [batch, q_len, heads, head_dim], k and v [batch, kv_len, kv_heads, head_dim]; the result like q)
    torch.ops.arbiter.mlp(x, norm_weight, gate, up, down, eps=1e-5) -> Tensor
        (the Llama MLP block x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * norm_weight; weights as
        nn.Linear stores them; up None: gate is the fused [2 inter, hidden] gate/up weight)
    torch.ops.arbiter.qkv(x, norm_weight, weight, positions, heads, kv_heads, theta=500000.0,
                          max_position=8192, layout="half", eps=1e-5) -> Tensor
        (the attention block's input: rope on the q and k heads of n @ weight.T, n = rmsnorm(x) *
        norm_weight; weight the fused [(heads + 2 kv_heads) head_dim, hidden] QKV projection as
        nn.Linear stores it; int32 positions; the result [..., heads + 2 kv_heads, head_dim])

with fake (meta) implementations, so that they trace under ``torch.compile`` and run on the
process-wide context (``arbiter.default_context()``). CUDA tensors run on the current stream.
They have no backward: use them for inference."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import default_context


def _data(t: Optional[Tensor]) -> Optional[Tensor]:
    # DLPack refuses tensors that require grad; the ops have no backward anyway.
    return None if t is None else t.detach()


@torch.library.custom_op("arbiter::gemm", mutates_args=())
def gemm(a: Tensor, b: Tensor, bias: Optional[Tensor] = None, c: Optional[Tensor] = None, alpha: float = 1.0,
         beta: float = 0.0, act: str = "none") -> Tensor:
    return default_context().gemm(_data(a), _data(b), bias=_data(bias), c=_data(c), alpha=alpha, beta=beta, act=act)


@gemm.register_fake
def _(a, b, bias=None, c=None, alpha=1.0, beta=0.0, act="none"):
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "arbiter::gemm takes 2-D a and b")
    torch._check(a.shape[1] == b.shape[0], lambda: f"arbiter::gemm: a is {list(a.shape)}, b is {list(b.shape)}")
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op("arbiter::rmsnorm", mutates_args=())
def rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    return default_context().rmsnorm(_data(x), _data(weight), eps=eps)


@rmsnorm.register_fake
def _(x, weight, eps=1e-6):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("arbiter::rmsnorm_residual", mutates_args=("x",))
def rmsnorm_residual(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    return default_context().rmsnorm(x.detach(), _data(weight), eps=eps, residual=_data(residual))


@rmsnorm_residual.register_fake
def _(x, residual, weight, eps=1e-6):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("arbiter::softmax", mutates_args=())
def softmax(x: Tensor) -> Tensor:
    return default_context().softmax(_data(x))


@softmax.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("arbiter::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None) -> Tensor:
    return default_context().attention(_data(q), _data(k), _data(v), causal=causal, scale=scale)


@attention.register_fake
def _(q, k, v, causal=False, scale=None):
    torch._check(q.dim() == 4 and k.dim() == 4 and v.shape == k.shape,
                 lambda: f"arbiter::attention: q must be [batch, q_len, heads, head_dim] and k, v "
                         f"[batch, kv_len, kv_heads, head_dim]; got q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}")
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@torch.library.custom_op("arbiter::swiglu", mutates_args=())
def swiglu(gate: Tensor, up: Optional[Tensor] = None) -> Tensor:
    return default_context().swiglu(_data(gate), _data(up))


@swiglu.register_fake
def _(gate, up=None):
    if up is not None:
        torch._check(up.shape == gate.shape, lambda: f"arbiter::swiglu: gate is {list(gate.shape)}, up is {list(up.shape)}")
        return torch.empty_like(gate, memory_format=torch.contiguous_format)
    torch._check(gate.dim() >= 1 and gate.shape[-1] % 2 == 0,
                 lambda: f"arbiter::swiglu: with up None, gate's last dimension holds both halves and must be even, "
                         f"gate is {list(gate.shape)}")
    return gate.new_empty((*gate.shape[:-1], gate.shape[-1] // 2))


@torch.library.custom_op("arbiter::rope", mutates_args=("x",))
def rope(x: Tensor, positions: Tensor, theta: float = 500000.0, max_position: int = 8192, layout: str = "half") -> None:
    # Returns nothing: a custom op may not return an alias of its input, and x is the result.
    default_context().rope(x.detach(), _data(positions), theta=theta, max_position=max_position, layout=layout)


@rope.register_fake
def _(x, positions, theta=500000.0, max_position=8192, layout="half"):
    torch._check(x.dim() >= 3 and x.shape[-1] % 2 == 0,
                 lambda: f"arbiter::rope: x must be [..., heads, head_dim] with an even head_dim, x is {list(x.shape)}")
    torch._check(positions.dtype == torch.int32,
                 lambda: f"arbiter::rope: positions must be int32 (convert with .to(torch.int32)), got {positions.dtype}")
    torch._check(positions.shape == x.shape[:-2],
                 lambda: f"arbiter::rope: positions must have x's leading shape {list(x.shape[:-2])}, "
                         f"got {list(positions.shape)}")


@torch.library.custom_op("arbiter::mlp", mutates_args=())
def mlp(x: Tensor, norm_weight: Tensor, gate: Tensor, up: Optional[Tensor], down: Tensor, eps: float = 1e-5) -> Tensor:
    # up has no default: it comes before the required down, as in ctx.mlp and the C call.
    return default_context().mlp(_data(x), _data(norm_weight), _data(gate), _data(up), _data(down), eps=eps)


@mlp.register_fake
def _(x, norm_weight, gate, up, down, eps=1e-5):
    def expected():
        return (f"arbiter::mlp: x must be [..., hidden], gate and up [inter, hidden] (gate [2 inter, hidden] with up "
                f"None) and down [hidden, inter]; got x {list(x.shape)}, gate {list(gate.shape)}, "
                f"up {None if up is None else list(up.shape)}, down {list(down.shape)}")

    torch._check(x.dim() >= 1 and gate.dim() == 2 and down.dim() == 2, expected)
    inter = gate.shape[0] if up is not None else gate.shape[0] // 2
    torch._check(gate.shape[1] == x.shape[-1] and tuple(down.shape) == (x.shape[-1], inter) and
                 (up is None or up.shape == gate.shape), expected)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("arbiter::qkv", mutates_args=())
def qkv(x: Tensor, norm_weight: Tensor, weight: Tensor, positions: Tensor, heads: int, kv_heads: int,
        theta: float = 500000.0, max_position: int = 8192, layout: str = "half", eps: float = 1e-5) -> Tensor:
    return default_context().qkv(_data(x), _data(norm_weight), _data(weight), _data(positions), heads, kv_heads,
                                 theta=theta, max_position=max_position, layout=layout, eps=eps)


@qkv.register_fake
def _(x, norm_weight, weight, positions, heads, kv_heads, theta=500000.0, max_position=8192, layout="half", eps=1e-5):
    torch._check(heads >= 1 and kv_heads >= 1,
                 lambda: f"arbiter::qkv: heads ({heads}) and kv_heads ({kv_heads}) must be >= 1")
    total = heads + 2 * kv_heads

    def expected():
        return (f"arbiter::qkv: x must be [..., hidden] and weight [(heads + 2 kv_heads) * head_dim, hidden] with an "
                f"even head_dim (heads + 2 kv_heads = {total}); got x {list(x.shape)}, weight {list(weight.shape)}")

    torch._check(x.dim() >= 1 and weight.dim() == 2, expected)
    torch._check(weight.shape[1] == x.shape[-1] and weight.shape[0] % (2 * total) == 0, expected)
    torch._check(positions.dtype == torch.int32, lambda: (
        f"arbiter::qkv: positions must be int32 (convert with .to(torch.int32)), got {positions.dtype}"))
    torch._check(positions.shape == x.shape[:-1],
                 lambda: f"arbiter::qkv: positions must have x's leading shape {list(x.shape[:-1])}, "
                         f"got {list(positions.shape)}")
    return x.new_empty((*x.shape[:-1], total, weight.shape[0] // total))
