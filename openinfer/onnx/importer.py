"""ONNX -> DSL: reads an ONNX model and writes the graph as DSL text plus its weights.

The importer walks the ONNX graph in its (topological) node order, keeping for every ONNX value
its dtype, its shape (each dim a size, written as a sizevar where the model's dim is symbolic) and,
where it is known at import time, its contents. Constants are folded (Constant, Identity, shape
arithmetic on constants), weights are stored in the layout the ops take (Gemm's transposed B is
transposed here, BatchNormalization after a Conv is folded into the conv's weights and bias), and
each remaining node becomes one or a few DSL ops. The text is then parsed and bound by openinfer
itself before it is handed out, so an import never produces a graph openinfer cannot load.

The op handlers are openinfer/onnx/handlers/ (a module per op family), registered by op type in
`SUPPORTED_OPS` (openinfer/onnx/context.py), the one table of what is imported: `openinfer import
--list-ops` prints it. Patterns of several nodes that map onto one fused op are openinfer/onnx/fusions.py.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import OnnxImportError
from ..imported import ImportedModel, check_imported, quoted
from ..ir.bind import FIXED_META

# importing the handlers registers them in SUPPORTED_OPS
from . import (
    decoder,
    handlers,  # noqa: F401
)
from .context import (
    ONNX_DTYPES,
    SUPPORTED_OPS,
    Dim,
    ImportState,
    NodeContext,
    Value,
    data_mismatch,
    is_identifier,
    module_path,
    sanitize,
)
from .fusions import apply_fusion, find_fusions
from .handlers.control import REFUSED_OPS, outer_reads
from .layers import Layers, fold_layers
from .problems import LIST_OPS_HINT, NodeProblems, graph_name, shape_problem
from .quantized_weights import packed_initializer


def import_onnx(source, *, name: str | None = None, sizevars: Mapping[str, int] | None = None,
                cache_capacity: int | None = None, streaming: bool = False,
                unroll_layers: bool = False) -> ImportedModel:
    """Imports an ONNX model (a path or an `onnx.ModelProto`).

    `name` names the graph (default: the file's stem, made an identifier); `sizevars` gives values
    to the model's symbolic input dims, by their ONNX name or the sizevar they become;
    `cache_capacity`, for a decode step with past/present key-values, the tokens its cache tables
    hold (openinfer/onnx/decoder.py); `streaming` makes the recurrent layers (RNN, GRU, LSTM) run
    one time step per engine step, their state kept in `persistent` memory (a symbolic sequence
    dim of their input defaults to 1); `unroll_layers` writes repeated layers out one after the other
    instead of as one loop (openinfer/onnx/layers.py). The result has been parsed and bound by openinfer;
    `.write(dir)` writes NAME.oig and NAME.oinf."""
    try:
        import onnx
    except ModuleNotFoundError:
        raise OnnxImportError("the `onnx` package is needed to import ONNX models: pip install 'openinfer[onnx]'") \
            from None
    if isinstance(source, onnx.ModelProto):
        model, source_name, where = source, "<ModelProto>", "<ModelProto>"
        default_name = source.graph.name or "model"
    else:
        path = Path(source)
        try:
            model = onnx.load(str(path))
        except OSError as exc:
            raise OnnxImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
        except Exception as exc:        # protobuf's DecodeError and onnx's own errors
            raise OnnxImportError(f"{path}: not a readable ONNX model: {exc}") from None
        source_name, default_name, where = path.name, path.stem, str(path)
    if not model.HasField("graph"):     # protobuf reads an empty file as an empty message: no graph
        raise OnnxImportError(f"{where}: not an ONNX model: it holds no graph"
                              + (" (the file is empty)" if where != "<ModelProto>" and not os.path.getsize(where)
                                 else ""))
    importer = _Importer(model, graph_name(name, default_name, sanitize), dict(sizevars or {}), source_name,
                         streaming, cache_capacity)
    importer.unroll_layers = unroll_layers
    result = importer.run()
    check_imported(result, OnnxImportError)
    return result


def list_ops() -> str:
    """The coverage, one op a line (what `openinfer import --list-ops` prints)."""
    width = max(len(k) for k in SUPPORTED_OPS)
    return "\n".join(f"{k:<{width}}  {SUPPORTED_OPS[k].note}" for k in sorted(SUPPORTED_OPS)) + "\n"


class _Importer(ImportState):
    """The import itself: the graph inputs and initializers, every node in order (through its
    handler, or the fusion ending there), the graph outputs, and the text `render` writes."""

    kv_pairs: list = []
    generate_roles: dict = {}
    past_param: str | None = None
    unroll_layers = False

    # -- running ------------------------------------------------------------------------------
    def run(self) -> ImportedModel:
        import onnx.numpy_helper as nh

        for o in self.outputs:                       # graph inputs and outputs keep valid names
            if is_identifier(o):
                self.onnx_to_dsl[o] = o
                self.used.add(o)
        initializers = {}
        for t in self.g.initializer:
            try:
                packed = packed_initializer(t)
                if packed is not None:
                    initializers[t.name], self.packed[t.name] = self.const_value(packed[0]), packed[1]
                    continue
                initializers[t.name] = self.const_value(nh.to_array(t))
            except OnnxImportError as exc:
                raise OnnxImportError(f"initializer `{t.name}`: {exc}") from None
            except ValueError as exc:               # numpy's reshape of the data to the dims
                raise OnnxImportError(f"initializer `{t.name}`: {data_mismatch(t, exc)}") from None
        self.kv_setup()
        if self.streaming:
            self.one_step_sizevars()
        for inp in self.g.input:
            if inp.name in initializers:             # IR < 4: initializers are listed as inputs too
                continue
            self.graph_input(inp)
        self.check_sizevars()
        self.values.update(initializers)
        for i, node in enumerate(self.g.node):
            for x in [*node.input, *outer_reads(node)]:     # an If reads its branches' outer values
                if x:
                    self.consumers.setdefault(x, []).append(i)
        self.fusions = find_fusions(self)
        for fusion in self.fusions.values():
            self.skip.update(fusion.inner)
        problems = NodeProblems()
        for i, node in enumerate(self.g.node):
            if i in self.skip:
                continue
            fused = [self.g.node[j] for j in self.fusions[i].inner] if i in self.fusions else []
            outputs = [o for n in [node, *fused] for o in n.output]
            if problems.blocked(x for n in [node, *fused] for x in [*n.input, *outer_reads(n)]):
                unsupported = _unsupported(node)    # known without its inputs
                if unsupported:
                    label = quoted(node.name) if node.name else f"#{i}"
                    problems.add(f"node {label} ({node.op_type}): {unsupported}", outputs)
                else:
                    problems.add_downstream(outputs)
                continue
            try:
                self.node(i, node)
            except OnnxImportError as exc:          # the others are tried too: one run lists them all
                problems.add(str(exc), outputs)
        problems.raise_any()
        presents = {p.present for p in self.kv_pairs}
        for o in self.outputs:
            if o not in presents:                    # the cache tables hold them
                self.graph_output(o)
        if not self.unroll_layers:
            self._claim(None)
            fold_layers(self, {self.dsl_name(o) for o in self.outputs if o not in presents})
        metadata = {}
        if self.kv_pairs:
            cap = self.cache_capacity
            self.sizevars[decoder.KV] = cap
            logits = [self.dsl_name(o) for o in self.outputs if o not in presents]
            inputs = {i.name for i in self.g.input}
            ids = [v.var for k, v in self.values.items() if k in inputs and v.var is not None
                   and v.dtype in ("i32", "i64")]
            metadata = {f"dynamic.{decoder.KV}": cap, "generate.capacity": cap}
            if len(logits) == 1:
                metadata["generate.logits"] = logits[0]
            if len(ids) == 1:
                metadata["generate.input"] = ids[0]
        for size, bound in self.run_time_sizes.items():
            self.sizevars[size] = bound
            metadata[f"dynamic.{size}"] = bound
        for sv, why in self.fixed.items():         # the binder refuses to move them (openinfer/ir/bind.py)
            metadata[f"{FIXED_META}{sv}"] = why
        self.generate_roles = {k: v for k, v in metadata.items() if k.startswith("generate.")}
        return ImportedModel(self.name, self.render(), self.tensors, dict(sorted(self.sizevars.items())),
                             {k: v for k, v in self.onnx_to_dsl.items() if k != v}, self.source_name,
                             metadata=metadata)

    def kv_setup(self) -> None:
        """A decode step's past/present pairs (openinfer/onnx/decoder.py), checked against
        `cache_capacity`, and the counter every step reads."""
        self.kv_pairs = decoder.find_kv_pairs(self.g)
        params = {p.length for p in self.kv_pairs}
        self.past_param = next(iter(params)) if params else None
        if len(params) > 1:
            raise OnnxImportError("the past key/values have different symbolic lengths "
                                  f"({', '.join(sorted(params))}): a decode step's cache has one")
        if self.kv_pairs and self.cache_capacity is None:
            first = self.kv_pairs[0]
            raise OnnxImportError(f"the model is a decode step with past/present key-values ({first.past} -> "
                                  f"{first.present}, ...): give the tokens its cache holds with --cache-capacity N")
        if self.cache_capacity is not None:
            if not self.kv_pairs:
                raise OnnxImportError("--cache-capacity: the model has no past/present key-values (a graph input "
                                      "Concat'ed along a symbolic axis into a graph output)")
            if isinstance(self.cache_capacity, bool) or not isinstance(self.cache_capacity, int) or \
                    self.cache_capacity < 1:
                raise OnnxImportError(f"--cache-capacity {self.cache_capacity!r}: expected an integer >= 1")
            if self.past_param in self.user_sizevars:
                raise OnnxImportError(f"--sizevar {self.past_param}: the past length of a decode step is the cache's, "
                                      "set by --cache-capacity and at run time")
            self.kv_pairs = [dataclasses.replace(p, table=self.fresh(p.table)) for p in self.kv_pairs]
            self.used.add(decoder.KV)
            decoder.declare_state(self, self.cache_capacity)

    def graph_input(self, inp) -> None:
        t = inp.type.tensor_type
        if not inp.type.HasField("tensor_type") or t.elem_type not in ONNX_DTYPES:
            raise OnnxImportError(f"graph input `{inp.name}`: only tensors of "
                                  f"{', '.join(sorted(set(ONNX_DTYPES.values())))} are supported")
        if not t.HasField("shape"):     # no dims would read as a scalar
            raise OnnxImportError(f"graph input `{inp.name}` has no shape (not even a rank): give it one in the "
                                  "model, with a dim_param for each size --sizevar NAME=VALUE sets")
        dims = []
        for k, d in enumerate(t.shape.dim):
            if d.HasField("dim_value"):
                dims.append(Dim(d.dim_value))
            elif d.HasField("dim_param") and self.kv_pairs and d.dim_param == self.past_param:
                dims.append(decoder.past_dim(self.cache_capacity))
            elif d.HasField("dim_param"):
                dims.append(self.symbolic_dim(d.dim_param, inp.name))
            else:
                raise OnnxImportError(f"graph input `{inp.name}`: dim {k} has neither a size nor a name; "
                                      f"give it a dim_param in the model and its value with --sizevar")
        if any(p.past == inp.name for p in self.kv_pairs):     # a cache table holds it
            self.past_inputs.add(inp.name)
            self.values[inp.name] = Value(ONNX_DTYPES[t.elem_type], tuple(dims))
            return
        if inp.name not in self.onnx_to_dsl and is_identifier(inp.name):
            self.onnx_to_dsl[inp.name] = inp.name
            self.used.add(inp.name)
        problem = shape_problem([d.size for d in dims], ONNX_DTYPES[t.elem_type], self.sizevars)
        if problem:
            raise OnnxImportError(f"graph input `{inp.name}`: {problem}")
        var = self.dsl_name(inp.name)
        v = Value(ONNX_DTYPES[t.elem_type], tuple(dims), var=var)
        self.declare("dynamic", var, v.dtype, v.dims, inp.name)
        self.values[inp.name] = v

    def one_step_sizevars(self) -> None:
        """Streaming: the symbolic sequence dim of a graph input that a recurrent node reads as X
        is 1 unless --sizevar gives it (a value other than 1 is then the handler's error)."""
        inputs = {i.name: i for i in self.g.input}
        for node in self.g.node:
            if node.op_type not in ("RNN", "GRU", "LSTM") or not node.input or node.input[0] not in inputs:
                continue
            layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
            dims = inputs[node.input[0]].type.tensor_type.shape.dim
            if len(dims) == 3 and layout in (0, 1) and dims[layout].HasField("dim_param"):
                param = dims[layout].dim_param
                if param not in self.user_sizevars and sanitize(param) not in self.user_sizevars:
                    self.user_sizevars[param] = 1

    def check_sizevars(self) -> None:
        known = set(self.sizevar_names) | set(self.sizevar_names.values())
        unknown = sorted(k for k in self.user_sizevars if k not in known)
        if unknown:
            have = ", ".join(sorted(self.sizevar_names.values())) or "none"
            raise OnnxImportError(f"--sizevar {', '.join(unknown)}: the model has no such symbolic dim "
                                  f"(its symbolic dims: {have})")

    def graph_output(self, onnx_name: str) -> None:
        v = self.values.get(onnx_name)
        if v is None:
            raise OnnxImportError(f"graph output `{onnx_name}` is computed by no node")
        out = self.dsl_name(onnx_name)
        if v.var == out:
            return
        if v.var is None:                            # folded to a constant: the output is that constant
            self.tensor(v, onnx_name)
            return
        # an input, another output or an Identity's alias: the output gets its own copy
        self.declare("volatile", out, v.dtype, v.dims, onnx_name)
        self.lines.append((f"op reshape({v.var}) >> {out};", f"graph output {quoted(onnx_name)} (a copy of {v.var})"))

    def subgraph(self, graph, where: str) -> None:
        """Imports the nodes of a subgraph (an If's branch) in the current scope, where they read
        the enclosing scopes' values by name; its initializers are constants."""
        import onnx.numpy_helper as nh

        for t in graph.initializer:
            self.values[t.name] = self.const_value(nh.to_array(t))
        for k, node in enumerate(graph.node):
            self.node(None, node, quoted(node.name) if node.name else f"{where}#{k}")

    def node(self, index: int | None, node, label: str | None = None) -> None:
        """Imports the graph's node `index`, or (index None) a subgraph's node, named `label`."""
        if index is not None and index in self.fusions and apply_fusion(self, index, self.node):
            self._claim(module_path(node))
            return
        label = label or (quoted(node.name) if node.name else f"#{index}")

        def fail(message: str):
            raise OnnxImportError(f"node {label} ({node.op_type}): {message}")

        unsupported = _unsupported(node)
        if unsupported:
            fail(unsupported)
        support = SUPPORTED_OPS[node.op_type]
        import onnx.helper as oh

        attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
        ins = []
        for x in node.input:
            if not x:
                ins.append(None)
            elif x not in self.values:
                fail(f"input `{x}` is computed by no earlier node")
            else:
                ins.append(self.values[x])
        ctx = NodeContext(self, node, attrs, ins, fail, label)
        self._claim(None)
        pair = next((p for p in self.kv_pairs if p.present == node.output[0]), None)
        if pair is not None:
            decoder.append_and_read(ctx, pair, self.cache_capacity)
        else:
            if self.kv_pairs:
                decoder.runtime_inputs(ctx)
            support.handler(ctx)
        self._claim(module_path(node))
        sized, runtime = (any(v is not None and getattr(v, flag) for v in ctx.ins) for flag in ("sized", "runtime"))
        for o in node.output:                # folded from sizes: sized too; from the past length: runtime
            v = self.values.get(o)
            if v is not None and v.const is not None and v.var is None:
                v.sized = v.sized or sized
                v.runtime = v.runtime or runtime or (bool(self.kv_pairs) and decoder.depends_on_kv(v))

    def _claim(self, node_name: str | None) -> None:
        """Marks the lines and volatile declarations emitted since the last claim as `node_name`'s."""
        self.line_nodes += [node_name] * (len(self.lines) - len(self.line_nodes))
        self.volatile_nodes += [node_name] * (len(self.decls["volatile"]) - len(self.volatile_nodes))

    # -- output ---------------------------------------------------------------------------------
    def render(self) -> str:
        producer = " ".join(p for p in (self.model.producer_name, self.model.producer_version) if p)
        head = [f"// {self.name}: imported from {quoted(self.source_name)} by `openinfer import` "
                f"(ONNX opset {self.opset}{', from ' + quoted(producer) if producer else ''})."]
        if self.sizevar_names:
            head.append("// Sizevars (symbolic dims of the inputs): " + ", ".join(
                f"{sv} = {self.sizevars[sv]}" + (f' (ONNX {quoted(p)})' if p != sv else "")
                for p, sv in self.sizevar_names.items()))
        if self.kv_pairs:
            head.append(f"// A decode step: the past key/values are the persistent cache tables below "
                        f"({self.cache_capacity} tokens), appended to each step; `{decoder.KV}` is the keys "
                        "attended to (the tokens so far), set by each step's cache read.")
            head.append("// For `openinfer generate` (the .oinf metadata): "
                        + ", ".join(f"{k} = {v}" for k, v in sorted(self.generate_roles.items())))
        if self.fixed:
            head.append("// Fixed at import (a constant holds values for these sizes only, so --dynamic cannot move "
                        "them): " + ", ".join(f"{sv} (`{var}`)" for sv, var in sorted(self.fixed.items())))
        out = head
        self._claim(None)
        layers = Layers(self.line_nodes, [code for code, _ in self.lines])
        for kind in ("dynamic", "constant", "persistent", "volatile"):
            if self.decls[kind]:
                out.append(f"{kind} {{")
                if kind == "volatile":
                    out += layers.grouped(self.decls[kind], self.volatile_nodes, _line)
                else:
                    out += [_line(code, note) for code, note in self.decls[kind]]
                out.append("}")
        out.append("block entry {")
        out += layers.grouped(self.lines, self.line_nodes, _line)
        out.append("    return;")
        out.append("}")
        for block, lines in self.blocks:
            out += [f"block {block} {{", *(_line(code, note) for code, note in lines), "    return;", "}"]
        return "\n".join(out) + "\n"


def _unsupported(node) -> str | None:
    """Why the importer has no handler for `node` (its domain or op type), None when it has one."""
    if node.domain not in ("", "ai.onnx"):
        return f"ops of domain `{node.domain}` are not supported"
    if node.op_type in REFUSED_OPS:
        return REFUSED_OPS[node.op_type]
    if node.op_type not in SUPPORTED_OPS:
        return f"op type {node.op_type} is not supported{LIST_OPS_HINT}"
    return None


def _line(code: str, note: str) -> str:
    code = "    " + code
    return f"{code:<50}  // {note}" if note else code
