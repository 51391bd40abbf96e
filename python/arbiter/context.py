"""arbiter.Context: a context of the C library (its configuration, plugins, tuning table and
dispatch), with the operations on tensors of any DLPack framework, and explain / plugins /
verify / tune."""

from __future__ import annotations

import json
import os
from typing import Callable, Iterable, Optional, Union

import numpy as np

from . import _frameworks, plans, reports
from ._arbiter import _Context
from .errors import InvalidArgumentError, UnsupportedError

_ndarray = np.ndarray
_NumPy = _frameworks.NumPy
_RETRY_IN_GENERAL_PATH = _frameworks.RETRY_IN_GENERAL_PATH

_ACTIVATIONS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu": 2, "gelu_erf": 3, "silu": 4}
# arb_rope_layout: which elements of a head turn together.
_ROPE_LAYOUTS = {"half": 0, "interleaved": 1}


def _choice(argument, value, table) -> int:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            1, f"{argument}={value!r}: expected one of {', '.join(repr(k) for k in table)}"
        ) from None


def _activation(act) -> int:
    return _choice("act", act, _ACTIVATIONS)


def _rope_layout(layout) -> int:
    return _choice("layout", layout, _ROPE_LAYOUTS)


def _swiglu_shape(gate, up):
    """The shape of swiglu's result: gate's, or with up None (gate holds both halves) gate's with
    its last dimension halved. A gate the library refuses (no dimension, an odd last one) gets a
    shape all the same: the library names what is wrong."""
    shape = tuple(gate.shape)
    return shape if up is not None or not shape else shape[:-1] + (shape[-1] // 2,)


def _check_mlp_down(down):
    """mlp's down projection is required; it follows the optional up in the argument order (the
    C call's), so it cannot be a plain positional argument without a default."""
    if down is None:
        raise InvalidArgumentError(
            1, "mlp: down (the [hidden, inter] down projection) is required; with a fused gate/up weight, "
               "pass it by name: ctx.mlp(x, norm_weight, gate_up, down=down)")


def _qkv_shape(x, weight, heads, kv_heads):
    """The shape of qkv's result: x's leading shape, then (heads + 2 kv_heads, head_dim), head_dim
    from the rows of the fused weight [(heads + 2 kv_heads) * head_dim, hidden]. What the shape
    needs is checked here; the rest (x, head_dim even, the weight's columns) by the library."""
    if heads < 1 or kv_heads < 1:
        raise InvalidArgumentError(1, f"qkv: heads ({heads}) and kv_heads ({kv_heads}) must be >= 1")
    shape = getattr(weight, "shape", None)
    if shape is None:
        raise TypeError(f"qkv: weight: expected an array with __dlpack__ (NumPy, PyTorch, JAX, CuPy...), "
                        f"got {type(weight).__name__}")
    if len(shape) != 2:
        raise InvalidArgumentError(
            1, f"qkv: weight must be 2-D (the fused QKV projection [(heads + 2 kv_heads) * head_dim, hidden]), "
               f"got {len(shape)} dimensions")
    total = heads + 2 * kv_heads
    if shape[0] % total:
        raise InvalidArgumentError(
            1, f"qkv: weight has {shape[0]} rows, not a multiple of heads + 2 kv_heads = {heads} + 2 * {kv_heads} = "
               f"{total}: its rows are the q, k and v heads of head_dim rows each")
    return tuple(x.shape[:-1]) + (total, shape[0] // total)


def _config_arguments(config):
    """(config_path, config_toml) from Context's `config`: None, a path, or TOML text."""
    if config is None:
        return None, None
    if isinstance(config, os.PathLike):
        return os.fspath(config), None
    if not isinstance(config, str):
        raise TypeError(f"config: expected None, a path or TOML text, got {type(config).__name__}")
    # TOML text has a newline, '=' or '[' ; a path has none of them at its start.
    if "\n" in config or "=" in config or config.lstrip().startswith("["):
        return None, config
    return config, None


class Context:
    """A context of the runtime: ``Context()`` (the embedded default configuration),
    ``Context("arbiter.toml")`` (a file) or ``Context('[dispatch]\\non_miss = "heuristic"')``
    (TOML text: a string with a newline, an '=' or a leading '['; pass a ``pathlib.Path`` for a
    file whose name has one). Thread-safe: threads may call one context at once. ``close()`` (or a ``with``
    block) unloads the plugins; so does garbage collection."""

    def __init__(self, config: Union[None, str, os.PathLike] = None):
        path, toml = _config_arguments(config)
        self._c = _Context(path, toml)

    def close(self) -> None:
        self._c.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- operations --------------------------------------------------------------------

    def gemm(self, a, b, bias=None, c=None, alpha: float = 1.0, beta: float = 0.0, act: str = "none", out=None):
        """``act(alpha * a @ b + beta * c + bias)``: a is [m, k], b is [k, n], c is [m, n] (read
        only when beta != 0; it may be `out` itself), bias is [n]. Transposed views of a and b
        (``x.T``) are passed without a copy; other strided views are copied. Returns `out`, or a
        new [m, n] array of the caller's framework."""
        # The fast path: operands the extension takes as they are. Anything else (a view to copy,
        # a NumPy bfloat16 array, a bad argument) fails before the library is called, and the
        # general path below does it all again, properly.
        try:
            fw = _NumPy if type(a) is _ndarray else _frameworks.framework_of(a)
            if out is None:
                out = fw.empty((a.shape[0], b.shape[1]), a)
            self._c.gemm(a, b, c if beta else None, bias, out, _ACTIVATIONS[act], alpha, beta,
                         0 if fw is _NumPy else fw.stream(a), 0, False)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._gemm(a, b, bias, c, alpha, beta, act, out, False)

    def rmsnorm(self, x, weight, eps: float = 1e-6, residual=None, out=None):
        """``x / sqrt(mean(x**2, -1) + eps) * weight`` over the last dimension. With `residual`,
        x is first updated in place (``x += residual``) and the sum is normalised."""
        if residual is None:  # the fast path (see gemm); with a residual, x is written: checked first
            try:
                fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
                if out is None:
                    out = fw.empty(tuple(x.shape), x)
                self._c.rmsnorm(x, None, weight, out, eps, 0 if fw is _NumPy else fw.stream(x), 0, False)
                return out if fw is _NumPy else fw.result(out)
            except _RETRY_IN_GENERAL_PATH:
                pass
        return self._rmsnorm(x, weight, eps, residual, out, False)

    def softmax(self, x, out=None):
        """Softmax over the last dimension (f32 math for every dtype)."""
        try:  # the fast path (see gemm)
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if out is None:
                out = fw.empty(tuple(x.shape), x)
            self._c.softmax(x, out, 0 if fw is _NumPy else fw.stream(x), 0, False)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._softmax(x, out, False)

    def swiglu(self, gate, up=None, out=None):
        """``silu(gate) * up`` elementwise, ``silu(g) = g / (1 + exp(-g))`` (f32 math for every
        dtype): the activation of a Llama MLP block. gate and up have one shape [..., n]. Without
        `up`, gate is the [..., 2n] output of one fused gate/up GEMM (its first n columns the gate,
        its last n the up projection) and the result is [..., n]. `out` must not overlap gate or
        up. Returns `out`, or a new array of the caller's framework."""
        try:  # the fast path (see gemm)
            fw = _NumPy if type(gate) is _ndarray else _frameworks.framework_of(gate)
            if out is None:
                out = fw.empty(_swiglu_shape(gate, up), gate)
            self._c.swiglu(gate, up, out, 0 if fw is _NumPy else fw.stream(gate), 0, False)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._swiglu(gate, up, out, False)

    def rope(self, x, positions, theta: float = 500000.0, max_position: int = 8192, layout: str = "half",
             stream=None):
        """Rotary position embedding, **in place**: x [..., heads, head_dim] (f32, f16 or bf16; the
        leading dimensions are the tokens) has each pair of a head turned by the angle
        ``position * theta ** (-2i / head_dim)``, i the pair's index: ``x1, x2 = x1 cos - x2 sin,
        x2 cos + x1 sin``. `layout` "half" pairs element i with i + head_dim/2 (Hugging Face's
        rotate_half), "interleaved" pairs 2i with 2i + 1 (Meta's Llama reference). positions are
        int32 (convert int64 ones first), of x's leading shape, each in [0, max_position) (checked
        for CPU tensors). x keeps its strides: a view with a head stride of its own (the Q or K
        columns of a fused QKV output) turns where it is; it is never copied, so it must be
        writable and have a contiguous last dimension. `stream`: None runs on the framework's
        current stream; or an int handle or a stream object. Returns x."""
        try:  # the fast path (see gemm); a read-only x is refused by the general path
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if fw.writable(x):
                self._c.rope(x, positions, theta, max_position, _ROPE_LAYOUTS[layout],
                             _frameworks.stream_handle(fw, x, stream), 0, False)
                return x
        except _RETRY_IN_GENERAL_PATH:
            pass
        return self._rope(x, positions, theta, max_position, layout, False, stream)

    def attention(self, q, k, v, causal: bool = False, scale: Optional[float] = None, out=None):
        """Scaled dot-product attention, per batch and head ``softmax(scale * q @ k^T) @ v`` (f32
        math for every dtype). q [batch, q_len, heads, head_dim], k and v [batch, kv_len,
        kv_heads, head_dim] with heads a multiple of kv_heads (grouped-query attention: query
        head h reads key/value head h // (heads // kv_heads)); the result is like q. `causal`
        masks the keys after each query, the mask aligned to the end of the keys (query i sees
        key j when j <= i + kv_len - q_len), so a decode step is q_len = 1 against the whole
        cache. `scale` None is 1 / sqrt(head_dim). Any strides but the last dimension's: BSHD,
        BHSD (a ``transpose(1, 2)`` view) and the Q, K and V columns of a fused QKV output are
        read where they lie. `out` must not overlap q, k or v. Returns `out`, or a new array of
        the caller's framework."""
        scale_value = 0.0 if scale is None else float(scale)
        try:  # the fast path (see gemm)
            fw = _NumPy if type(q) is _ndarray else _frameworks.framework_of(q)
            if out is None:
                out = fw.empty(tuple(q.shape), q)
            self._c.attention(q, k, v, out, bool(causal), scale_value, 0 if fw is _NumPy else fw.stream(q), 0, False)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._attention(q, k, v, causal, scale, out, False)

    def mlp(self, x, norm_weight, gate, up=None, down=None, eps: float = 1e-5, out=None, stream=None):
        """The MLP block of a Llama decoder layer, ``x + down(silu(gate(n)) * up(n))`` with
        ``n = rmsnorm(x) * norm_weight`` (``x / sqrt(mean(x**2, -1) + eps) * norm_weight``). x is
        [..., hidden]; the weights are as ``torch.nn.Linear`` stores them: gate and up [inter,
        hidden] (``gate(n) = n @ gate.T``), down [hidden, inter], norm_weight [hidden]. Without
        `up`, gate is the fused [2 * inter, hidden] gate/up weight (its first inter rows the gate,
        its last inter rows up); `down` is then given by name. One dtype for every tensor (f32,
        f16 or bf16); a kernel may round the intermediates to it, as the chain of single ops
        does. Weights with padded rows (``big[:, :hidden]``) are read where they lie; transposed
        or otherwise strided weights are copied. `out` is like x and must not overlap any input
        (no in-place form). `stream`: None runs on the framework's current stream; or an int
        handle or a stream object. Returns `out`, or a new array of the caller's framework
        (bound once for many runs: :meth:`plan_mlp`)."""
        try:  # the fast path (see gemm)
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if out is None:
                out = fw.empty(tuple(x.shape), x)
            self._c.mlp(x, norm_weight, gate, up, down, out, eps, _frameworks.stream_handle(fw, x, stream), 0, False)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._mlp(x, norm_weight, gate, up, down, eps, out, False, stream)

    def qkv(self, x, norm_weight, weight, positions, heads: int, kv_heads: int, theta: float = 500000.0,
            max_position: int = 8192, layout: str = "half", eps: float = 1e-5, out=None, stream=None):
        """The input of a Llama attention block: ``y = n @ weight.T`` with ``n = rmsnorm(x) *
        norm_weight`` (``x / sqrt(mean(x**2, -1) + eps) * norm_weight``), then rotary position
        embedding (as :meth:`rope`: positions, theta, max_position, layout) on y's q and k heads.
        x is [..., hidden]; weight is the fused QKV projection [(heads + 2 * kv_heads) * head_dim,
        hidden] as ``torch.nn.Linear`` stores it (its rows: q's heads, then k's, then v's);
        norm_weight [hidden]; positions int32 of x's leading shape, each in [0, max_position)
        (checked for CPU tensors). The result is [..., heads + 2 * kv_heads, head_dim] with the
        heads side by side, so that q, k and v are its views ``y[..., :heads, :]``,
        ``y[..., heads:heads + kv_heads, :]`` and ``y[..., heads + kv_heads:, :]``. One dtype for
        x, the weights and out (f32, f16 or bf16); a kernel may round n and the projection to it,
        as the chain of single ops does. A weight with padded rows (``big[:, :hidden]``) is read
        where it lies; transposed or otherwise strided inputs are copied. `out` (its heads side by
        side, a row stride of its own) must not overlap any input. `stream` as :meth:`rope`'s.
        Returns `out`, or a new array of the caller's framework."""
        try:  # the fast path (see gemm)
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if out is None:
                out = fw.empty(_qkv_shape(x, weight, heads, kv_heads), x)
            self._c.qkv(x, norm_weight, weight, positions, out, heads, kv_heads, theta, max_position,
                        _ROPE_LAYOUTS[layout], eps, _frameworks.stream_handle(fw, x, stream), 0, False)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._qkv(x, norm_weight, weight, positions, heads, kv_heads, theta, max_position, layout, eps, out,
                             False, stream)

    # ---- plans: an operation bound once, run many times ----------------------------------

    def plan_gemm(self, a, b, bias=None, c=None, alpha: float = 1.0, beta: float = 0.0, act: str = "none",
                  out=None) -> "plans.GemmPlan":
        """The arguments of :meth:`gemm`, bound once: checked, the kernel chosen (and verified)
        now. ``plan.run(a, b, bias=None, c=None, out=None)`` then takes tensors of the same shapes,
        strides, dtype and device; alpha, beta and act are the plan's. `out` only describes the
        output (nothing is written); c given as `out` itself makes a plan in place."""
        fw = _frameworks.framework_of(a)
        activation = _activation(act)
        if beta == 0:
            c = None  # never read, so not part of the plan
        if out is None:
            out = fw.empty(self._gemm_shape(a, b), a)  # describes the runs' outputs; nothing is written
        c_plan = _frameworks.call_with_copies(out, [a, b, c, bias, out], ("a", "b", "c", "bias"), lambda ops, mask: (
            self._c.plan_gemm(ops[0], ops[1], ops[2], ops[3], ops[4], activation, alpha, beta, mask)))
        return plans.GemmPlan(self, c_plan, tuple(out.shape), uses_c=c is not None)

    def plan_rmsnorm(self, x, weight, eps: float = 1e-6, residual=None, out=None) -> "plans.RMSNormPlan":
        """The arguments of :meth:`rmsnorm`, bound once (see :meth:`plan_gemm`);
        ``plan.run(x, weight, residual=None, out=None)``. A plan made with a residual updates x in
        place at each run, so its x is never copied."""
        fw = _frameworks.framework_of(x)
        _frameworks.check_residual_target(fw, x, residual)
        if out is None:
            out = fw.empty(tuple(x.shape), x)
        copyable = ("residual", "weight") if residual is not None else ("x", "residual", "weight")
        c_plan = _frameworks.call_with_copies(out, [x, residual, weight, out], copyable, lambda ops, mask: (
            self._c.plan_rmsnorm(ops[0], ops[1], ops[2], ops[3], eps, mask)), names=("x", "residual", "weight"))
        return plans.RMSNormPlan(self, c_plan, tuple(out.shape), has_residual=residual is not None)

    def plan_softmax(self, x, out=None) -> "plans.SoftmaxPlan":
        """The arguments of :meth:`softmax`, bound once (see :meth:`plan_gemm`); ``plan.run(x, out=None)``."""
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(tuple(x.shape), x)
        c_plan = _frameworks.call_with_copies(out, [x, out], ("x",), lambda ops, mask: (
            self._c.plan_softmax(ops[0], ops[1], mask)))
        return plans.SoftmaxPlan(self, c_plan, tuple(out.shape))

    def plan_swiglu(self, gate, up=None, out=None) -> "plans.SwiGLUPlan":
        """The arguments of :meth:`swiglu`, bound once (see :meth:`plan_gemm`);
        ``plan.run(gate, up=None, out=None)``, with `up` given exactly when the plan was made with
        one. A fused [..., 2n] gate (up=None) is planned as its two halves, views
        ``gate[..., :n]`` and ``gate[..., n:]`` (the library plans gate and up as two tensors),
        and each run splits its gate the same way: the plan runs on fused tensors like the one it
        was made with."""
        fw = _frameworks.framework_of(gate)
        if out is None:
            out = fw.empty(_swiglu_shape(gate, up), gate)

        def plan(gate, up):
            return _frameworks.call_with_copies(out, [gate, up, out], ("gate", "up"), lambda ops, mask: (
                self._c.plan_swiglu(ops[0], ops[1], ops[2], mask)))

        halves = _frameworks.halves(fw, gate) if up is None else None
        if halves is None:  # separate tensors; or a gate the library refuses (it names what is wrong)
            return plans.SwiGLUPlan(self, plan(gate, up), tuple(out.shape), None)
        try:
            return plans.SwiGLUPlan(self, plan(*halves), tuple(out.shape), tuple(gate.shape))
        except InvalidArgumentError as refused:
            error = refused
        # Refused as the call refuses it, of the whole gate rather than of its halves: the library
        # checks the fused arguments before it says that it cannot plan them.
        try:
            plan(gate, None)
        except UnsupportedError:
            pass  # the fused arguments are right: the halves' refusal stands
        except InvalidArgumentError as refused:
            error = refused
        raise error from None

    def plan_rope(self, x, positions, theta: float = 500000.0, max_position: int = 8192,
                  layout: str = "half") -> "plans.RopePlan":
        """The arguments of :meth:`rope`, bound once (see :meth:`plan_gemm`); nothing is rotated
        now. ``plan.run(x, positions, stream=None)`` rotates x in place and returns it; theta,
        max_position and layout are the plan's. Runs check CPU positions against max_position, as
        the call does."""
        layout_code = _rope_layout(layout)
        c_plan = _frameworks.call_rope(x, positions, lambda ops, mask: self._c.plan_rope(
            ops[0], ops[1], theta, max_position, layout_code, mask))
        return plans.RopePlan(self, c_plan, tuple(x.shape))

    def plan_attention(self, q, k, v, causal: bool = False, scale: Optional[float] = None,
                       out=None) -> "plans.AttentionPlan":
        """The arguments of :meth:`attention`, bound once (see :meth:`plan_gemm`);
        ``plan.run(q, k, v, out=None)`` with tensors of the same shapes, strides, dtype and
        device (a decode loop's next token, the cache at new addresses); causal and scale are
        the plan's."""
        fw = _frameworks.framework_of(q)
        if out is None:
            out = fw.empty(tuple(q.shape), q)
        scale_value = 0.0 if scale is None else float(scale)
        c_plan = _frameworks.call_with_copies(out, [q, k, v, out], ("q", "k", "v"), lambda ops, mask: (
            self._c.plan_attention(ops[0], ops[1], ops[2], ops[3], bool(causal), scale_value, mask)))
        return plans.AttentionPlan(self, c_plan, tuple(out.shape))

    def plan_mlp(self, x, norm_weight, gate, up=None, down=None, eps: float = 1e-5, out=None) -> "plans.MLPPlan":
        """The arguments of :meth:`mlp`, bound once (see :meth:`plan_gemm`);
        ``plan.run(x, norm_weight, gate, up=None, down=None, out=None, stream=None)`` with tensors
        of the same shapes, strides, dtype and device, `up` given exactly when the plan was made
        with one (without it, each run's gate is the fused [2 * inter, hidden] gate/up weight, as
        in the call); eps is the plan's."""
        _check_mlp_down(down)
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(tuple(x.shape), x)
        c_plan = _frameworks.call_with_copies(
            out, [x, norm_weight, gate, up, down, out], ("x", "norm_weight", "gate", "up", "down"), lambda ops, mask: (
                self._c.plan_mlp(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], eps, mask)))
        return plans.MLPPlan(self, c_plan, tuple(out.shape), has_up=up is not None)

    def plan_qkv(self, x, norm_weight, weight, positions, heads: int, kv_heads: int, theta: float = 500000.0,
                 max_position: int = 8192, layout: str = "half", eps: float = 1e-5, out=None) -> "plans.QKVPlan":
        """The arguments of :meth:`qkv`, bound once (see :meth:`plan_gemm`);
        ``plan.run(x, norm_weight, weight, positions, out=None, stream=None)`` with tensors of the
        same shapes, strides, dtype and device; heads, kv_heads, theta, max_position, layout and
        eps are the plan's. Runs check CPU positions against max_position, as the call does."""
        layout_code = _rope_layout(layout)
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(_qkv_shape(x, weight, heads, kv_heads), x)
        c_plan = _frameworks.call_with_copies(
            out, [x, norm_weight, weight, positions, out], ("x", "norm_weight", "weight", "positions"),
            lambda ops, mask: self._c.plan_qkv(ops[0], ops[1], ops[2], ops[3], ops[4], heads, kv_heads, theta,
                                               max_position, layout_code, eps, mask))
        return plans.QKVPlan(self, c_plan, tuple(out.shape))

    @staticmethod
    def _gemm_shape(a, b):
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise InvalidArgumentError(
                1, f"gemm takes 2-D a and b, got a of shape {tuple(a.shape)} and b of shape {tuple(b.shape)}"
            )
        return (a.shape[0], b.shape[1])

    # ---- explain, plugins, verify, tune -----------------------------------------------

    def explain(self, op_or_problem: str, *tensors, **kwargs) -> str:
        """Why a kernel is (or would be) chosen: ``ctx.explain("gemm bf16 m=128 n=4096 k=4096")``
        for a problem in the problem syntax, or ``ctx.explain("gemm", a, b, bias=...)`` with the
        same arguments as the operation."""
        if not tensors and not kwargs:
            return self._c.explain_problem(op_or_problem)
        call = {"gemm": self._gemm, "rmsnorm": self._rmsnorm, "softmax": self._softmax,
                "swiglu": self._swiglu, "rope": self._rope, "attention": self._attention,
                "mlp": self._mlp, "qkv": self._qkv}.get(op_or_problem)
        if call is None:
            raise InvalidArgumentError(1, f"explain: unknown op {op_or_problem!r} "
                                          "(gemm, rmsnorm, softmax, swiglu, rope, attention, mlp or qkv)")
        defaults = {
            "gemm": dict(bias=None, c=None, alpha=1.0, beta=0.0, act="none", out=None),
            "rmsnorm": dict(eps=1e-6, residual=None, out=None),
            "softmax": dict(out=None),
            "swiglu": dict(up=None, out=None),
            "rope": dict(theta=500000.0, max_position=8192, layout="half"),
            "attention": dict(causal=False, scale=None, out=None),
            "mlp": dict(up=None, down=None, eps=1e-5, out=None),
            "qkv": dict(theta=500000.0, max_position=8192, layout="half", eps=1e-5, out=None),
        }[op_or_problem]
        # The arguments that may be given by position, in the call's order (swiglu's and mlp's up
        # are optional; qkv's head counts are required, as in the call).
        names = {"gemm": ("a", "b"), "rmsnorm": ("x", "weight"), "softmax": ("x",),
                 "swiglu": ("gate", "up"), "rope": ("x", "positions"), "attention": ("q", "k", "v"),
                 "mlp": ("x", "norm_weight", "gate", "up", "down"),
                 "qkv": ("x", "norm_weight", "weight", "positions", "heads", "kv_heads")}[op_or_problem]
        values = dict(zip(names, tensors))
        values.update(kwargs)
        unknown = set(values) - set(names) - set(defaults)
        if unknown or len(tensors) > len(names):
            raise TypeError(f"explain({op_or_problem!r}): unexpected arguments {sorted(unknown)}")
        merged = {**defaults, **values}
        missing = [k for k in names if k not in merged]
        if missing:
            raise TypeError(f"explain({op_or_problem!r}): missing arguments {missing}")
        return call(*[merged[k] for k in (*names, *(k for k in defaults if k not in names))], True)

    def plugins(self) -> list:
        """Every plugin the context saw (loaded, disabled and rejected, with the reason) and its
        kernels, as :class:`arbiter.reports.Plugin` objects."""
        return [reports.Plugin.from_dict(p) for p in self._c.plugins()]

    def verify(self, problem: str, kernel: Optional[str] = None, full: bool = False) -> "reports.VerifyReport":
        """The verification gate's verdict on every kernel of `problem` (or on `kernel` alone);
        ``full=True`` also checks the problem at its own size with new seeds."""
        return reports.VerifyReport.from_dict(json.loads(self._c.verify(problem, kernel, bool(full))))

    def tune(
        self,
        suite_or_problems: Union[str, os.PathLike, Iterable[str]],
        table: Union[None, str, os.PathLike] = None,
        progress: Union[bool, Callable[[int, int, str], None]] = True,
    ) -> "reports.TuneReport":
        """Verify and time every candidate of each problem and keep the fastest. Takes a shape
        suite file (format: docs/suite-format.md), one problem, or a list of problems.
        `table`: None writes into the context's own table (table.path of its configuration,
        used by its dispatch at once); a path writes there; "" writes nowhere. `progress`: True
        shows a tqdm bar when tqdm is installed, or give a callable(done, total, problem)."""
        suite, problems = None, None
        if isinstance(suite_or_problems, os.PathLike) or (
            isinstance(suite_or_problems, str) and os.path.isfile(suite_or_problems)
        ):
            suite = os.fspath(suite_or_problems)
        elif isinstance(suite_or_problems, str):
            problems = [suite_or_problems]
        else:
            problems = [str(p) for p in suite_or_problems]
        table_path = None if table is None else os.fspath(table)
        callback, close = _progress_callback(progress)
        try:
            text = self._c.tune(problems, suite, table_path, callback)
        finally:
            close()
        return reports.TuneReport.from_dict(json.loads(text))

    # ---- the calls, shared by the operations and explain --------------------------------

    def _gemm(self, a, b, bias, c, alpha, beta, act, out, explain):
        fw = _frameworks.framework_of(a)
        activation = _activation(act)
        if beta == 0:
            c = None  # never read: no need to describe it
        if out is None:
            out = fw.empty(self._gemm_shape(a, b), a)
        operands = [a, b, c, bias, out]
        return self._call(fw, out, operands, ("a", "b", "c", "bias"), lambda ops, mask: self._c.gemm(
            ops[0], ops[1], ops[2], ops[3], ops[4], activation, alpha, beta, fw.stream(a), mask, explain), explain)

    def _rmsnorm(self, x, weight, eps, residual, out, explain):
        fw = _frameworks.framework_of(x)
        if not explain:
            _frameworks.check_residual_target(fw, x, residual)
        if out is None:
            out = fw.empty(tuple(x.shape), x)
        # With a residual, x is written: a copy of it would not be updated, so it is never copied.
        copyable = ("residual", "weight") if residual is not None else ("x", "residual", "weight")
        return self._call(fw, out, [x, residual, weight, out], copyable, lambda ops, mask: self._c.rmsnorm(
            ops[0], ops[1], ops[2], ops[3], eps, fw.stream(x), mask, explain), explain, names=("x", "residual", "weight"))

    def _softmax(self, x, out, explain):
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(tuple(x.shape), x)
        return self._call(fw, out, [x, out], ("x",), lambda ops, mask: self._c.softmax(
            ops[0], ops[1], fw.stream(x), mask, explain), explain)

    def _swiglu(self, gate, up, out, explain):
        fw = _frameworks.framework_of(gate)
        if out is None:
            out = fw.empty(_swiglu_shape(gate, up), gate)
        return self._call(fw, out, [gate, up, out], ("gate", "up"), lambda ops, mask: self._c.swiglu(
            ops[0], ops[1], ops[2], fw.stream(gate), mask, explain), explain)

    def _rope(self, x, positions, theta, max_position, layout, explain, stream=None):
        layout_code = _rope_layout(layout)
        handle = 0 if explain else _frameworks.stream_handle(_frameworks.framework_of(x), x, stream)
        report = _frameworks.call_rope(x, positions, lambda ops, mask: self._c.rope(
            ops[0], ops[1], theta, max_position, layout_code, handle, mask, explain), in_place=not explain)
        return report if explain else x

    def _attention(self, q, k, v, causal, scale, out, explain):
        fw = _frameworks.framework_of(q)
        if out is None:
            out = fw.empty(tuple(q.shape), q)
        scale_value = 0.0 if scale is None else float(scale)
        return self._call(fw, out, [q, k, v, out], ("q", "k", "v"), lambda ops, mask: self._c.attention(
            ops[0], ops[1], ops[2], ops[3], bool(causal), scale_value, fw.stream(q), mask, explain), explain)

    def _mlp(self, x, norm_weight, gate, up, down, eps, out, explain, stream=None):
        _check_mlp_down(down)
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(tuple(x.shape), x)
        handle = 0 if explain else _frameworks.stream_handle(fw, x, stream)
        return self._call(fw, out, [x, norm_weight, gate, up, down, out], ("x", "norm_weight", "gate", "up", "down"),
                          lambda ops, mask: self._c.mlp(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], eps, handle,
                                                        mask, explain), explain)

    def _qkv(self, x, norm_weight, weight, positions, heads, kv_heads, theta, max_position, layout, eps, out, explain,
             stream=None):
        layout_code = _rope_layout(layout)
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(_qkv_shape(x, weight, heads, kv_heads), x)
        handle = 0 if explain else _frameworks.stream_handle(fw, x, stream)
        inputs = ("x", "norm_weight", "weight", "positions")
        return self._call(fw, out, [x, norm_weight, weight, positions, out], inputs,
                          lambda ops, mask: self._c.qkv(ops[0], ops[1], ops[2], ops[3], ops[4], heads, kv_heads, theta,
                                                        max_position, layout_code, eps, handle, mask, explain), explain)

    @staticmethod
    def _call(fw, out, operands, copyable, call, explain, names=None):
        """Runs `call(operands, bfloat16_mask)` through _frameworks.call_with_copies; returns the
        report (explain) or the result in the caller's framework."""
        report = _frameworks.call_with_copies(out, operands, copyable, call, names)
        return report if explain else fw.result(out)


def _progress_callback(progress):
    """(callback or None, close) for Context.tune's `progress` argument."""
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return None, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None, lambda: None
    bar = None

    def update(done, total, problem):
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc="arbiter tune", unit="problem")
        bar.n = done
        bar.set_postfix_str(problem if done < total else "done", refresh=True)

    return update, lambda: bar is not None and bar.close()
