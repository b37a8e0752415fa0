"""Errors of op applications: OpTypeError from the registry's checks, OpRuntimeError from the
reference kernels (openinfer/reference/kernels) on data they cannot compute. The binder and the
interpreter wrap them with a location."""

from __future__ import annotations

from ..errors import OpenInferError


class OpTypeError(OpenInferError):
    """An op application is invalid: arity, dtypes, shapes, attributes or mode.

    `str()` is the plain-words message alone; `hint` (or None) says how to fix it, so the
    binder can turn both into a located BindError.
    """

    def __init__(self, message: str, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message)


class OpRuntimeError(OpenInferError):
    """A kernel met data it cannot compute (e.g. a gather index out of range)."""
