"""The exception hierarchy: every error OpenInfer raises derives from `OpenInferError`.

Errors that point into a file carry where: `DslError` a source location (file:line:col),
`OinfError` a table, entry and byte offset. Their `str()` is the full, user-facing message, so a
command-line front end prints it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass


class OpenInferError(Exception):
    """Base of every error OpenInfer raises on purpose."""


class OinfError(OpenInferError):
    """A `.oinf` file is malformed, or a value cannot be written to one.

    `table` is "header", "sizevars", "metadata", "tensors", "data" or "quant"; `entry` the name or
    index of the entry concerned; `offset` the absolute byte offset in the file where the problem
    was found. Any of them may be None when they do not apply (e.g. writing an invalid name).
    """

    def __init__(self, message: str, *, table: str | None = None, entry: str | int | None = None,
                 offset: int | None = None, path: str | None = None):
        self.message = message
        self.table = table
        self.entry = entry
        self.offset = offset
        self.path = path
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.path:
            where.append(str(self.path))
        if self.table:
            where.append(f"{self.table} table" if self.table not in ("header", "data") else self.table)
        if self.entry is not None:
            where.append(f"entry {self.entry!r}" if isinstance(self.entry, str) else f"entry #{self.entry}")
        if self.offset is not None:
            where.append(f"byte offset {self.offset}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


@dataclass(frozen=True)
class SourceLoc:
    """A 1-based position in a DSL source; `file` is the path as given, or "<string>"."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


#: Source lines longer than this are quoted in part: this many characters around the error.
_QUOTE_WIDTH = 100


class LocatedError(OpenInferError):
    """An error tied to a place in DSL source: prints file:line:col, the line, a caret and a hint."""

    kind = "error"

    def __init__(self, message: str, loc: SourceLoc | None = None, *, source_line: str | None = None,
                 hint: str | None = None, length: int = 1):
        self.message = message
        self.loc = loc
        self.source_line = source_line
        self.hint = hint
        self.length = max(1, length)
        super().__init__(self._format())

    def _format(self) -> str:
        if self.loc:
            head = f"{self.loc}: {self.kind}: {self.message}"
        else:   # a bare "error: " would repeat the front end's prefix (`openinfer: error: error: ...`)
            head = self.message if self.kind == "error" else f"{self.kind}: {self.message}"
        parts = [head]
        if self.loc is not None and self.source_line is not None:
            line = self.source_line.rstrip("\n").expandtabs(1)
            col = self.loc.col
            width = min(self.length, max(1, len(line) - col + 1))
            if len(line) > _QUOTE_WIDTH:       # a window of a long line around the caret, marked `...`
                start = max(0, min(col - 1 - _QUOTE_WIDTH // 4, len(line) - _QUOTE_WIDTH))
                end = start + _QUOTE_WIDTH
                width = min(width, end - col + 1)
                line = ("..." if start else "") + line[start:end] + ("..." if end < len(line) else "")
                col = col - start + (3 if start else 0)
            parts.append(f"    {line}")
            parts.append("    " + " " * (col - 1) + "^" * width)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class DslError(LocatedError):
    """The DSL text does not parse."""

    kind = "syntax error"


class GraphFileError(DslError):
    """A graph file cannot be read: missing, a directory or device, unreadable, not UTF-8. The
    message starts with the file's name (there is no line to point at)."""

    def _format(self) -> str:
        return self.message


class BindError(LocatedError):
    """A parsed graph is inconsistent in itself or with its model (names, shapes, dtypes, rules)."""

    kind = "error"


class ExecutionError(LocatedError):
    """A step failed at run time (unset input, full @fixed table, index out of range, ...)."""

    kind = "runtime error"


class SynthesisError(OpenInferError):
    """The graph cannot be lowered to the chosen target (unsupported dtype on the device, ...)."""


class DeviceError(OpenInferError):
    """A device descriptor JSON is missing fields or has invalid values."""


class OutputFolderError(OpenInferError):
    """An output folder (or a cache entry) holds something OpenInfer must not overwrite, follow or
    trust: a file it did not write, a symbolic link, a malformed listing or journal."""


class OutputFileError(OpenInferError):
    """An output file cannot be written where the user asked: the path is empty, names something
    other than a regular file (a device, a FIFO, a symbolic link, a directory), or names one of the
    command's own inputs (openinfer/files.py)."""


class BuildError(OpenInferError):
    """`meson setup` or `ninja` failed on a generated project."""


class OnnxImportError(OpenInferError):
    """An ONNX model cannot be imported: unreadable, or a node whose op or attribute value the
    importer does not support (the message names the node, its op type and what is missing)."""


class TfliteImportError(OpenInferError):
    """A TFLite model cannot be imported: not a TFLite flatbuffer, or an operator whose op, options
    or quantization the importer does not support (the message names the operator by its index,
    op and output tensor)."""


class InputFileError(OpenInferError):
    """An inputs file (`--inputs in.npz`) cannot be read or does not fit the graph: a missing or
    unknown variable, a wrong shape, a value its variable cannot hold (the message names the file
    and the entry)."""


class SimulationError(OpenInferError):
    """A compiled program could not be loaded or run, or returned an error status."""
