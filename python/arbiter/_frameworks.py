"""The caller's array framework (NumPy, PyTorch, JAX, CuPy, or anything with ``__dlpack__``):
where outputs are allocated, what the result is returned as, which stream a call runs on, and
how a view the C ABI cannot express is copied. Looked up by the type of the first operand."""

from __future__ import annotations

import numpy as np

from .errors import InvalidArgumentError, _NeedsCopy

try:  # NumPy has no bfloat16 of its own; ml_dtypes' is the one JAX and others use.
    from ml_dtypes import bfloat16 as _np_bfloat16
except ImportError:  # pragma: no cover - ml_dtypes is a dependency of the package
    _np_bfloat16 = None

# What makes a fast-path call fall back to the general path: a view to copy (_NeedsCopy), an
# operand nanobind cannot take as it is (TypeError: NumPy bfloat16, a read-only output, no array
# at all), an unknown activation (KeyError), a wrong rank (IndexError). None of them has called
# the library, so nothing was written.
RETRY_IN_GENERAL_PATH = (_NeedsCopy, TypeError, KeyError, IndexError, AttributeError)


class NumPy:
    """NumPy arrays (and anything else on the CPU that only speaks DLPack: results are NumPy)."""

    name = "numpy"

    @staticmethod
    def empty(shape, like):
        return np.empty(shape, dtype=like.dtype)

    @staticmethod
    def result(out):
        return out

    @staticmethod
    def stream(like):
        return 0

    @staticmethod
    def contiguous(x):
        return np.ascontiguousarray(x)

    @staticmethod
    def writable(x):
        return getattr(x, "flags", None) is None or x.flags.writeable


class _DLPackOnly(NumPy):
    """An unknown framework: inputs go in through DLPack, outputs are NumPy arrays."""

    name = "dlpack"

    @staticmethod
    def empty(shape, like):
        return np.empty(shape, dtype=np.from_dlpack(like).dtype)

    @staticmethod
    def contiguous(x):
        return np.ascontiguousarray(np.from_dlpack(x))

    @staticmethod
    def writable(x):
        # What NumPy's import says (DLPack 1.0 carries a read-only flag); an object NumPy cannot
        # import is left for the library to take or refuse.
        try:
            return np.from_dlpack(x).flags.writeable
        except (BufferError, RuntimeError, TypeError, ValueError):
            return True


class Torch:
    name = "torch"

    @staticmethod
    def empty(shape, like):
        import torch

        return torch.empty(shape, dtype=like.dtype, device=like.device)

    @staticmethod
    def result(out):
        return out

    @staticmethod
    def stream(like):
        if like.device.type != "cuda":
            return 0
        import torch

        return torch.cuda.current_stream(like.device).cuda_stream

    @staticmethod
    def contiguous(x):
        return x.contiguous()

    @staticmethod
    def writable(x):
        return True


class Jax:
    """JAX arrays are immutable: an output is a NumPy buffer, handed to JAX through DLPack (no
    copy on the CPU). CPU arrays only."""

    name = "jax"

    @staticmethod
    def empty(shape, like):
        if like.devices().pop().platform != "cpu":
            raise NotImplementedError("arbiter's JAX support is CPU-only: pass CUDA data as PyTorch or CuPy tensors")
        return np.empty(shape, dtype=np.dtype(like.dtype))

    @staticmethod
    def result(out):
        import jax.numpy as jnp

        if out.dtype is BFLOAT16:  # NumPy cannot export bfloat16 through DLPack: JAX copies it
            return jnp.asarray(out)
        return jnp.from_dlpack(out)

    @staticmethod
    def stream(like):
        return 0

    @staticmethod
    def contiguous(x):
        return np.ascontiguousarray(np.asarray(x))

    @staticmethod
    def writable(x):
        return False


class CuPy:
    name = "cupy"

    @staticmethod
    def empty(shape, like):
        import cupy

        with like.device:
            return cupy.empty(shape, dtype=like.dtype)

    @staticmethod
    def result(out):
        return out

    @staticmethod
    def stream(like):
        import cupy

        return cupy.cuda.get_current_stream().ptr

    @staticmethod
    def contiguous(x):
        import cupy

        return cupy.ascontiguousarray(x)

    @staticmethod
    def writable(x):
        return True


_BY_MODULE = {"numpy": NumPy, "torch": Torch, "jax": Jax, "jaxlib": Jax, "cupy": CuPy}


def framework_of(x):
    """The adapter for `x`'s framework; TypeError for an object that is no array at all."""
    t = type(x)
    if t is np.ndarray:
        return NumPy
    adapter = _BY_MODULE.get(t.__module__.partition(".")[0])
    if adapter is not None:
        return adapter
    if isinstance(x, np.ndarray):
        return NumPy
    if hasattr(x, "__dlpack__"):
        return _DLPackOnly
    raise TypeError(f"expected an array with __dlpack__ (NumPy, PyTorch, JAX, CuPy...), got {t.__name__}")


BFLOAT16 = None if _np_bfloat16 is None else np.dtype(_np_bfloat16)


def bfloat16_views(operands):
    """For a bfloat16 call: NumPy bfloat16 arrays (which NumPy cannot export through DLPack) as
    uint16 views, and the mask of the operands so converted (bit i: operands[i]), which tells the
    extension to read those, and only those, as bfloat16."""
    mask, views = 0, []
    for i, x in enumerate(operands):
        if type(x) is np.ndarray and x.dtype is BFLOAT16:
            x = x.view(np.uint16)
            mask |= 1 << i
        views.append(x)
    return mask, views


def halves(fw, x):
    """A [..., 2n] array of framework `fw` as its two [..., n] halves, ``(x[..., :n], x[..., n:])``:
    views where the framework has them (JAX slices are copies); None for an array with no
    dimension or an odd last one."""
    shape = tuple(x.shape)
    if not shape or shape[-1] % 2:
        return None
    if fw is _DLPackOnly:  # no slicing of its own: NumPy views of its memory
        x = np.from_dlpack(x)
    n = shape[-1] // 2
    return x[..., :n], x[..., n:]


def check_residual_target(fw, x, residual):
    """rmsnorm with a residual writes x (x += residual): refuses an x of `fw` that is read-only."""
    if residual is not None:
        check_in_place_target(fw, x, "rmsnorm with a residual updates x in place")


def check_in_place_target(fw, x, what):
    """Refuses an x of `fw` that is read-only (a JAX array, a read-only NumPy view): `what` writes it."""
    if not fw.writable(x):
        raise InvalidArgumentError(1, f"{what}, and this {fw.name} array is read-only")


def stream_handle(fw, like, stream):
    """The stream a call on `like` runs on: `stream` when given (a raw handle as an int, or a
    stream object with ``cuda_stream``, as PyTorch's, or ``ptr``, as CuPy's), else the current
    stream of `like`'s framework."""
    if stream is None:
        return fw.stream(like)
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(f"stream: expected None, an int handle or a CUDA stream object, got {type(stream).__name__}")


def call_rope(x, positions, call, in_place=True):
    """rope's `call(operands, bfloat16_mask)` on [x, positions] (call_with_copies): x is rotated in
    place, so it is refused when read-only (unless not `in_place`: explain writes nothing) and
    never copied; positions that are not compact are copied."""
    if in_place:
        check_in_place_target(framework_of(x), x, "rope rotates x in place")
    return call_with_copies(None, [x, positions], ("positions",), call, names=("x", "positions"))


def call_with_copies(out, operands, copyable, call, names=None):
    """Returns `call(operands, bfloat16_mask)`; where the extension says an input's view cannot be
    expressed, copies that input (with its own framework) and calls again. The last operand is
    the output, which is never copied (the result would be lost): a read-only one is refused
    here (`out` None: the op has no output of its own, as rope, which writes an input). `copyable`
    names the inputs that may be copied; `names` all inputs, in order (default: `copyable`)."""
    names = names or copyable
    out_framework = None if out is None else framework_of(out)
    if out_framework is not None and not out_framework.writable(out):
        raise InvalidArgumentError(1, f"out is read-only (a {out_framework.name} array): the result cannot be written into it")
    mask = 0
    if any(getattr(x, "dtype", None) is BFLOAT16 for x in operands):  # any: a mixed call is named by dtype
        mask, operands = bfloat16_views(operands)
    for _ in range(len(operands)):
        try:
            return call(operands, mask)
        except _NeedsCopy as need:
            name = need.args[0]
            if name not in copyable:
                raise InvalidArgumentError(
                    1, f"{name} is written in place, so it must be a view the library can take as it is: a "
                    "unit last stride and rows that collapse into one stride (a copy would not be updated)"
                ) from None
            i = names.index(name)
            original = operands[i]
            copy = framework_of(original).contiguous(original)
            operands = list(operands)
            operands[i] = copy
    raise AssertionError("unreachable: every operand copied")  # pragma: no cover
