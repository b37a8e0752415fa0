"""Repeated layers of an imported model: one DSL `loop` where they are equivalent, headers where not.

Exporters name a model's repeated modules by index (`/encoder/layer.3/attention/MatMul`, or
dynamo's name scopes: openinfer/onnx/context.py `module_path`); the importer writes every node
out in order, so a model's N layers are N runs of lines, one after the other. Where those
runs are the same lines up to renaming (their variables, weights and cache tables; the shapes
equal), `fold_layers` rewrites them as the hand-written decoder (examples/decoder.py) has them:

    constant {
        h_ln_1_weight(l): f32[32] @pattern("transformer.h.{l}.ln_1_weight");
    }
    persistent {
        cache_past_key_values_key(l, t): f32[1, 4, 8] @table @fixed(l=2, t=16);
    }
    block entry {
        loop transformer_h (l in 0..2) {
            op layer_norm(x, h_ln_1_weight[l], ...) >> ln;
            cache.write k_row >> cache_past_key_values_key[l, posv];
            ...
            op add(h, mlp) >> x;          // the layer's output written into its input
        }
    }

- a weight that differs per layer becomes a prefix table: its tensors are renamed
  `<family>.<k>.<rest>` in the `.oinf` (the importer names them), which `@pattern` matches;
  a constant equal in every layer stays one plain constant (the copies are dropped);
- a decode step's per-layer cache tables (openinfer/onnx/decoder.py) become one table with a
  leading layer index, written and read at `[l, ...]`;
- the residual stream, the value each layer reads from the one before, becomes one variable:
  the first layer's input, written with the layer's output at the end of the body (the op
  computing the output writes it directly where the input is no longer read after, else a copy
  ends the body); where the loop may not write that input (a graph input, a value read after
  the layers), the first layer's output, the input copied into it before the loop; a graph
  output the last layer computes is copied out after the loop;
- what the first layer computes from values before the layers and the later layers reuse (an
  exporter shares RoPE's unsqueezed cos/sin) moves before the loop.

Anything else (a layer that differs, a value of one layer read elsewhere, a quantized weight)
keeps the unrolled form, each layer under a header (`Layers`): the loop is a rewriting of text
the importer has written, checked before anything changes, never a reason for an import to fail
(openinfer still parses and binds the result before it is handed out).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import numpy as np

from .context import sanitize

#: A path segment naming one of several repeated modules, as exporters write them: `layer.0`,
#: `layers.3`, `h.11`, `layer1.0` (PyTorch's ModuleList / Sequential index after a dot).
_REPEATED = re.compile(r"(.+)\.(\d+)")


@dataclass(frozen=True)
class Loop:
    """The owner of a folded family's lines and declarations (instead of an ONNX node name):
    they print under `header`."""

    header: str


def layer_of(owner) -> tuple[str, str, int] | None:
    """(layer, family, index) of an ONNX node name: `/encoder/layer.3/attention/MatMul` ->
    ("encoder.layer.3", "encoder.layer", 3): the outermost indexed segment (not the node's own,
    last segment) and the path before it."""
    if not isinstance(owner, str) or not owner:
        return None
    parts = [p for p in owner.split("/") if p][:-1]
    for k, part in enumerate(parts):
        m = _REPEATED.fullmatch(part)
        if m:
            family = ".".join([*parts[:k], m[1]])
            return f"{family}.{m[2]}", family, int(m[2])
    return None


class Layers:
    """Repeated layers made visible in the printed graph: where the nodes of a family with two
    or more members (`encoder.layer.0`, `encoder.layer.1`, ...) begin, a blank line and a header,
    `// layer encoder.layer.1 — same ops as encoder.layer.0` when its op sequence equals the
    family's first member's. Lines from no layer between two lines of one layer stay in it. A
    folded family's loop (owner `Loop`) is set apart the same way, under its own header."""

    def __init__(self, line_nodes: list, line_codes: list[str]):
        found = [layer_of(n) for n in line_nodes]
        families: dict[str, set[str]] = {}
        for layer in found:
            if layer is not None:
                families.setdefault(layer[1], set()).add(layer[0])
        #: layer -> (family, index), for the families that repeat
        self.layer = {name: (family, index) for layer in found if layer is not None
                      for name, family, index in [layer] if len(families[family]) > 1}
        self.first: dict[str, str] = {}
        for name, (family, _index) in sorted(self.layer.items(), key=lambda kv: kv[1][1]):
            self.first.setdefault(family, name)
        self.ops: dict[str, list[str]] = {}
        for name, code in zip(self.assign(line_nodes), line_codes, strict=True):
            if isinstance(name, str):
                self.ops.setdefault(name, []).append(code.split("(", 1)[0])

    def assign(self, owners: list) -> list:
        """The layer each item is printed in (a `Loop` for a folded family's; None: none)."""
        names = []
        for node in owners:
            layer = layer_of(node)
            names.append(node if isinstance(node, Loop) else
                         layer[0] if layer is not None and layer[0] in self.layer else None)
        last = {name: k for k, name in enumerate(names) if name is not None}
        current = None
        for k, name in enumerate(names):
            if name is None and current is not None and last[current] > k:
                names[k] = current              # an item from no layer inside one: it stays there
            current = names[k]
        return names

    def header(self, name) -> str:
        if isinstance(name, Loop):
            return f"    // {name.header}"
        family, _ = self.layer[name]
        first = self.first[family]
        if name == first:
            return f"    // layer {name}"
        same = "same ops as" if self.ops.get(name) == self.ops.get(first) else "other ops than"
        return f"    // layer {name} — {same} {first}"

    def grouped(self, items: list[tuple[str, str]], owners: list, line) -> list[str]:
        """`items` (code, note) printed by `line`, each group of one layer under its header."""
        out, current = [], None
        for (code, note), name in zip(items, self.assign(owners), strict=True):
            if name != current:
                if out:
                    out.append("")
                if name is not None:
                    out.append(self.header(name))
                current = name
            out.append(line(code, note))
        return out


# ---------------------------------------------------------------------------------------------
# folding equivalent layers into a loop


class _Unequal(Exception):
    """The family's layers are not the same lines up to renaming: they stay unrolled."""


#: the tokens of an op line: strings, names, numbers, `..`, `>>`, single characters
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\.|>>|\S')
_DECL_NAME = re.compile(r"[A-Za-z_]\w*")
#: a decode step's cache table (openinfer/onnx/decoder.py): `name(t): TYPE @table @fixed(t=N);`
_CACHE_TABLE = re.compile(r"(?P<name>\w+)\((?P<index>\w+)\): (?P<type>.+) @table @fixed\((?P=index)=(?P<rows>\d+)\);")


@dataclass
class _Line:
    """An op line as tokens: (text, start, end) each, and which of them are variables."""

    code: str
    tokens: list[tuple[str, int, int]]
    is_var: list[bool]

    @property
    def variables(self) -> list[str]:
        return [t for (t, _, _), v in zip(self.tokens, self.is_var, strict=True) if v]

    @property
    def written(self) -> str | None:
        """The variable after `>>` (an op's output, a cache write's table)."""
        texts = [t for t, _, _ in self.tokens]
        if ">>" not in texts:
            return None
        after = texts.index(">>") + 1
        return next((t for (t, _, _), v in zip(self.tokens[after:], self.is_var[after:], strict=True) if v), None)

    @property
    def reads(self) -> list[str]:
        """The variables the line reads: all but its output (a cache write's table is read too:
        it is written at an index)."""
        names = self.variables
        if self.written is not None and self.tokens[0][0] == "op":
            names.remove(self.written)
        return names

    def rewritten(self, replace) -> str:
        """The code with each variable token replaced by `replace(name, next token)`, which
        returns (text, whether it consumed the next token)."""
        out, at, skip = [], 0, False
        for k, ((text, start, end), var) in enumerate(zip(self.tokens, self.is_var, strict=True)):
            if skip:
                at, skip = end, False
                continue
            if var:
                after = self.tokens[k + 1][0] if k + 1 < len(self.tokens) else None
                new, skip = replace(text, after)
                out += [self.code[at:start], new]
                at = end
        return "".join(out) + self.code[at:]


def _parse(code: str, declared: set[str]) -> _Line:
    tokens = [(m[0], m.start(), m.end()) for m in _TOKEN.finditer(code)]
    texts = [t for t, _, _ in tokens]
    is_var = []
    for k, text in enumerate(texts):
        before = texts[k - 1] if k else None
        after = texts[k + 1] if k + 1 < len(texts) else None
        # not the op's name (`op add(`), a setting's name (`axis=`) or a part of `cache.read`
        is_var.append(text in declared and before not in ("op", ".") and after not in ("=", "."))
    return _Line(code, tokens, is_var)


def _indexed(strings: list[str]) -> tuple[str, str, list[str]] | None:
    """(prefix, suffix, middles) when the strings are `prefix + digits + suffix` each, the digits
    differing: `h_0_ln_weight`, `h_1_ln_weight` -> ("h_", "_ln_weight", ["0", "1"])."""
    first = strings[0]
    pre = 0
    while pre < len(first) and all(len(s) > pre and s[pre] == first[pre] for s in strings):
        pre += 1
    suf = 0
    while suf < len(first) - pre and all(len(s) - pre > suf and s[-1 - suf] == first[-1 - suf] for s in strings):
        suf += 1
    while pre and first[pre - 1].isdigit():     # the digits of `layer 10, 11` begin before what differs
        pre -= 1
    while suf and first[len(first) - suf].isdigit():
        suf -= 1
    middles = [s[pre:len(s) - suf] for s in strings]
    if not all(m.isdigit() for m in middles):
        return None
    return first[:pre], first[len(first) - suf:], middles


@dataclass
class _Decl:
    """A declaration: its section (`constant`, `volatile`, ...), its code and its comment."""

    kind: str
    code: str
    note: str

    @property
    def type_text(self) -> str:
        """The declaration after the name: `: f32[1, 32];`, `(t): f32[4] @table ...;`."""
        return self.code[_DECL_NAME.match(self.code).end():]


def fold_layers(imp, output_vars: set[str]) -> None:
    """Each family of repeated layers that are the same lines up to renaming becomes one `loop`
    (see the module's docstring); the others are left as they are. Rewrites `imp`'s lines,
    declarations, tensors and names in place. `output_vars`: the graph outputs' variables."""
    tried: set[str] = set()
    while True:
        family = next((f for f in _families(imp) if f[0] not in tried), None)
        if family is None:
            return
        tried.add(family[0])
        try:
            _Fold(imp, output_vars, *family).apply()
        except _Unequal:
            pass


def _families(imp) -> list[tuple[str, list[str], list[range]]]:
    """(family, its layers' names, each layer's lines) for the families whose layers' lines are
    consecutive runs, in index order."""
    layers = Layers(imp.line_nodes, [code for code, _ in imp.lines])
    names = layers.assign(imp.line_nodes)
    out = []
    for family in dict.fromkeys(f for f, _ in layers.layer.values()):
        members = sorted((n for n, (f, _) in layers.layer.items() if f == family), key=lambda n: layers.layer[n][1])
        spans = []
        for name in members:
            at = [k for k, n in enumerate(names) if n == name]
            if not at or at[-1] - at[0] + 1 != len(at):
                break
            spans.append(range(at[0], at[-1] + 1))
        else:
            if all(a.stop == b.start for a, b in zip(spans, spans[1:], strict=False)):
                out.append((family, members, spans))
    return out


@dataclass
class _Plan:
    """What a fold writes: the names it chose, the declarations it drops or replaces, what each
    variable becomes in the body and after the loop, and the copies around it."""

    hoisted: list[int]                                  # the first layer's lines moved before the loop
    body0: list[int]                                    # the first layer's lines the body is made of
    index: str = ""                                     # the loop variable
    loop: str = ""                                      # the loop's name
    removed: set = field(default_factory=set)           # declarations dropped
    declare: dict = field(default_factory=dict)         # variable -> its new declaration (code, note)
    local: set = field(default_factory=set)             # the body's own values
    body: dict = field(default_factory=dict)            # in the body: variable -> its replacement
    tables: dict = field(default_factory=dict)          # a layer's cache table -> the merged table
    after: dict = field(default_factory=dict)           # after the loop: the last layer's value -> the body's
    copies_before: list = field(default_factory=list)   # (carrier, graph input) copied before the loop
    copies_at_end: list = field(default_factory=list)   # (input, output) copied at the end of the body
    copies_out: list = field(default_factory=list)      # (graph output, the body's value) after the loop
    renamed: dict = field(default_factory=dict)         # a layer's constant -> the one or the table holding it


class _Fold:
    """One family folded into a loop: the checks (each failure raises `_Unequal`), then `apply`."""

    def __init__(self, imp, output_vars: set[str], family: str, members: list[str], spans: list[range]):
        self.imp, self.family, self.members, self.spans = imp, family, members, spans
        self.n = len(members)
        self.outputs = output_vars
        self.decl: dict[str, _Decl] = {}
        for kind, decls in imp.decls.items():
            for code, note in decls:
                self.decl[_DECL_NAME.match(code)[0]] = _Decl(kind, code, note)
        self.lines = [_parse(code, set(self.decl)) for code, _ in imp.lines]
        start, stop = spans[0].start, spans[-1].stop
        #: the region of each line: -1 before the family, k in layer k, n after it
        self.region = [-1 if i < start else self.n if i >= stop else
                       next(k for k, s in enumerate(spans) if i in s) for i in range(len(self.lines))]
        self.seen: dict[str, set[int]] = {}       # variable -> the regions it occurs in
        self.writes: dict[str, set[int]] = {}     # variable -> the regions that write it
        # the blocks after entry (an If's branches) are a region of their own, n + 1: a value
        # they read is read outside the layers, and their lines are not rewritten
        others = [(_parse(code, set(self.decl)), self.n + 1) for _, lines in imp.blocks for code, _ in lines]
        for line, region in [*zip(self.lines, self.region, strict=True), *others]:
            for v in line.variables:
                self.seen.setdefault(v, set()).add(region)
            if line.written is not None:
                self.writes.setdefault(line.written, set()).add(region)

    # -- the checks ---------------------------------------------------------------------------
    def signature(self, i: int) -> tuple[str, ...]:
        line = self.lines[i]
        return tuple("" if var else t for (t, _, _), var in zip(line.tokens, line.is_var, strict=True))

    def hoisted(self) -> list[int]:
        """The first layer's lines that the second does not repeat: what an exporter computes once,
        in its first user, from values before the layers (RoPE's unsqueezed cos and sin), and the
        later layers reuse. They go before the loop, where they must be computable: from values
        before the layers or each other only, their outputs written by them alone."""
        first, second = self.spans[0], self.spans[1]
        ops = difflib.SequenceMatcher(None, [self.signature(i) for i in first], [self.signature(i) for i in second],
                                      autojunk=False).get_opcodes()
        if any(tag in ("insert", "replace") for tag, *_ in ops):
            raise _Unequal("a later layer has lines the first has not")
        lines = [first[k] for tag, a, b, _, _ in ops if tag == "delete" for k in range(a, b)]
        outputs = {self.lines[i].written for i in lines}
        for i in lines:
            v = self.lines[i].written
            if v is None or self.decl[v].kind != "volatile" or \
                    any(self.lines[j].written == v for j in first if j not in lines) or self.writes[v] != {0}:
                raise _Unequal(f"`{v}` cannot be computed before the layers")
            for r in self.lines[i].reads:
                if r not in outputs and self.writes.get(r, set()) - {-1}:
                    raise _Unequal(f"`{v}` reads `{r}`, computed by the layers")
            if any(v in self.lines[j].variables for j in first if j < i and j not in lines):
                raise _Unequal(f"`{v}` is read before it is computed")
        return lines

    def align(self, bodies: list[list[int]]) -> list[dict[str, str]]:
        """For each layer, its variables -> the first layer's at the same places (a bijection)."""
        maps = []
        for body in bodies:
            if len(body) != len(bodies[0]):
                raise _Unequal("the layers have different numbers of lines")
            fwd: dict[str, str] = {}
            back: dict[str, str] = {}
            for i, i0 in zip(body, bodies[0], strict=True):
                a, b = self.lines[i0], self.lines[i]
                if len(a.tokens) != len(b.tokens) or a.is_var != b.is_var:
                    raise _Unequal("lines differ")
                for (t0, _, _), (t, _, _), var in zip(a.tokens, b.tokens, a.is_var, strict=True):
                    if not var:
                        if t0 != t:
                            raise _Unequal(f"`{t0}` against `{t}`")
                    elif fwd.setdefault(t, t0) != t0 or back.setdefault(t0, t) != t:
                        raise _Unequal(f"`{t}` renames inconsistently")
            maps.append(fwd)
        return maps

    def layer_local(self, name: str, k: int, also: set[int] = frozenset()) -> bool:
        return self.seen[name] <= {k} | also

    def classify(self, names: list[str], carry_of: dict[str, str]) -> str:
        """What a variable of the body is, by its names in each layer: `shared` (one variable),
        `carry` (the residual stream: the first layer's input), `local` (a value of the
        layer's own), `constant` (a weight of each layer), `cache` (a cache table of each layer)."""
        v0 = names[0]
        if all(v == v0 for v in names):
            return "shared"
        decls = [self.decl[v] for v in names]
        same_type = all(d.type_text == decls[0].type_text for d in decls)
        if v0 in carry_of:
            return "carry"
        if not same_type or len(set(names)) != self.n:
            raise _Unequal(f"`{v0}`: the layers' variables differ in type, or repeat")
        kinds = {d.kind for d in decls}
        if kinds == {"constant"} and all(self.layer_local(v, k) for k, v in enumerate(names)):
            return "constant"
        if kinds == {"persistent"} and all(self.layer_local(v, k) for k, v in enumerate(names)) and \
                _CACHE_TABLE.fullmatch(decls[0].code):
            return "cache"
        if kinds == {"volatile"}:
            carried = v0 in carry_of.values()
            for k, v in enumerate(names):
                also = ({k + 1} if carried and k + 1 < self.n else set()) | ({self.n} if k == self.n - 1 else set())
                if not self.layer_local(v, k, also) or (v in self.outputs and k < self.n - 1):
                    raise _Unequal(f"`{v}` is read outside its layer")
            return "local"
        raise _Unequal(f"`{v0}`: not a value the loop can hold")

    def carries(self, names: dict[str, list[str]], maps: list[dict[str, str]]) -> dict[str, str]:
        """The residual stream: the first layer's input X (computed before the layers, or a graph
        input) -> Y, the first layer's value that layer k + 1 reads where the first reads X."""
        out: dict[str, str] = {}
        for v0, vs in names.items():
            if vs[1] == v0 or 0 not in self.writes.get(vs[1], ()):
                continue
            # layer k reads what layer k - 1 wrote: the same variable of the first layer each time
            ys = {maps[k - 1].get(vs[k]) for k in range(1, self.n)}
            if len(ys) != 1 or None in ys or any(k - 1 not in self.writes.get(vs[k], ()) for k in range(1, self.n)):
                raise _Unequal(f"`{v0}` is read by each layer, but not as the one before wrote it")
            y = ys.pop()
            if self.writes.get(v0, set()) - {-1} or self.decl[v0].type_text != self.decl[y].type_text or \
                    y in out.values():
                raise _Unequal(f"`{v0}` cannot carry the layers' output")
            out[v0] = y
        if set(out) & set(out.values()):
            raise _Unequal("carried values chain")
        return out

    def owned(self, x: str) -> bool:
        """Whether the loop may write the layers' input `x`: a value computed before the layers
        that nothing else reads (not a graph input, nor read after the layers)."""
        return self.decl[x].kind == "volatile" and not self.seen.get(x, set()) - {-1, 0} and x not in self.outputs

    def carriers(self, body0: list[int], carry_of: dict[str, str]) -> dict[str, tuple[str, str]]:
        """The residual stream as one variable, for each X -> Y (`carries`): X -> (the carrier,
        how). `in place`: the body writes the layer's output into X; `at the end`: a copy of Y into
        X ends the body (the body reads X after computing Y); `before`: where the loop may not
        write X (a graph input), the carrier is Y, X copied into it before the loop."""
        out = {}
        for x, y in carry_of.items():
            reads_x = [p for p, i in enumerate(body0) if x in self.lines[i].reads]
            writes_y = [p for p, i in enumerate(body0) if self.lines[i].written == y]
            in_place = not reads_x or max(reads_x) < min(writes_y)
            if self.owned(x):
                out[x] = (x, "in place" if in_place else "at the end")
            elif in_place:
                out[x] = (y, "before")
            else:
                raise _Unequal(f"`{x}` is read after the layer's output is computed, and the loop may not write it")
        return out

    # -- the rewrite --------------------------------------------------------------------------
    def apply(self) -> None:
        """Checks the family (raising `_Unequal`, nothing changed yet), then rewrites it."""
        hoisted = self.hoisted()
        body0 = [i for i in self.spans[0] if i not in hoisted]
        maps = self.align([body0] + [list(s) for s in self.spans[1:]])
        inverse = [{b: a for a, b in m.items()} for m in maps]
        order = list(dict.fromkeys(v for i in body0 for v in self.lines[i].variables))
        names = {v0: [inv[v0] for inv in inverse] for v0 in order}
        carry_of = self.carries(names, maps)
        kinds = {v0: self.classify(names[v0], carry_of) for v0 in order}
        same = {v0: self.same_constant(names[v0]) for v0 in order if kinds[v0] == "constant"}
        carriers = self.carriers(body0, carry_of)
        self.rewrite(_Plan(hoisted, body0), names, kinds, same, carry_of, carriers)

    def rewrite(self, plan: _Plan, names, kinds, same, carry_of, carriers) -> None:
        imp, n = self.imp, self.n
        taken = set(imp.used) | set(imp.sizevars)
        lv = plan.index = _fresh(imp, "l", taken)
        plan.loop = _fresh(imp, sanitize(self.family), taken)
        rests: set[str] = set()
        for v0, vs in names.items():
            kind = kinds[v0]
            if kind == "constant" and same[v0]:
                plan.removed.update(vs[1:])         # the same in every layer: one constant
                for v in vs[1:]:
                    imp.tensors.pop(v, None)
                    plan.renamed[v] = v0
            elif kind == "constant":
                table = _fresh(imp, self.table_name(vs), taken)
                rest = self.tensor_rest(v0, table, rests)
                for k, v in enumerate(vs):
                    imp.tensors[f"{self.family}.{k}.{rest}"] = imp.tensors.pop(v)
                plan.removed.update(vs[1:])
                plan.renamed.update((v, table) for v in vs)
                plan.declare[v0] = (f"{table}({lv}){self.decl[v0].type_text.rstrip(';')} "
                                    f"@pattern(\"{self.family}.{{{lv}}}.{rest}\");", self.table_note(vs, lv))
                plan.body[v0] = f"{table}[{lv}]"
            elif kind == "cache":
                m = _CACHE_TABLE.fullmatch(self.decl[v0].code)
                table = _fresh(imp, self.table_name(vs), taken)
                plan.removed.update(vs[1:])
                plan.declare[v0] = (f"{table}({lv}, {m['index']}): {m['type']} @table "
                                    f"@fixed({lv}={n}, {m['index']}={m['rows']});", self.table_note(vs, lv))
                plan.tables[v0] = table
            elif kind == "local":
                plan.local.add(v0)
                plan.removed.update(vs[1:-1])
                if vs[-1] in self.outputs:          # a graph output: copied out after the loop
                    plan.copies_out.append((vs[-1], v0))
                else:
                    plan.removed.add(vs[-1])
                    plan.after[vs[-1]] = v0
        for x, (carrier, how) in carriers.items():
            y = carry_of[x]
            if how == "in place":
                plan.body[y] = x
                plan.removed.add(y)
                plan.local.discard(y)
            elif how == "at the end":
                plan.copies_at_end.append((x, y))
            else:
                plan.body[x] = y
                plan.copies_before.append((y, x))
            plan.after = {v: carrier if t == y else t for v, t in plan.after.items()}
            plan.copies_out = [(out, carrier if src == y else src) for out, src in plan.copies_out]
        self.write(plan)

    def write(self, plan: _Plan) -> None:
        """The lines: those before the layers, the hoisted ones, the loop (the first layer's lines
        renamed), the copies out of it, the lines after (the last layer's values renamed); the
        declarations of the other layers' values dropped, the tables' replacing the first's."""
        imp, n, lv = self.imp, self.n, plan.index
        indexed = " and ".join(what for what, present in (("weights", any(t.endswith(f"[{lv}]") for t in
                                                                            plan.body.values())),
                                                           ("caches", bool(plan.tables))) if present)
        owner = Loop(f"{n} layers {self.members[0]} .. {self.members[-1]}: the same ops, one loop over {lv}"
                     + (f" (their {indexed} indexed by {lv})" if indexed else ""))

        def in_body(name: str, after: str | None) -> tuple[str, bool]:
            if name in plan.tables:
                return (f"{plan.tables[name]}[{lv}, ", True) if after == "[" else (f"{plan.tables[name]}[{lv}]", False)
            return plan.body.get(name, name), False

        start, stop = self.spans[0].start, self.spans[-1].stop
        lines, owners = imp.lines[:start], imp.line_nodes[:start]
        lines += [imp.lines[i] for i in plan.hoisted]
        lines += [(f"op reshape({x}) >> {y};", f"the layers' input, carried through the loop as `{y}`")
                  for y, x in plan.copies_before]
        owners += [None] * (len(lines) - len(owners))
        lines.append((f"loop {plan.loop} ({lv} in 0..{n}) {{", ""))
        lines += [("    " + self.lines[i].rewritten(in_body), imp.lines[i][1]) for i in plan.body0]
        lines += [(f"    op reshape({y}) >> {x};", f"the layer's output: the next layer's input `{x}`")
                  for x, y in plan.copies_at_end]
        lines.append(("}", ""))
        owners += [owner] * (len(lines) - len(owners))
        lines += [(f"op reshape({src}) >> {out};", f"graph output {out}: the last layer's")
                  for out, src in plan.copies_out]
        owners += [None] * (len(lines) - len(owners))
        for i in range(stop, len(imp.lines)):
            lines.append((self.lines[i].rewritten(lambda name, _after: (plan.after.get(name, name), False)),
                          imp.lines[i][1]))
            owners.append(imp.line_nodes[i])
        imp.lines[:], imp.line_nodes[:] = lines, owners

        hoisted = {self.lines[i].written for i in plan.hoisted}
        for kind, decls in imp.decls.items():
            kept, kept_owners = [], []
            for k, (code, note) in enumerate(decls):
                name = _DECL_NAME.match(code)[0]
                if name in plan.removed:
                    continue
                kept.append(plan.declare.get(name, (code, note)))
                if kind == "volatile":
                    was = imp.volatile_nodes[k]
                    kept_owners.append(None if name in hoisted else owner if name in plan.local else
                                       None if layer_of(was) is not None and layer_of(was)[1] == self.family else was)
            decls[:] = kept
            if kind == "volatile":
                imp.volatile_nodes[:] = kept_owners
        for onnx_name, var in list(imp.onnx_to_dsl.items()):
            if var in plan.removed or var in plan.declare:
                del imp.onnx_to_dsl[onnx_name]
        for sv, var in imp.fixed.items():          # the header's "Fixed at import" names what is declared
            imp.fixed[sv] = plan.renamed.get(var, var)

    def same_constant(self, names: list[str]) -> bool:
        """Whether a constant of each layer holds the same in all (a scalar: the same @init)."""
        arrays = [self.imp.tensors.get(v) for v in names]
        if all(a is None for a in arrays):
            return True         # `classify` compared their declarations, @init included
        if not all(isinstance(a, np.ndarray) for a in arrays):
            raise _Unequal(f"`{names[0]}`: a quantized weight (its scales are tensors of their own)")
        return all(a.dtype == arrays[0].dtype and np.array_equal(a, arrays[0], equal_nan=a.dtype.kind == "f")
                   for a in arrays)

    def table_name(self, names: list[str]) -> str:
        """A per-layer table's name: its layers' names without the layer index (`h_0_ln_weight`,
        `h_1_ln_weight` -> `h_ln_weight`), or the first layer's with `_layers`."""
        parts = _indexed(names)
        if parts is None:
            return f"{names[0]}_layers"
        prefix, suffix, _ = parts
        return "_".join(p for p in (prefix.rstrip("_"), suffix.lstrip("_")) if p) or f"{names[0]}_layers"

    def tensor_rest(self, v0: str, table: str, taken: set[str]) -> str:
        """What follows `<family>.<k>.` in a prefix table's tensor names: the first layer's name
        after its layer's (`model_h_0_ln_weight` -> `ln_weight`), else the table's name."""
        prefix = sanitize(self.members[0]) + "_"
        rest = v0[len(prefix):] if v0.startswith(prefix) and len(v0) > len(prefix) else table
        while rest in taken:
            rest += "_"
        taken.add(rest)
        return rest

    def table_note(self, names: list[str], lv: str) -> str:
        """The first layer's declaration comment with its index as `{l}` where each layer's
        comment differs by the index alone, else the first layer's as such."""
        notes = [self.decl[v].note for v in names]
        parts = _indexed(notes) if len(set(notes)) > 1 else None
        indices = [str(int(m.rsplit(".", 1)[1])) for m in self.members]
        if parts is not None and parts[2] == indices and indices == [str(k) for k in range(self.n)]:
            return f"{parts[0]}{{{lv}}}{parts[1]}"
        return f"{self.members[0]}: {notes[0]}" if notes[0] else ""


def _fresh(imp, base: str, taken: set[str]) -> str:
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    imp.used.add(name)
    return name
