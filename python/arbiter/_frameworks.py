"""The caller's array framework (NumPy, PyTorch, JAX, CuPy, or anything with ``__dlpack__``):
where outputs are allocated, what the result is returned as, which stream a call runs on, and
how a view the C ABI cannot express is copied. Looked up by the type of the first operand."""

from __future__ import annotations

import numpy as np

try:  # NumPy has no bfloat16 of its own; ml_dtypes' is the one JAX and others use.
    from ml_dtypes import bfloat16 as _np_bfloat16
except ImportError:  # pragma: no cover - ml_dtypes is a dependency of the package
    _np_bfloat16 = None


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
