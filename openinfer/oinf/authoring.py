"""Authoring `.oinf` files from a dataclass instance, as the original Python API did (digest §1.12).

Field classification, in order:
1. Fields (or instance attributes) named `sizevars`, `metadata` or `tensors` holding a dict are
   merged into that table.
2. Sizevars: a `SizeVar` value, or a field annotated `int` / `SizeVar` / `Annotated[..., "sizevar"]`.
3. Tensors: `TensorSpec`, `UninitializedTensor` or `np.ndarray` values, fields marked
   `Annotated[..., "tensor"]`, lists with a dtype option, and `None` with dtype and shape options.
4. Everything else is metadata (typed by the option `dtype`, a `ScalarValue`, or inferred).

Options come from `Annotated[T, {"dtype": "bf16", "shape": (4, 4)}]` or `field(metadata={...})`;
the markers "sizevar", "tensor" and "metadata" from `Annotated[T, "metadata"]` or
`field(metadata={"metadata": True})` (use it for an `int` field that is metadata, not a sizevar).

The original rebuilt the instance through pydantic and silently dropped attributes set on it that
were not declared fields. Here nothing is dropped: an undeclared `sizevars`/`metadata`/`tensors`
dict attribute is merged like a field, and any other undeclared attribute is an error.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Union, get_args, get_origin

import numpy as np

from ..errors import OinfError
from .format import DEFAULT_VERSION
from .values import ScalarValue, SizeVar, TensorSpec, UninitializedTensor
from .writer import encode_oinf, write_oinf

_TABLES = ("sizevars", "metadata", "tensors")


def dataclass_contents(instance: Any) -> dict[str, dict[str, Any]]:
    """`tensors=`, `sizevars=` and `metadata=` for `write_oinf`, classified from a dataclass instance."""
    if not dataclasses.is_dataclass(instance) or isinstance(instance, type):
        raise OinfError(f"expected a dataclass instance, got {type(instance).__name__}")
    cls = type(instance)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        hints = {}
    fields = dataclasses.fields(instance)
    declared = {f.name for f in fields}
    out: dict[str, dict[str, Any]] = {t: {} for t in _TABLES}

    def add(table: str, name: str, value: Any) -> None:
        if name in out[table]:
            raise OinfError(f"{name!r} is given twice", table=table, entry=name)
        out[table][name] = value

    undeclared = [k for k in getattr(instance, "__dict__", {}) if k not in declared]
    for name in undeclared:
        value = instance.__dict__[name]
        if name in _TABLES and isinstance(value, Mapping):
            continue
        raise OinfError(f"attribute {name!r} is set on the {cls.__name__} instance but is not a declared field; "
                        "declare it as a field or put it in a sizevars/metadata/tensors dict (it would be lost)")
    for name in _TABLES:
        value = getattr(instance, name, None)
        if isinstance(value, Mapping):
            for key, item in value.items():
                add(name, key, item)

    for f in fields:
        value = getattr(instance, f.name)
        if f.name in _TABLES and isinstance(value, Mapping):
            continue
        annotation = hints.get(f.name, f.type)
        marks, options = _markers(annotation, f.metadata)
        table, item = _classify(f.name, value, _base_type(annotation), marks, options)
        key = getattr(item, "name", None) if isinstance(item, TensorSpec | UninitializedTensor) else None
        add(table, key or f.name, item)
    return out


def dataclass_to_oinf(instance: Any, *, version: int = DEFAULT_VERSION) -> bytes:
    """The `.oinf` bytes of a dataclass instance."""
    return encode_oinf(**dataclass_contents(instance), version=version)


def write_dataclass(path: str | os.PathLike, instance: Any, *, version: int = DEFAULT_VERSION) -> None:
    """Write a dataclass instance as a `.oinf` file (atomically, like `write_oinf`)."""
    write_oinf(path, **dataclass_contents(instance), version=version)


def _classify(name: str, value: Any, base: Any, marks: set[str], options: dict[str, Any]) -> tuple[str, Any]:
    dtype = options.get("dtype")
    if isinstance(value, SizeVar) or "sizevar" in marks or (base in (int, SizeVar, "int", "SizeVar")
                                                            and not marks & {"metadata", "tensor"}):
        if value is None or isinstance(value, bool):
            raise OinfError(f"sizevar {name!r} must be a non-negative int, got {value!r}", table="sizevars", entry=name)
        return "sizevars", value
    if "metadata" in marks:
        return "metadata", ScalarValue(value, dtype) if dtype is not None else value
    if value is None:
        if dtype is None or "shape" not in options:
            raise OinfError(f"field {name!r} is None; a declared-only tensor needs dtype and shape options "
                            "(or use UninitializedTensor)", entry=name)
        return "tensors", UninitializedTensor(dtype, options["shape"])
    if isinstance(value, TensorSpec | UninitializedTensor):
        return "tensors", value
    if isinstance(value, np.ndarray) or "tensor" in marks or (isinstance(value, list | tuple) and dtype is not None):
        return "tensors", TensorSpec(value, dtype)
    return "metadata", ScalarValue(value, dtype) if dtype is not None else value


def _markers(annotation: Any, field_metadata: Mapping[str, Any]) -> tuple[set[str], dict[str, Any]]:
    marks: set[str] = set()
    options: dict[str, Any] = {}
    if get_origin(annotation) is Annotated:
        for extra in get_args(annotation)[1:]:
            if isinstance(extra, str):
                marks.add(extra)
            elif isinstance(extra, Mapping):
                options.update(extra)
    for key, value in field_metadata.items():
        if key in ("sizevar", "tensor", "metadata"):
            if value:
                marks.add(key)
        else:
            options[key] = value
    return marks, options


def _base_type(annotation: Any) -> Any:
    """`int` for `Annotated[int, ...]` and `Optional[int]`; a string annotation stays a string."""
    if isinstance(annotation, str):
        return annotation.strip()
    if get_origin(annotation) is Annotated:
        return _base_type(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _base_type(args[0])
    return annotation
