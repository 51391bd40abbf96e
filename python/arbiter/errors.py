"""Exceptions: every failed call raises an :class:`Error` carrying the C library's status and
message (``arb_last_error``). Subclasses also derive from the built-in exception a Python user
would catch for that kind of failure (``ValueError`` for bad arguments, ``TypeError`` for a
dtype, ``MemoryError``...)."""

from __future__ import annotations

STATUS_NAMES = {
    0: "ok",
    1: "invalid_argument",
    2: "unsupported",
    3: "config",
    4: "plugin",
    5: "kernel",
    6: "out_of_memory",
    7: "version",
    8: "buffer_too_small",
    9: "internal",
    10: "table",
}


class Error(RuntimeError):
    """A failed arbiter call. ``status`` is the ``arb_status`` code, ``status_name`` its name and
    ``message`` the library's explanation."""

    def __init__(self, status: int, message: str):
        super().__init__(status, message)
        self.status = int(status)
        self.status_name = STATUS_NAMES.get(self.status, f"status_{self.status}")
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.status_name}]"


class InvalidArgumentError(Error, ValueError):
    """A null, mis-shaped, misaligned, overlapping or otherwise invalid argument."""


class DTypeError(InvalidArgumentError, TypeError):
    """An operand whose element type the library has no kernels for."""


class UnsupportedError(Error, NotImplementedError):
    """A valid request that no enabled kernel supports."""


class ConfigError(Error, ValueError):
    """The configuration could not be read or is invalid."""


class PluginError(Error):
    """A plugin could not be loaded or misbehaved."""


class KernelError(Error):
    """A kernel reported a failure while running."""


class OutOfMemoryError(Error, MemoryError):
    """Memory for a workspace or a buffer could not be had."""


class VersionError(Error):
    """ABI version mismatch between this package and the library it loaded."""


class TableError(Error, OSError):
    """The tuning table could not be read, written or used."""


class _NeedsCopy(Exception):
    """Internal: an operand's view cannot be expressed through the C ABI (for example a slice
    with a non-unit last stride); the caller copies it and calls again."""
