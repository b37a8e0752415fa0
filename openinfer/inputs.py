"""The inputs `openinfer run` / `sim` / `trace` feed, and the outputs they save.

Without `--inputs`, deterministic example inputs: the same seed gives the same values for every
engine, so the reference and a compiled program see identical inputs. Step s draws from
`numpy.random.default_rng(seed + s)`, one variable after another in declaration order: floats
uniform in [-1, 1) (rounded to the dtype), integers uniform in [-4, 4] clipped to the dtype's
range, bool uniform.

With `--inputs in.npz`, the user's arrays by variable name (`InputFile`): `stepN/x` for step N, or
`x` for every step that has no `stepN/x`. Each value goes through the executors' `coerce` (shape,
range, floats rounded to the variable's dtype) and one more rule a file makes possible: a float
array is never taken for an integer or bool variable, integral or not. Integers of a wider type
are taken only when every value fits. Every entry of every step is checked before anything runs,
its shape and dtype from its .npy header before its data is read: a small deflated archive may
declare a huge array.
"""

from __future__ import annotations

import functools
import os
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from .errors import ExecutionError, InputFileError
from .files import replace_file
from .ir import nodes as ir
from .ir.bound import BoundGraph, BoundVar
from .numerics import round_float
from .reference.executor import check_form, coerce

#: `stepN/name` (N without leading zeros): an input for step N only.
_STEP_KEY = re.compile(r"step(0|[1-9][0-9]*)/(.+)")


def random_inputs(bound: BoundGraph, seed: int, step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + step)
    out: dict[str, np.ndarray] = {}
    for var in bound.vars.values():
        if var.kind is not ir.MemoryKind.DYNAMIC:
            continue
        d = var.dtype
        if d.is_float:
            out[var.name] = np.asarray(round_float(rng.uniform(-1.0, 1.0, var.shape), d))
        elif d.name == "bool":
            out[var.name] = rng.integers(0, 2, var.shape).astype(np.bool_)
        else:
            lo, hi = max(d.lo, -4), min(d.hi, 4)
            out[var.name] = rng.integers(lo, hi + 1, var.shape).astype(d.np_dtype)
    return out


class InputFile:
    """Dynamic inputs read from a `.npz` archive (`numpy.savez`) for `bound`'s graph.

    `steps` is how many steps the file describes (one more than its highest `stepN/`), or None
    when it holds only shared inputs (`x`), which then serve any number of steps."""

    def __init__(self, path: str | os.PathLike, bound: BoundGraph):
        self.path = str(path)
        self._bound = bound
        self._dynamic = [v.name for v in bound.vars.values() if v.kind is ir.MemoryKind.DYNAMIC]
        self._shared: dict[str, np.ndarray] = {}
        self._per_step: dict[int, dict[str, np.ndarray]] = {}
        for key, shape, dtype, read in _npz_members(self.path):
            step, var = self._entry(key)
            _check_header(self.path, key, var, shape, dtype)    # before read(): the data may be huge
            value = _coerce_entry(self.path, key, var, read())
            if step is None:
                self._shared[var.name] = value
            else:
                self._per_step.setdefault(step, {})[var.name] = value
        self.steps = max(self._per_step) + 1 if self._per_step else None

    def _entry(self, key: str) -> tuple[int | None, BoundVar]:
        """The step (None: every step) and the input variable an entry `x` or `stepN/x` is for."""
        match = _STEP_KEY.fullmatch(key)
        step, name = (int(match[1]), match[2]) if match else (None, key)
        var = self._bound.vars.get(name)
        if var is None or var.kind is not ir.MemoryKind.DYNAMIC:
            what = "is not a variable of the graph" if var is None else \
                f"is {var.kind.section if var.kind else 'a temporary'}, not an input"
            raise InputFileError(f"{self.path}: `{key}`: `{name}` {what}; the graph's inputs (dynamic) are: "
                                 f"{', '.join(self._dynamic) or 'none'}")
        return step, var

    def check(self, steps: int) -> None:
        """Every step in range(steps) has a value for every input, and no entry is for a later step."""
        if self.steps is not None and self.steps > steps:
            raise InputFileError(f"{self.path}: holds inputs for step {self.steps - 1} but {steps} step(s) are run "
                                 "(leave --steps out to run every step the file holds)")
        for step in range(steps):
            own = self._per_step.get(step, {})
            for name in self._dynamic:
                if name not in own and name not in self._shared:
                    raise InputFileError(f"{self.path}: no value for input `{name}` in step {step} "
                                         f"(give `step{step}/{name}`, or `{name}` for every step)")

    def for_step(self, step: int) -> dict[str, np.ndarray]:
        return {**self._shared, **self._per_step.get(step, {})}


#: what reading a member of a damaged archive raises (zlib.error for a corrupt deflate stream)
_READ_ERRORS = (zipfile.BadZipFile, ValueError, EOFError, OSError, zlib.error, NotImplementedError)

_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _npz_members(path: str) -> Iterator[tuple[str, tuple[int, ...], np.dtype, Callable[[], np.ndarray]]]:
    """Each array of a `.npz` (numpy.savez writes one `KEY.npy` member per array) as (key, shape,
    dtype, read): the member's .npy header is parsed first, so an array can be refused before
    `read()` loads it. A member that is not a .npy array, or holds Python objects, is an error."""
    with open(path, "rb") as fh:                # OSError (missing, a directory): the CLI reports it
        magic = fh.read(6)
        if magic == b"\x93NUMPY":
            raise InputFileError(f"{path}: holds a single array (.npy), not a .npz archive of named arrays "
                                 "(write one with numpy.savez(path, x=..., ...))")
        if magic[:4] != b"PK\x03\x04":
            raise InputFileError(f"{path}: not a .npz archive (write one with numpy.savez(path, x=..., ...))")
        fh.seek(0)
        try:
            archive = zipfile.ZipFile(fh)
        except _READ_ERRORS as exc:             # truncated
            raise InputFileError(f"{path}: not a readable .npz archive ({exc})") from None
        with archive:
            for info in archive.infolist():
                try:
                    with archive.open(info) as member:
                        version = np.lib.format.read_magic(member)
                        if version not in _NPY_HEADERS:
                            raise ValueError(f".npy format version {version[0]}.{version[1]} is not read here")
                        shape, _, dtype = _NPY_HEADERS[version](member)
                except _READ_ERRORS as exc:
                    raise InputFileError(f"{path}: `{info.filename}` is not a .npy array ({exc}); numpy.savez "
                                         "writes each array as one") from None
                key = info.filename.removesuffix(".npy")
                if dtype.hasobject:
                    raise InputFileError(f"{path}: not a readable .npz archive (Object arrays cannot be loaded "
                                         f"when allow_pickle=False: `{key}` holds Python objects)")
                yield key, shape, dtype, functools.partial(_read_member, path, archive, info)


def _read_member(path: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    try:
        with archive.open(info) as member:
            return np.lib.format.read_array(member, allow_pickle=False)
    except _READ_ERRORS as exc:                 # a body shorter than its header says, a corrupt stream
        raise InputFileError(f"{path}: `{info.filename}`: not a readable array ({exc})") from None


def _check_header(path: str, key: str, var: BoundVar, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """An entry's shape and dtype, from its header, before its data is read."""
    if dtype.kind == "f" and not var.dtype.is_float:
        raise InputFileError(f"{path}: `{key}`: `{var.name}` is {var.dtype.name}; the file holds {dtype} "
                             "values (store integers or bools: floats are never converted to them)")
    try:
        check_form(var, shape, dtype)
    except ExecutionError as exc:
        raise InputFileError(f"{path}: `{key}`: {exc.message}") from None


def _coerce_entry(path: str, key: str, var: BoundVar, array: np.ndarray) -> np.ndarray:
    try:
        return coerce(var, array)
    except ExecutionError as exc:
        raise InputFileError(f"{path}: `{key}`: {exc.message}") from None


def input_feed(bound: BoundGraph, *, seed: int, steps: int | None,
               path: str | os.PathLike | None = None) -> tuple[int, Callable[[int], dict[str, np.ndarray]]]:
    """(steps to run, step -> inputs) for the run/sim/trace commands: the file's inputs when
    `path` is given (checked whole before anything runs), else `random_inputs` from `seed`.
    `steps` None means 1, or as many as the file describes."""
    if path is None:
        return (1 if steps is None else steps), (lambda step: random_inputs(bound, seed, step))
    source = InputFile(path, bound)
    count = steps if steps is not None else (source.steps or 1)
    source.check(count)
    return count, source.for_step


def save_outputs(path: str | os.PathLike, steps: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Write each step's outputs to a `.npz`: `y` when there is one step, else `step0/y`, `step1/y`,
    ... (the keys `--inputs` reads). Written to a temporary file beside `path` and renamed over it,
    so a failure leaves no half-written archive; a `path` that is not a regular file is refused
    (openinfer/files.py)."""
    arrays = dict(steps[0]) if len(steps) == 1 else \
        {f"step{s}/{name}": value for s, values in enumerate(steps) for name, value in values.items()}
    replace_file(path, lambda fh: np.savez(fh, **arrays))


def outputs_of(bound: BoundGraph) -> list[str]:
    """The variables `run`/`sim` show and compare: volatile ones (what a step computes)."""
    return [v.name for v in bound.vars.values() if v.kind is ir.MemoryKind.VOLATILE and not v.is_prefix_table]


def preview(a: np.ndarray, n: int = 8) -> str:
    flat = np.asarray(a).reshape(-1)
    body = ", ".join(_fmt(x) for x in flat[:n])
    return f"[{body}{', ...' if flat.size > n else ''}]"


def _fmt(x) -> str:
    if isinstance(x, (np.floating, float)):
        return f"{float(x):.6g}"
    if isinstance(x, (np.bool_, bool)):
        return "true" if x else "false"
    return str(int(x))
