"""arbiter: the fastest verified kernel for every problem shape, from Python.

    import numpy as np, arbiter
    ctx = arbiter.Context()
    d = ctx.gemm(np.random.rand(64, 32).astype(np.float32), np.random.rand(32, 16).astype(np.float32))

Tensors of any DLPack framework (NumPy, PyTorch, JAX, CuPy) go in; the result comes back in the
caller's framework. ``import arbiter.torch_ops`` registers ``torch.ops.arbiter.*``. docs/python.md
has the whole story."""

from __future__ import annotations

import os
import threading

from . import errors  # first: the extension raises its classes
from ._arbiter import ABI_VERSION_MAJOR, ABI_VERSION_MINOR, abi_version, library_version
from .context import Context
from .errors import (
    ConfigError,
    DTypeError,
    Error,
    InvalidArgumentError,
    KernelError,
    OutOfMemoryError,
    PluginError,
    TableError,
    UnsupportedError,
    VersionError,
)
from .plans import AttentionPlan, GemmPlan, MLPPlan, Plan, QKVPlan, RMSNormPlan, RopePlan, SoftmaxPlan, SwiGLUPlan
from .reports import Candidate, Kernel, Plugin, TuneReport, TuneResult, Verdict, VerifyReport

__version__ = library_version()

if abi_version() >> 16 != ABI_VERSION_MAJOR:  # the extension and the library it loaded disagree
    raise VersionError(7, f"libarbiter ABI {abi_version() >> 16}.{abi_version() & 0xFFFF} loaded, "
                          f"this package was built for {ABI_VERSION_MAJOR}.{ABI_VERSION_MINOR}")

_default_context = None
_default_context_lock = threading.Lock()


def default_context() -> Context:
    """A process-wide context (the embedded default configuration, or the file named by
    ARBITER_CONFIG), created at first use. The torch ops use it."""
    global _default_context
    if _default_context is None:
        with _default_context_lock:
            if _default_context is None:
                _default_context = Context(os.environ.get("ARBITER_CONFIG") or None)
    return _default_context


__all__ = [
    "Context", "default_context", "Plan", "GemmPlan", "RMSNormPlan", "SoftmaxPlan", "SwiGLUPlan", "RopePlan", "AttentionPlan", "MLPPlan",
    "QKVPlan",
    "Error", "InvalidArgumentError", "DTypeError", "UnsupportedError", "ConfigError",
    "PluginError", "KernelError", "OutOfMemoryError", "VersionError", "TableError", "Plugin", "Kernel", "Verdict",
    "VerifyReport", "Candidate", "TuneResult", "TuneReport", "abi_version", "library_version", "errors",
]
