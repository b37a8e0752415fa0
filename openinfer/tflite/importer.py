"""TFLite -> DSL: reads a `.tflite` model and writes its graph as DSL text plus its weights.

The importer walks subgraph 0's operators in order (a TFLite subgraph is stored topologically
sorted). Every tensor keeps its TFLite name, made a DSL identifier as the ONNX importer does
(`serving_default_input_1:0` -> `serving_default_input_1_0`), with the original quoted in its
declaration's comment; graph inputs become `dynamic` variables and keep their dtype (an int8
model takes and gives int8: nothing is added at the boundary), constants become `constant`s
(weights stay in TFLite's layouts: OHWI filters, [N, K] fully connected weights), and every
computed tensor is a `volatile` that the reference and the simulator can fetch by its name.

Quantized operators become the registry's integer-only ops (qconv2d, qlinear, ...), whose
fixed-point multipliers and shifts are computed here from the tensors' f32 scales exactly as
TFLite's Prepare code computes them (openinfer/tflite/quantization.py), so the integer results
are bit-exact with TFLite's reference kernels. The handlers are `HANDLERS` (openinfer/tflite/ops.py),
the one table of what is imported: `openinfer import --list-ops` prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import TfliteImportError
from ..imported import ImportedModel, check_imported, quoted, sanitize
from .model import Operator, Tensor, TfliteModel, read_model


def import_tflite(source, *, name: str | None = None, sizevars: Mapping[str, int] | None = None) -> ImportedModel:
    """Imports a TFLite model (a path, or the file's bytes).

    `name` names the graph (default: the file's stem, made an identifier). TFLite models have
    fixed shapes; `sizevars` must be empty (a dim the model leaves open, -1 in its
    shape_signature, is refused). The result has been parsed and bound by openinfer;
    `.write(dir)` writes NAME.oig and NAME.oinf."""
    from .ops import HANDLERS  # noqa: F401  (registers the handlers)

    if isinstance(source, (bytes, bytearray, memoryview)):
        data, source_name, default = bytes(source), "<bytes>", "model"
    else:
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TfliteImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        source_name, default = path.name, path.stem
    model = read_model(data, source_name)
    if sizevars:
        raise TfliteImportError(f"--sizevar {', '.join(sorted(sizevars))}: a TFLite model's shapes are fixed "
                                "(the model has no symbolic dims)")
    graph = _graph_name(name, default)
    result = Importer(model, graph, source_name).run()
    check_imported(result, TfliteImportError)
    return result


def _graph_name(name: str | None, default: str) -> str:
    chosen = name if name is not None else default
    if not any(ch.isascii() and ch.isalnum() for ch in chosen):
        given = f"--name {chosen!r}" if name is not None else f"the model's name {chosen!r}"
        raise TfliteImportError(f"{given} has no ASCII letter or digit to make the graph's name of: give one "
                                "with --name (the files are NAME.oig and NAME.oinf)")
    return sanitize(chosen)


class OpError(Exception):
    """What a handler raises for an operator it cannot import: the importer adds which operator."""


class Importer:
    """The import: tensors to declarations, operators to op lines (through `HANDLERS`)."""

    def __init__(self, model: TfliteModel, name: str, source_name: str):
        self.m, self.name, self.source_name = model, name, source_name
        self.vars: dict[int, str] = {}              # tensor index -> DSL variable
        self.used: set[str] = set()
        self.decls: dict[str, list[tuple[str, str]]] = {"dynamic": [], "constant": [], "volatile": []}
        self.lines: list[tuple[str, str]] = []
        self.tensors: dict[str, np.ndarray] = {}
        self.renamed: dict[str, str] = {}

    # -- names and declarations ------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A new DSL name from `base`: a TFLite name made an identifier. The converter names a fused
        tensor by joining its sources' names with `;` (`conv/Relu;bn/FusedBatchNormV3;conv/BiasAdd`):
        such a name is shortened to its first part, the full name staying in the comment."""
        name, n = sanitize(base.split(";")[0]), 2
        stem = name
        while name in self.used:
            name, n = f"{stem}_{n}", n + 1
        self.used.add(name)
        return name

    def var(self, index: int) -> str:
        """The variable of tensor `index`, declaring a constant on first use."""
        if index in self.vars:
            return self.vars[index]
        t = self.m.tensors[index]
        if t.data is None:
            raise OpError(f"tensor {index} `{t.name}` is read before any operator computes it")
        return self.constant(t.data, t.name, t.dtype, note=f"TFLite {quoted(t.name)}", index=index)

    def constant(self, array: np.ndarray, base: str, dtype: str, note: str = "", index: int | None = None) -> str:
        var = self.fresh(base)
        if index is not None:
            self.vars[index] = var
            if var != self.m.tensors[index].name:
                self.renamed[self.m.tensors[index].name] = var
        shape = f"[{', '.join(str(d) for d in array.shape)}]"
        self.decls["constant"].append((f"{var}: {dtype}{shape};", note))
        self.tensors[var] = np.ascontiguousarray(array)
        return var

    def output(self, index: int) -> str:
        """Declares the volatile an operator computes into: tensor `index` under its name."""
        t = self.m.tensors[index]
        var = self.fresh(t.name)
        self.vars[index] = var
        if var != t.name:
            self.renamed[t.name] = var
        shape = f"[{', '.join(str(d) for d in t.shape)}]" if t.shape else ""
        self.decls["volatile"].append((f"{var}: {t.dtype}{shape};",
                                       f"TFLite {quoted(t.name)}" + _qnote(t)))
        return var

    def emit(self, op: str, args: list[str], attrs: Mapping[str, object], out: str, note: str) -> None:
        settings = [f"{k}={_literal(v)}" for k, v in attrs.items()]
        self.lines.append((f"op {op}({', '.join([*args, *settings])}) >> {out};", note))

    # -- the walk -------------------------------------------------------------------------------
    def run(self) -> ImportedModel:
        from .ops import handler_for

        m = self.m
        if m.subgraphs > 1:
            raise TfliteImportError(f"{self.source_name}: {m.subgraphs} subgraphs: only single-subgraph models "
                                    "import (control flow such as WHILE and IF uses more)")
        for index in m.inputs:
            t = m.tensors[index]
            var = self.fresh(t.name)
            self.vars[index] = var
            if var != t.name:
                self.renamed[t.name] = var
            self.decls["dynamic"].append((f"{var}: {t.dtype}[{', '.join(str(d) for d in t.shape)}];",
                                          f"TFLite {quoted(t.name)}" + _qnote(t)))
        problems: list[str] = []
        failed: set[int] = set()
        unsupported = False
        for op in m.operators:
            handler = handler_for(m, op)
            if handler is not None and any(x in failed for x in op.inputs):
                failed.update(op.outputs)          # its inputs are unknown: its own error would only repeat
                continue
            try:
                if handler is None:                # known without its inputs: every one is listed
                    unsupported = True
                    raise OpError("not supported")
                handler.fn(self, op)
            except OpError as exc:
                problems.append(f"{_label(m, op)}: {exc}")
                failed.update(op.outputs)
        if problems:
            hint = " (`openinfer import --list-ops` lists the supported ops)" if unsupported else ""
            if len(problems) == 1:
                raise TfliteImportError(problems[0] + hint)
            raise TfliteImportError(f"{len(problems)} operators cannot be imported: " + "; ".join(problems) + hint)
        for index in m.outputs:
            if index not in self.vars:
                raise TfliteImportError(f"graph output `{m.tensors[index].name}` is computed by no operator")
            if index in m.inputs:
                raise TfliteImportError(f"graph output `{m.tensors[index].name}` is a graph input")
        return ImportedModel(self.name, self.render(), self.tensors, {}, self.renamed, self.source_name)

    def render(self) -> str:
        description = f", {quoted(self.m.description)}" if self.m.description else ""
        out = [f"// {self.name}: imported from {quoted(self.source_name)} by `openinfer import` "
               f"(TFLite schema v{self.m.version}{description})."]
        for kind in ("dynamic", "constant", "volatile"):
            if self.decls[kind]:
                out.append(f"{kind} {{")
                out += [_line(code, note) for code, note in self.decls[kind]]
                out.append("}")
        out.append("block entry {")
        out += [_line(code, note) for code, note in self.lines]
        out.append("    return;")
        out.append("}")
        return "\n".join(out) + "\n"


def _label(m: TfliteModel, op: Operator) -> str:
    outs = ", ".join(f"`{m.tensors[o].name}`" for o in op.outputs if o >= 0)
    return f"operator {op.index} ({op.op}" + (f" -> {outs})" if outs else ")")


def _qnote(t: Tensor) -> str:
    if not t.quantized:
        return ""
    if t.scale.size == 1:
        return f"; scale {float(t.scale[0])!r}, zero point {int(t.zero[0])}"
    return f"; {t.scale.size} scales on axis {t.quantized_dimension}"


def _literal(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return f"[{', '.join(_literal(x) for x in v)}]"
    if isinstance(v, float):
        return repr(v)
    return str(int(v))


def _line(code: str, note: str) -> str:
    return f"    {code}" + (f"  // {note}" if note else "")
