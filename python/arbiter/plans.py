"""Plans: one operation's arguments bound once (checked, kernel chosen, workspace sized) and run
many times on new tensors of the same shapes, strides, dtype and device, as a decode loop calls
the same few shapes. Made by ``Context.plan_gemm`` / ``plan_rmsnorm`` / ``plan_softmax`` /
``plan_swiglu`` / ``plan_rope`` / ``plan_attention`` / ``plan_mlp`` / ``plan_qkv``
(docs/python.md, "Plans"; the C ABI underneath: docs/plans.md)."""

from __future__ import annotations

import numpy as np

from . import _frameworks
from .errors import InvalidArgumentError

_ndarray = np.ndarray
_NumPy = _frameworks.NumPy
_RETRY_IN_GENERAL_PATH = _frameworks.RETRY_IN_GENERAL_PATH


class Plan:
    """A bound operation: ``run(...)`` takes new tensors laid out as the ones the plan was made
    with (any other shape, dtype, strides or device is an :class:`arbiter.InvalidArgumentError`,
    a dtype an :class:`arbiter.DTypeError`); ``explain()`` says which kernel it runs and why.
    Threads may run one plan at once. ``close()`` (or a ``with`` block, or garbage collection)
    frees it; a plan keeps its context alive, and closing the context closes its plans."""

    op = ""

    def __init__(self, context, c_plan, out_shape):
        self.context = context
        self._p = c_plan
        self._out_shape = out_shape

    def explain(self) -> str:
        """The kernel the plan runs, its workspace and alignment class, then the context's account
        of the problem (``Context.explain``)."""
        return self._p.explain()

    def close(self) -> None:
        """Frees the plan (after its runs in flight); later runs raise arbiter.InvalidArgumentError."""
        self._p.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<arbiter.{type(self).__name__}: {self.op}, out of shape {self._out_shape}>"


class GemmPlan(Plan):
    """``act(alpha * a @ b + beta * c + bias)`` with the plan's alpha, beta and act."""

    op = "gemm"

    def __init__(self, context, c_plan, out_shape, uses_c):
        super().__init__(context, c_plan, out_shape)
        self._uses_c = uses_c
        self._in_place = c_plan.in_place  # read once: a property of the extension costs a call per run
        self._run_gemm = c_plan.gemm

    def run(self, a, b, bias=None, c=None, out=None):
        """Runs the plan on `a`, `b` (and `bias`, `c` when the plan was made with them; c is
        ignored when its beta is 0, and defaults to `out` for a plan made in place). Returns
        `out`, or a new array of the caller's framework."""
        if not self._uses_c:
            c = None  # never read, as in Context.gemm
        # The fast path, as in Context.gemm (and as lean: it is the point of a plan): anything it
        # cannot take is done again by _run.
        try:
            fw = _NumPy if type(a) is _ndarray else _frameworks.framework_of(a)
            if out is None:
                out = fw.empty(self._out_shape, a)
            if c is None and self._in_place:
                c = out
            self._run_gemm(a, b, c, bias, out, 0 if fw is _NumPy else fw.stream(a), 0)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._run(a, b, bias, c, out)

    def _run(self, a, b, bias, c, out):
        fw = _frameworks.framework_of(a)
        if out is None:
            out = fw.empty(self._out_shape, a)
        if c is None and self._in_place:
            c = out
        stream = fw.stream(a)
        _frameworks.call_with_copies(out, [a, b, c, bias, out], ("a", "b", "c", "bias"), lambda ops, mask: self._p.gemm(
            ops[0], ops[1], ops[2], ops[3], ops[4], stream, mask))
        return fw.result(out)


class RMSNormPlan(Plan):
    """``x / sqrt(mean(x**2, -1) + eps) * weight`` with the plan's eps; made with a residual, each
    run first updates x in place (``x += residual``)."""

    op = "rmsnorm"

    def __init__(self, context, c_plan, out_shape, has_residual):
        super().__init__(context, c_plan, out_shape)
        self._has_residual = has_residual

    def run(self, x, weight, residual=None, out=None):
        """Runs the plan on `x` and `weight` (and `residual`: given exactly when the plan was made
        with one). Returns `out`, or a new array of the caller's framework."""
        if residual is None:  # the fast path (see GemmPlan.run); with a residual, x is written: checked first
            try:
                fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
                if out is None:
                    out = fw.empty(self._out_shape, x)
                self._p.rmsnorm(x, None, weight, out, 0 if fw is _NumPy else fw.stream(x), 0)
                return out if fw is _NumPy else fw.result(out)
            except _RETRY_IN_GENERAL_PATH:
                pass
        return self._run(x, weight, residual, out)

    def _run(self, x, weight, residual, out):
        fw = _frameworks.framework_of(x)
        _frameworks.check_residual_target(fw, x, residual)
        if out is None:
            out = fw.empty(self._out_shape, x)
        # With a residual, x is written: a copy of it would not be updated, so it is never copied.
        copyable = ("residual", "weight") if residual is not None else ("x", "residual", "weight")
        stream = fw.stream(x)
        _frameworks.call_with_copies(out, [x, residual, weight, out], copyable, lambda ops, mask: self._p.rmsnorm(
            ops[0], ops[1], ops[2], ops[3], stream, mask), names=("x", "residual", "weight"))
        return fw.result(out)


class SoftmaxPlan(Plan):
    """Softmax over the last dimension."""

    op = "softmax"

    def __init__(self, context, c_plan, out_shape):
        super().__init__(context, c_plan, out_shape)
        self._run_softmax = c_plan.softmax

    def run(self, x, out=None):
        """Runs the plan on `x`. Returns `out`, or a new array of the caller's framework."""
        try:  # the fast path (see GemmPlan.run)
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if out is None:
                out = fw.empty(self._out_shape, x)
            self._run_softmax(x, out, 0 if fw is _NumPy else fw.stream(x), 0)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._run(x, out)

    def _run(self, x, out):
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(self._out_shape, x)
        stream = fw.stream(x)
        _frameworks.call_with_copies(out, [x, out], ("x",), lambda ops, mask: self._p.softmax(
            ops[0], ops[1], stream, mask))
        return fw.result(out)


class AttentionPlan(Plan):
    """Scaled dot-product attention, ``softmax(scale * q @ k^T) @ v`` per batch and head."""

    op = "attention"

    def __init__(self, context, c_plan, out_shape):
        super().__init__(context, c_plan, out_shape)
        self._run_attention = c_plan.attention

    def run(self, q, k, v, out=None):
        """Runs the plan on `q`, `k` and `v`. Returns `out`, or a new array of the caller's framework."""
        try:  # the fast path (see GemmPlan.run)
            fw = _NumPy if type(q) is _ndarray else _frameworks.framework_of(q)
            if out is None:
                out = fw.empty(self._out_shape, q)
            self._run_attention(q, k, v, out, 0 if fw is _NumPy else fw.stream(q), 0)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._run(q, k, v, out)

    def _run(self, q, k, v, out):
        fw = _frameworks.framework_of(q)
        if out is None:
            out = fw.empty(self._out_shape, q)
        stream = fw.stream(q)
        _frameworks.call_with_copies(out, [q, k, v, out], ("q", "k", "v"), lambda ops, mask: self._p.attention(
            ops[0], ops[1], ops[2], ops[3], stream, mask))
        return fw.result(out)


class MLPPlan(Plan):
    """The MLP block ``x + down(silu(gate(n)) * up(n))``, ``n = rmsnorm(x) * norm_weight``, with
    the plan's eps. A plan made with the fused gate/up weight (up=None) runs on fused weights."""

    op = "mlp"

    def __init__(self, context, c_plan, out_shape, has_up):
        super().__init__(context, c_plan, out_shape)
        self._has_up = has_up
        self._run_mlp = c_plan.mlp

    def run(self, x, norm_weight, gate, up=None, down=None, out=None, stream=None):
        """Runs the plan on `x`, `norm_weight`, `gate`, `up` (given exactly when the plan was made
        with it) and `down` (by name when up is not given). `stream` as in ``Context.mlp``.
        Returns `out`, or a new array of the caller's framework."""
        if (up is not None) != self._has_up:
            raise InvalidArgumentError(1, "plan.run: the plan was made with up, and none was given" if self._has_up else
                                          "plan.run: up was given, but the plan was made with one fused gate/up weight "
                                          "(up=None): pass the whole [2 * inter, hidden] gate alone")
        try:  # the fast path (see GemmPlan.run)
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if out is None:
                out = fw.empty(self._out_shape, x)
            self._run_mlp(x, norm_weight, gate, up, down, out, _frameworks.stream_handle(fw, x, stream), 0)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._run(x, norm_weight, gate, up, down, out, stream)

    def _run(self, x, norm_weight, gate, up, down, out, stream):
        if down is None:
            raise InvalidArgumentError(1, "plan.run: down (the [hidden, inter] down projection) is required; with a "
                                          "fused gate/up weight, pass it by name: plan.run(x, norm_weight, gate_up, down=down)")
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(self._out_shape, x)
        handle = _frameworks.stream_handle(fw, x, stream)
        _frameworks.call_with_copies(
            out, [x, norm_weight, gate, up, down, out], ("x", "norm_weight", "gate", "up", "down"), lambda ops, mask: (
                self._run_mlp(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], handle, mask)))
        return fw.result(out)


class QKVPlan(Plan):
    """The attention block's input: rope on the q and k heads of ``n @ weight.T``, ``n =
    rmsnorm(x) * norm_weight``, with the plan's heads, kv_heads, theta, max_position, layout and
    eps. The result is [..., heads + 2 * kv_heads, head_dim], as ``Context.qkv``'s."""

    op = "qkv"

    def __init__(self, context, c_plan, out_shape):
        super().__init__(context, c_plan, out_shape)
        self._run_qkv = c_plan.qkv

    def run(self, x, norm_weight, weight, positions, out=None, stream=None):
        """Runs the plan on `x`, `norm_weight`, `weight` and `positions` (int32, x's leading shape;
        CPU ones are checked against the plan's max_position). `stream` as in ``Context.qkv``.
        Returns `out`, or a new array of the caller's framework."""
        try:  # the fast path (see GemmPlan.run)
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if out is None:
                out = fw.empty(self._out_shape, x)
            self._run_qkv(x, norm_weight, weight, positions, out, _frameworks.stream_handle(fw, x, stream), 0)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._run(x, norm_weight, weight, positions, out, stream)

    def _run(self, x, norm_weight, weight, positions, out, stream):
        fw = _frameworks.framework_of(x)
        if out is None:
            out = fw.empty(self._out_shape, x)
        handle = _frameworks.stream_handle(fw, x, stream)
        _frameworks.call_with_copies(
            out, [x, norm_weight, weight, positions, out], ("x", "norm_weight", "weight", "positions"),
            lambda ops, mask: self._run_qkv(ops[0], ops[1], ops[2], ops[3], ops[4], handle, mask))
        return fw.result(out)


class SwiGLUPlan(Plan):
    """``silu(gate) * up`` elementwise. A plan made with one fused [..., 2n] gate (up=None) runs on
    fused tensors of that shape, split at each run into the two halves it was planned as."""

    op = "swiglu"

    def __init__(self, context, c_plan, out_shape, fused_shape):
        super().__init__(context, c_plan, out_shape)
        self._fused_shape = fused_shape  # the whole gate's shape for a fused plan, else None
        self._run_swiglu = c_plan.swiglu

    def run(self, gate, up=None, out=None):
        """Runs the plan on `gate` and `up` (or on a fused gate alone, as the plan was made).
        Returns `out`, or a new array of the caller's framework."""
        if self._fused_shape is not None:
            gate, up = self._halves(gate, up)
        elif up is None:
            raise InvalidArgumentError(1, "plan.run: the plan was made with up, and none was given "
                                          "(a fused gate/up tensor needs a plan made with up=None)")
        try:  # the fast path (see GemmPlan.run)
            fw = _NumPy if type(gate) is _ndarray else _frameworks.framework_of(gate)
            if out is None:
                out = fw.empty(self._out_shape, gate)
            self._run_swiglu(gate, up, out, 0 if fw is _NumPy else fw.stream(gate), 0)
            return out if fw is _NumPy else fw.result(out)
        except _RETRY_IN_GENERAL_PATH:
            return self._run(gate, up, out)

    def _halves(self, gate, up):
        """A fused plan's run: the whole gate, checked against the plan's, as its two halves."""
        if up is not None:
            raise InvalidArgumentError(1, "plan.run: up was given, but the plan was made with one fused gate/up "
                                          "tensor (up=None): pass the whole [..., 2n] gate alone")
        shape = tuple(gate.shape) if hasattr(gate, "shape") else None
        if shape != self._fused_shape:  # named as the caller gave it, not as its halves
            _frameworks.framework_of(gate)  # TypeError for no array at all
            raise InvalidArgumentError(1, f"plan.run: gate has shape {shape}, but the plan was made for "
                                          f"{self._fused_shape} (one fused gate/up tensor)")
        return _frameworks.halves(_frameworks.framework_of(gate), gate)

    def _run(self, gate, up, out):
        fw = _frameworks.framework_of(gate)
        if out is None:
            out = fw.empty(self._out_shape, gate)
        stream = fw.stream(gate)
        _frameworks.call_with_copies(out, [gate, up, out], ("gate", "up"), lambda ops, mask: self._p.swiglu(
            ops[0], ops[1], ops[2], stream, mask))
        return fw.result(out)


class RopePlan(Plan):
    """Rotary position embedding of x in place, with the plan's theta, max_position and layout."""

    op = "rope"

    def __init__(self, context, c_plan, x_shape):
        super().__init__(context, c_plan, x_shape)
        self._run_rope = c_plan.rope

    def __repr__(self) -> str:
        return f"<arbiter.RopePlan: rope, x of shape {self._out_shape}>"

    def run(self, x, positions, stream=None):
        """Rotates `x` in place by `positions` (int32, x's leading shape; CPU ones are checked
        against the plan's max_position). Returns x."""
        try:  # the fast path (see GemmPlan.run); a read-only x is refused by _run
            fw = _NumPy if type(x) is _ndarray else _frameworks.framework_of(x)
            if fw.writable(x):
                self._run_rope(x, positions, _frameworks.stream_handle(fw, x, stream), 0)
                return x
        except _RETRY_IN_GENERAL_PATH:
            pass
        return self._run(x, positions, stream)

    def _run(self, x, positions, stream):
        handle = _frameworks.stream_handle(_frameworks.framework_of(x), x, stream)
        _frameworks.call_rope(x, positions, lambda ops, mask: self._run_rope(ops[0], ops[1], handle, mask))
        return x
