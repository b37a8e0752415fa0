"""What the importer checks of the user's model and options before the graph is bound, so that a
mistake is reported against the user's own file, node or flag: shapes that sizevar values make
impossible, a graph name with nothing to keep, and every node that cannot be imported, listed in
one run rather than one per run.

Used by openinfer/onnx/importer.py, by the node context (context.py) and by the Conv and pool
handlers (handlers/nn.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..dtypes import lookup
from ..errors import OnnxImportError
from ..ir.bind import MAX_SIZE

#: ends the message of a node whose op type is not supported; said once for all of them
LIST_OPS_HINT = " (`openinfer import --list-ops` lists those that are)"


def graph_name(name: str | None, default: str, sanitize) -> str:
    """The graph's name: `name`, else `default` (the file's stem), made an identifier. One with no
    ASCII letter or digit would become the placeholder `v` (so `-`, `???` and `é` all named the
    files v.oig and v.oinf): refused instead."""
    chosen = name if name is not None else default
    if not re.search(r"[A-Za-z0-9]", chosen):
        given = f"--name {chosen!r}" if name is not None else f"the model's name {chosen!r}"
        raise OnnxImportError(f"{given} has no ASCII letter or digit to make the graph's name of: give one "
                              "with --name (the files are NAME.oig and NAME.oinf)")
    return sanitize(chosen)


def given_sizevars(sizevars: Mapping[str, int]) -> str:
    """` with H=1, W=8`: the values a message about a shape names, "" without sizevars."""
    return f" with {', '.join(f'{k}={v}' for k, v in sorted(sizevars.items()))}" if sizevars else ""


def shape_problem(sizes: list[int], dtype: str, sizevars: Mapping[str, int]) -> str | None:
    """Why a value of `dtype` and shape `sizes` cannot be declared (a negative dim: the input is
    smaller than the node needs; more bytes than the generated code can address), naming the
    sizevar values that made it so; None when it can."""
    given = given_sizevars(sizevars)
    if any(s < 0 for s in sizes):
        return f"the shape would be {sizes}{given}: the input is too small for this node"
    numel = 1
    for s in sizes:
        numel *= s
    nbytes = lookup(dtype).storage_nbytes(numel)
    if nbytes > MAX_SIZE:
        return (f"{dtype}{sizes} would be {nbytes} bytes{given}, more than the generated code can address "
                "(2^63 - 1)")
    return None


class NodeProblems:
    """The nodes that could not be imported, and the values downstream of them: a node reading
    one is not tried (its own error would only repeat the first)."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.failed: set[str] = set()
        self.unsupported_op = False

    def blocked(self, inputs: Iterable[str]) -> bool:
        return any(x in self.failed for x in inputs)

    def add_downstream(self, outputs: Iterable[str]) -> None:
        """A node not tried, reading a value of a node that failed: its outputs are not known either."""
        self.failed.update(outputs)

    def add(self, message: str, outputs: Iterable[str]) -> None:
        if message.endswith(LIST_OPS_HINT):
            message, self.unsupported_op = message[:-len(LIST_OPS_HINT)], True
        self.messages.append(message)
        self.failed.update(outputs)

    def raise_any(self) -> None:
        """One error for all of them, on one line: `node "a" (Foo): ...; node "b" (Bar): ...`."""
        if not self.messages:
            return
        hint = LIST_OPS_HINT if self.unsupported_op else ""
        if len(self.messages) == 1:
            raise OnnxImportError(self.messages[0] + hint)
        raise OnnxImportError(f"{len(self.messages)} nodes cannot be imported: " + "; ".join(self.messages) + hint)
