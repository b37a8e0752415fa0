"""What every front end (ONNX, TFLite) hands out: the imported graph as DSL text with its tensors,
checked by openinfer itself (parsed and bound) before anything is written, and written as
OUT/NAME.oig + OUT/NAME.oinf without losing the user's edits."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .api import bind_inputs
from .dsl import graph as parse_graph
from .dsl.lexer import KEYWORDS
from .errors import OpenInferError, OutputFileError
from .files import fsync_dir, refuse_non_regular, write_text
from .oinf import ModelLoader, write_oinf
from .oinf.values import TensorSpec

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_identifier(name: str) -> bool:
    """A name the DSL takes as it is."""
    return bool(_IDENT.fullmatch(name)) and name not in KEYWORDS


def sanitize(name: str) -> str:
    """`name` made a DSL identifier: runs of other characters become `_`, leading and trailing `_`
    go, a leading digit gets `v_` in front and a keyword `_` behind."""
    if is_identifier(name):
        return name
    out = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "v"
    if out[0].isdigit():
        out = "v_" + out
    return out + "_" if out in KEYWORDS else out


def quoted(name: str) -> str:
    """A model's own name as a comment shows it: quoted, with newlines, control and non-ASCII
    characters escaped (a newline in a `//` comment would end it)."""
    return json.dumps(name)


@dataclass
class ImportedModel:
    """What `import_onnx` returns: the graph as DSL text, and the model it binds against.

    The tensors are read-only arrays (replace an entry to change it): `write` then moves the
    `.oinf` the bind check wrote into place instead of writing the weights a second time, as long
    as the tensors and sizevars are still the ones checked."""

    name: str
    text: str
    tensors: dict[str, np.ndarray | TensorSpec]      # TensorSpec: a quantised weight with its scales
    sizevars: dict[str, int]
    renamed: dict[str, str] = field(default_factory=dict)     # ONNX name -> DSL name, where they differ
    source_name: str = "<ModelProto>"        # the ONNX file's name, for messages
    #: the `.oinf` metadata: a decode step's dynamic cache length and its roles for `generate`
    metadata: dict = field(default_factory=dict)
    #: the bind check's .oinf (in its own temporary directory) and what it was written from
    _checked: tuple[tempfile.TemporaryDirectory, Path, dict, dict] | None = \
        field(default=None, repr=False, compare=False)

    def write(self, out_dir: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
        """Writes OUT_DIR/NAME.oig and OUT_DIR/NAME.oinf; returns their paths. A NAME.oig there
        that differs from this graph may hold the user's edits: it is replaced only with `force`
        (the same graph, from importing the same model again, is simply kept)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        graph, model = out / f"{self.name}.oig", out / f"{self.name}.oinf"
        for path in (graph, model):
            refuse_non_regular(path)
        if not force and graph.exists() and graph.read_bytes() != self.text.encode():
            raise OutputFileError(f"{graph} exists and is not the graph imported now: it may hold your edits; "
                                  "--force replaces it (or choose another -o DIR or --name)")
        if not self._move_checked_model(model):
            write_oinf(model, tensors=self.tensors, sizevars=self.sizevars, metadata=self.metadata)
        write_text(str(graph), self.text)
        return graph, model

    def _move_checked_model(self, target: Path) -> bool:
        """Renames the checked .oinf (written atomically and fsync'ed) onto `target`, if it still
        holds these tensors and the rename stays within one file system."""
        if self._checked is None:
            return False
        scratch, path, tensors, sizevars = self._checked
        self._checked = None
        try:
            if sizevars != self.sizevars or tensors.keys() != self.tensors.keys() or \
                    any(tensors[k] is not v for k, v in self.tensors.items()):
                return False
            try:
                os.replace(path, target)
            except OSError:          # another file system (EXDEV), or a target write_oinf reports better
                return False
            fsync_dir(target.parent)
            return True
        finally:
            scratch.cleanup()


def _read_only(value) -> None:
    """Makes a tensor's arrays read-only: an array, or a TensorSpec (a quantised weight) with its
    data, scales and zero points."""
    spec_quant = getattr(value, "quant", None)
    for array in (value, getattr(value, "data", None), getattr(spec_quant, "scales", None),
                  getattr(spec_quant, "zero_points", None)):
        if isinstance(array, np.ndarray):
            array.setflags(write=False)


def check_imported(result: ImportedModel, error: type[OpenInferError]) -> None:
    """Parses and binds the text against its model; a failure here is an importer bug, reported as
    `error` (the front end's).
    The .oinf written for the check is kept for `write` (tensors made read-only, so it stays theirs)."""
    for value in result.tensors.values():
        _read_only(value)
    scratch = tempfile.TemporaryDirectory(prefix="oi-import-")
    try:
        path = Path(scratch.name) / f"{result.name}.oinf"
        write_oinf(path, tensors=result.tensors, sizevars=result.sizevars, metadata=result.metadata)
        model = ModelLoader.open(path)
        try:
            bind_inputs(model, parse_graph(result.text, f"{result.name}.oig"))
        except OpenInferError as exc:
            raise error(f"internal error: the graph imported from {quoted(result.source_name)} does not "
                                  "load in openinfer (please report it with the model; the place below is in the "
                                  f"imported text, which was not written):\n{exc}") from None
        finally:
            model.close()
    except BaseException:
        scratch.cleanup()
        raise
    result._checked = (scratch, path, dict(result.tensors), dict(result.sizevars))


