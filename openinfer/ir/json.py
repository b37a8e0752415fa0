"""Graph JSON in the original's format (digest §3.10): what `serde_json` writes for its `Graph`.

The original serialized through `serde_json::to_value` and `to_string_pretty`, so:

- object keys are sorted, arrays keep their order, indentation is two spaces, empty arrays and
  objects print as `[]` and `{}`, there is no trailing newline;
- enums are externally tagged (`{"Op": {...}}`, `"Return"`), dtypes are Rust variant names;
- floats print as Rust's shortest round-trip form (`1.0`, `1e-6`, `0.00001`), and an f32 (an
  f32 init value) passes through f64 first, so f32 0.1 prints as `0.10000000149011612`.

`graph_to_json` reproduces that byte for byte; `graph_from_json` reads it back. Parse -> JSON ->
Graph is lossless except for source locations, and JSON -> Graph -> JSON is byte-identical for
JSON in this canonical form.

Non-finite floats have no JSON spelling. serde_json writes them as `null` (and then cannot read
them back). We write the strings "inf", "-inf" and "NaN" (Rust's own spellings) so that `-inf`
survives our round trip, and accept them when reading. A `null` attribute value is read as +inf:
the original DSL could produce no other non-finite value (`inf` was its only infinity, `-inf` a
parse error). A `null` init value cannot be recovered and is an error.
"""

from __future__ import annotations

import json as _json
import math
import re
import uuid as _uuid
from typing import Any

import numpy as np

from ..dtypes import BY_RUST, DSL_DTYPES, DTypeInfo, Kind
from ..errors import DslError, SourceLoc
from ..numerics import bf16_bits, bf16_decode, f8_bits, f8_decode
from .nodes import (
    Assign,
    Attr,
    AttrBool,
    AttrDimList,
    AttrDouble,
    AttrDType,
    AttrDTypeList,
    AttrFloat,
    AttrInt,
    AttrIntList,
    AttrStr,
    AttrUInt,
    AttrValue,
    AttrVar,
    Await,
    Barrier,
    Block,
    Branch,
    CacheAccess,
    CacheDecrement,
    CacheIncrement,
    CacheIndex,
    CacheRead,
    CacheReset,
    CacheSingle,
    CacheSlice,
    CacheWrite,
    Dep,
    Graph,
    InitValue,
    Loop,
    MemoryKind,
    Node,
    Op,
    Return,
    Transfer,
    VarDecl,
    VarRef,
    Yield,
)

_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "NaN": math.nan}
#: Loops nested deeper than this are refused when reading (the parser has the same limit).
MAX_LOOP_DEPTH = 64

# ============================================================================ writing


def graph_to_json(graph: Graph) -> str:
    """The graph as the original's `serde_json::to_string_pretty` writes it (no trailing newline)."""
    out: list[str] = []
    _dump(graph_to_value(graph), "", out)
    return "".join(out)


def graph_to_value(graph: Graph) -> dict:
    """The graph as plain JSON-compatible Python values (floats stay floats)."""
    return {
        "blocks": {name: {"name": b.name, "nodes": [_node(n) for n in b.nodes]} for name, b in graph.blocks.items()},
        "next_index": graph.next_index,
        "vars": {name: _var(v) for name, v in graph.vars.items()},
    }


def _var(v: VarDecl) -> dict:
    return {
        "auto_dim": list(v.auto_dim),
        "dims": list(v.dims),
        "dtype": v.dtype.rust,
        "fixed": [[name, size] for name, size in v.fixed],
        "init": None if v.init is None else _scalar(v.init.value, v.dtype),
        "kind": v.kind.value,
        "name": v.name,
        "pattern": v.pattern,
        "ref_name": v.ref_name,
        "table": v.table,
        "table_indices": list(v.table_indices),
    }


def _scalar(value: bool | int | float, dtype: DTypeInfo) -> dict:
    """The original's `ScalarValue`: plain numbers for byte-sized types, `{"bits": n}` for the rest."""
    name = dtype.name
    if name in ("f32", "f64"):
        return {dtype.rust: float(value)}
    if name == "f16":
        return {dtype.rust: {"bits": int(np.float16(value).view(np.uint16))}}
    if name == "bf16":
        return {dtype.rust: {"bits": int(bf16_bits(value))}}
    if name == "f8":
        return {dtype.rust: {"bits": int(f8_bits(value))}}
    if name == "bool":
        return {dtype.rust: bool(value)}
    if name == "t1":
        return {dtype.rust: {"bits": 0 if value < 0 else 1}}
    if dtype.is_packed or dtype.kind is Kind.BITSET:
        return {dtype.rust: {"bits": int(value) & ((1 << dtype.bits) - 1)}}
    return {dtype.rust: int(value)}


def _node(n: Node) -> dict:
    return {"index": n.index, "kind": _KIND_WRITERS[type(n)](n), "uuid": n.uuid}


def _access(a: CacheAccess) -> dict:
    return {"base": a.base, "bracketed": a.bracketed, "indices": [_cache_index(ix) for ix in a.indices]}


def _cache_index(ix: CacheIndex) -> dict:
    if isinstance(ix, CacheSingle):
        return {"Single": _cache_value(ix.value)}
    return {"Slice": {"end": _cache_value(ix.end), "start": _cache_value(ix.start)}}


def _cache_value(v: int | str | None) -> dict | None:
    if v is None:
        return None
    return {"Ident": v} if isinstance(v, str) else {"Lit": v}


def _attr(value: AttrValue) -> dict:
    if isinstance(value, AttrDType):
        return {"DType": value.value.rust}
    if isinstance(value, AttrDTypeList):
        return {"DTypeList": [d.rust for d in value.value]}
    if isinstance(value, AttrIntList):
        return {"IntList": list(value.value)}
    if isinstance(value, AttrDimList):
        return {"DimList": list(value.value)}
    return {_ATTR_TAGS[type(value)]: value.value}


_ATTR_TAGS = {AttrFloat: "Float", AttrDouble: "Double", AttrInt: "Int", AttrUInt: "UInt", AttrBool: "Bool",
              AttrStr: "Str", AttrVar: "Var"}

_KIND_WRITERS = {
    Assign: lambda n: {"Assign": {"dims": list(n.dims), "dtype": n.dtype.rust, "name": n.name}},
    Op: lambda n: {"Op": {"attrs": {"items": [{"name": a.name, "value": _attr(a.value)} for a in n.attrs]},
                          "inputs": [str(i) for i in n.inputs], "op": n.op, "output": n.output}},
    Branch: lambda n: {"Branch": {"cond": n.cond, "else_block": n.else_block, "then_block": n.then_block}},
    Barrier: lambda n: "Barrier",
    Dep: lambda n: {"Dep": {"after": n.after, "before": n.before}},
    CacheRead: lambda n: {"CacheRead": {"dst": str(n.dst), "src": _access(n.src)}},
    CacheWrite: lambda n: {"CacheWrite": {"dst": _access(n.dst), "src": str(n.src)}},
    CacheIncrement: lambda n: {"CacheIncrement": {"amount": n.amount, "target": n.target}},
    CacheDecrement: lambda n: {"CacheDecrement": {"amount": n.amount, "target": n.target}},
    CacheReset: lambda n: {"CacheReset": {"target": _access(n.target)}},
    Transfer: lambda n: {"Transfer": {"dst": str(n.dst), "src": str(n.src)}},
    Yield: lambda n: {"Yield": {"vars": list(n.vars)}},
    Await: lambda n: {"Await": {"vars": list(n.vars)}},
    Loop: lambda n: {"Loop": {"body": [_node(b) for b in n.body], "end": str(n.end), "index": n.var,
                              "name": n.name, "start": str(n.start)}},
    Return: lambda n: "Return",
}


def _dump(v: Any, indent: str, out: list[str]) -> None:
    """serde_json's pretty printer: sorted keys, two-space indent, `[]`/`{}` when empty."""
    if isinstance(v, dict):
        if not v:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{\n")
        for i, key in enumerate(sorted(v)):
            if i:
                out.append(",\n")
            out.append(f"{inner}{_json.dumps(key, ensure_ascii=False)}: ")
            _dump(v[key], inner, out)
        out.append(f"\n{indent}}}")
    elif isinstance(v, list):
        if not v:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[\n")
        for i, item in enumerate(v):
            if i:
                out.append(",\n")
            out.append(inner)
            _dump(item, inner, out)
        out.append(f"\n{indent}]")
    elif isinstance(v, float):
        out.append(format_f64(v) if math.isfinite(v) else _json.dumps(_nonfinite_name(v)))
    elif v is None or isinstance(v, (bool, int, str)):
        out.append(_json.dumps(v, ensure_ascii=False))
    else:
        raise TypeError(f"cannot write {type(v).__name__} as graph JSON")


def _nonfinite_name(v: float) -> str:
    return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def format_f64(x: float) -> str:
    """A finite f64 exactly as Rust's `ryu` (and so serde_json) prints it: the shortest digits
    that round-trip, as `12.5`, `100.0`, `0.00001` or `1e-6`, `1.5e300` (no `+`, no padding)."""
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")   # repr gives the same shortest digits
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    k = int(exp or 0) - len(frac)                     # value = int(digits) * 10**k
    stripped = digits.rstrip("0")
    k += len(digits) - len(stripped)
    digits = stripped
    n = len(digits)
    kk = n + k                                        # 10**(kk-1) <= value < 10**kk
    if 0 <= k and kk <= 16:
        body = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        body = f"{digits[:kk]}.{digits[kk:]}"
    elif -5 < kk <= 0:
        body = "0." + "0" * -kk + digits
    elif n == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


# ============================================================================ reading


def graph_from_json(text: str, source_name: str = "<json>") -> Graph:
    """Read graph JSON (the original's format); raises DslError naming the offending field."""
    try:
        value = _json.loads(text, parse_constant=_reject_constant)
    except _json.JSONDecodeError as exc:
        lines = text.split("\n")
        line = lines[exc.lineno - 1] if exc.lineno <= len(lines) else None
        raise DslError(f"invalid JSON: {exc.msg}", SourceLoc(source_name, exc.lineno, exc.colno),
                       source_line=line) from None
    except RecursionError:
        raise DslError(f"{source_name}: JSON nested too deeply") from None
    return graph_from_value(value, source_name)


def _reject_constant(name: str) -> float:
    # Python's json module accepts the non-standard NaN/Infinity tokens; serde_json does not.
    raise _json.JSONDecodeError(f"{name} is not valid JSON (write the string \"NaN\", \"inf\" or \"-inf\")", "", 0)


def graph_from_value(value: Any, source_name: str = "<json>") -> Graph:
    """A Graph from already-decoded JSON values (see `graph_from_json`)."""
    return _Reader(source_name).graph(value)


class _Reader:
    def __init__(self, source_name: str):
        self.source_name = source_name

    def fail(self, path: str, problem: str) -> DslError:
        return DslError(f"{self.source_name}: invalid graph JSON at {path or 'top level'}: {problem}")

    # -- primitive checks

    def obj(self, v: Any, path: str) -> dict:
        if not isinstance(v, dict):
            raise self.fail(path, f"expected an object, found {_kind(v)}")
        return v

    def field(self, o: dict, key: str, path: str, default: Any = ...) -> Any:
        if key in o:
            return o[key]
        if default is ...:
            raise self.fail(path, f"missing field `{key}`")
        return default

    def string(self, v: Any, path: str) -> str:
        if not isinstance(v, str):
            raise self.fail(path, f"expected a string, found {_kind(v)}")
        return v

    def opt_string(self, v: Any, path: str) -> str | None:
        return None if v is None else self.string(v, path)

    def integer(self, v: Any, path: str, lo: int = -(1 << 63), hi: int = (1 << 64) - 1) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(path, f"expected an integer, found {_kind(v)}")
        if not lo <= v <= hi:
            raise self.fail(path, f"integer {v} is out of range {lo}..={hi}")
        return v

    def number(self, v: Any, path: str, null_is_inf: bool = False) -> float:
        if v is None and null_is_inf:
            return math.inf
        if isinstance(v, str) and v in _NONFINITE:
            return _NONFINITE[v]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(path, f"expected a number, found {_kind(v)}")
        return float(v)

    def boolean(self, v: Any, path: str) -> bool:
        if not isinstance(v, bool):
            raise self.fail(path, f"expected true or false, found {_kind(v)}")
        return v

    def array(self, v: Any, path: str) -> list:
        if not isinstance(v, list):
            raise self.fail(path, f"expected an array, found {_kind(v)}")
        return v

    def strings(self, v: Any, path: str, pattern: re.Pattern | None = None) -> tuple[str, ...]:
        out = tuple(self.string(s, f"{path}[{i}]") for i, s in enumerate(self.array(v, path)))
        if pattern is not None:
            for i, s in enumerate(out):
                if not pattern.fullmatch(s):
                    raise self.fail(f"{path}[{i}]", f"malformed value {s!r}")
        return out

    def dtype(self, v: Any, path: str) -> DTypeInfo:
        name = self.string(v, path)
        if name not in BY_RUST or BY_RUST[name] not in DSL_DTYPES:
            raise self.fail(path, f"unknown dtype {name!r} (expected one of {', '.join(d.rust for d in DSL_DTYPES)})")
        return BY_RUST[name]

    def tagged(self, v: Any, path: str) -> tuple[str, Any]:
        """An externally tagged enum value: `{"Tag": payload}`."""
        o = self.obj(v, path)
        if len(o) != 1:
            raise self.fail(path, f"expected an object with exactly one variant key, found keys {sorted(o)}")
        return next(iter(o.items()))

    # -- graph structure

    def graph(self, v: Any) -> Graph:
        o = self.obj(v, "")
        blocks_v = self.obj(self.field(o, "blocks", ""), "blocks")
        vars_v = self.obj(self.field(o, "vars", ""), "vars")
        next_index = self.integer(self.field(o, "next_index", ""), "next_index", 0)
        variables = {name: self.var(name, d, f"vars.{name}") for name, d in vars_v.items()}
        blocks = {name: self.block(name, b, f"blocks.{name}") for name, b in blocks_v.items()}
        return Graph(vars=variables, blocks=blocks, next_index=next_index, source_name=self.source_name)

    def block(self, key: str, v: Any, path: str) -> Block:
        o = self.obj(v, path)
        name = self.string(self.field(o, "name", path), f"{path}.name")
        if name != key:
            raise self.fail(f"{path}.name", f"block name {name!r} differs from its key {key!r}")
        nodes = self.array(self.field(o, "nodes", path), f"{path}.nodes")
        return Block(name, tuple(self.node(n, f"{path}.nodes[{i}]", 0) for i, n in enumerate(nodes)))

    def var(self, key: str, v: Any, path: str) -> VarDecl:
        o = self.obj(v, path)
        name = self.string(self.field(o, "name", path), f"{path}.name")
        if name != key:
            raise self.fail(f"{path}.name", f"variable name {name!r} differs from its key {key!r}")
        kind_name = self.string(self.field(o, "kind", path), f"{path}.kind")
        kinds = {k.value: k for k in MemoryKind}
        if kind_name not in kinds:
            raise self.fail(f"{path}.kind", f"unknown memory kind {kind_name!r} (expected {', '.join(kinds)})")
        dtype = self.dtype(self.field(o, "dtype", path), f"{path}.dtype")
        fixed = []
        for i, entry in enumerate(self.array(self.field(o, "fixed", path, []), f"{path}.fixed")):
            p = f"{path}.fixed[{i}]"
            pair = self.array(entry, p)
            if len(pair) != 2:
                raise self.fail(p, "expected a [name, size] pair")
            fixed.append((self.string(pair[0], f"{p}[0]"), self.integer(pair[1], f"{p}[1]", 0)))
        init = self.field(o, "init", path, None)
        return VarDecl(
            name=name, kind=kinds[kind_name], dtype=dtype,
            dims=self.strings(self.field(o, "dims", path), f"{path}.dims", _DIM),
            init=None if init is None else InitValue(self.scalar(init, dtype, f"{path}.init")),
            ref_name=self.opt_string(self.field(o, "ref_name", path, None), f"{path}.ref_name"),
            pattern=self.opt_string(self.field(o, "pattern", path, None), f"{path}.pattern"),
            table_indices=self.strings(self.field(o, "table_indices", path, []), f"{path}.table_indices", _NAME),
            table=self.boolean(self.field(o, "table", path, False), f"{path}.table"),
            auto_dim=self.strings(self.field(o, "auto_dim", path, []), f"{path}.auto_dim", _NAME),
            fixed=tuple(fixed),
        )

    def scalar(self, v: Any, dtype: DTypeInfo, path: str) -> bool | int | float:
        tag, payload = self.tagged(v, path)
        if tag != dtype.rust:
            raise self.fail(path, f"init variant {tag!r} does not match the variable's dtype {dtype.rust!r}")
        p = f"{path}.{tag}"
        name = dtype.name
        if name in ("f32", "f64"):
            if payload is None:
                raise self.fail(p, "a non-finite init value written as null cannot be recovered")
            value = self.number(payload, p)
            with np.errstate(over="ignore"):   # an out-of-range f32 becomes infinity, as in serde
                return float(np.float32(value)) if name == "f32" else value
        if name == "bool":
            return self.boolean(payload, p)
        if not (dtype.is_float or dtype.is_packed or dtype.kind is Kind.BITSET):
            return self.integer(payload, p, dtype.lo, dtype.hi)
        bits = self.integer(self.field(self.obj(payload, p), "bits", p), f"{p}.bits", 0, (1 << dtype.bits) - 1)
        if name == "f16":
            return float(np.uint16(bits).view(np.float16))
        if name == "bf16":
            return float(bf16_decode(bits))
        if name == "f8":
            return float(f8_decode(bits))
        if name == "t1":
            return 1 if bits & 1 else -1
        if dtype.is_signed and bits >= 1 << (dtype.bits - 1):
            bits -= 1 << dtype.bits
        if name == "t2" and bits == -2:
            raise self.fail(f"{p}.bits", "t2 holds -1, 0 or 1")
        return bits

    def node(self, v: Any, path: str, depth: int) -> Node:
        o = self.obj(v, path)
        index = self.integer(self.field(o, "index", path), f"{path}.index", 0)
        uuid_text = self.string(self.field(o, "uuid", path), f"{path}.uuid")
        try:
            uuid = str(_uuid.UUID(uuid_text))
        except ValueError:
            raise self.fail(f"{path}.uuid", f"malformed UUID {uuid_text!r}") from None
        kind = self.field(o, "kind", path)
        p = f"{path}.kind"
        if kind in ("Return", "Barrier"):
            return (Return if kind == "Return" else Barrier)(index=index, uuid=uuid)
        tag, payload = self.tagged(kind, p)
        p = f"{p}.{tag}"
        reader = _KIND_READERS.get(tag)
        if reader is None:
            raise self.fail(p, f"unknown node kind {tag!r}")
        fields = reader(self, self.obj(payload, p), p, depth)
        return fields.pop("cls")(index=index, uuid=uuid, **fields)

    # -- node kinds (each returns the node class and its fields)

    def k_assign(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": Assign, "name": self.string(self.field(o, "name", p), f"{p}.name"),
                "dtype": self.dtype(self.field(o, "dtype", p), f"{p}.dtype"),
                "dims": self.strings(self.field(o, "dims", p), f"{p}.dims", _DIM)}

    def k_op(self, o: dict, p: str, depth: int) -> dict:
        attrs_o = self.obj(self.field(o, "attrs", p), f"{p}.attrs")
        items = self.array(self.field(attrs_o, "items", f"{p}.attrs"), f"{p}.attrs.items")
        attrs = []
        for i, item in enumerate(items):
            ip = f"{p}.attrs.items[{i}]"
            item_o = self.obj(item, ip)
            attrs.append(Attr(self.string(self.field(item_o, "name", ip), f"{ip}.name"),
                              self.attr_value(self.field(item_o, "value", ip), f"{ip}.value")))
        inputs = self.array(self.field(o, "inputs", p), f"{p}.inputs")
        return {"cls": Op, "op": self.string(self.field(o, "op", p), f"{p}.op"),
                "inputs": tuple(self.var_ref(s, f"{p}.inputs[{i}]") for i, s in enumerate(inputs)),
                "attrs": tuple(attrs), "output": self.string(self.field(o, "output", p), f"{p}.output")}

    def attr_value(self, v: Any, p: str) -> AttrValue:
        tag, payload = self.tagged(v, p)
        p = f"{p}.{tag}"
        if tag in ("Float", "Double"):
            return (AttrFloat if tag == "Float" else AttrDouble)(self.number(payload, p, null_is_inf=True))
        if tag == "Int":
            return AttrInt(self.integer(payload, p, hi=(1 << 63) - 1))
        if tag == "UInt":
            return AttrUInt(self.integer(payload, p, lo=0))
        if tag == "Bool":
            return AttrBool(self.boolean(payload, p))
        if tag == "Str":
            return AttrStr(self.string(payload, p))
        if tag == "Var":
            return AttrVar(self.string(payload, p))
        if tag == "IntList":
            return AttrIntList(tuple(self.integer(x, f"{p}[{i}]", hi=(1 << 63) - 1)
                                     for i, x in enumerate(self.array(payload, p))))
        if tag == "DimList":
            return AttrDimList(tuple(x if isinstance(x, str) else self.integer(x, f"{p}[{i}]", hi=(1 << 63) - 1)
                                     for i, x in enumerate(self.array(payload, p))))
        if tag == "DType":
            return AttrDType(self.dtype(payload, p))
        if tag == "DTypeList":
            return AttrDTypeList(tuple(self.dtype(x, f"{p}[{i}]") for i, x in enumerate(self.array(payload, p))))
        raise self.fail(p, f"unknown attribute value kind {tag!r}")

    def k_branch(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": Branch, "cond": self.opt_string(o.get("cond"), f"{p}.cond"),
                "then_block": self.string(self.field(o, "then_block", p), f"{p}.then_block"),
                "else_block": self.opt_string(o.get("else_block"), f"{p}.else_block")}

    def k_dep(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": Dep, "after": self.string(self.field(o, "after", p), f"{p}.after"),
                "before": self.string(self.field(o, "before", p), f"{p}.before")}

    def k_cache_read(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": CacheRead, "src": self.access(self.field(o, "src", p), f"{p}.src"),
                "dst": self.var_ref(self.field(o, "dst", p), f"{p}.dst")}

    def k_cache_write(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": CacheWrite, "src": self.var_ref(self.field(o, "src", p), f"{p}.src"),
                "dst": self.access(self.field(o, "dst", p), f"{p}.dst")}

    def k_step(self, o: dict, p: str, depth: int) -> dict:
        cls = CacheIncrement if p.endswith("CacheIncrement") else CacheDecrement
        return {"cls": cls, "target": self.string(self.field(o, "target", p), f"{p}.target"),
                "amount": self.integer(self.field(o, "amount", p), f"{p}.amount", hi=(1 << 63) - 1)}

    def k_cache_reset(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": CacheReset, "target": self.access(self.field(o, "target", p), f"{p}.target")}

    def k_transfer(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": Transfer, "src": self.var_ref(self.field(o, "src", p), f"{p}.src"),
                "dst": self.var_ref(self.field(o, "dst", p), f"{p}.dst")}

    def k_vars(self, o: dict, p: str, depth: int) -> dict:
        return {"cls": Yield if p.endswith("Yield") else Await,
                "vars": self.strings(self.field(o, "vars", p), f"{p}.vars")}

    def k_loop(self, o: dict, p: str, depth: int) -> dict:
        if depth >= MAX_LOOP_DEPTH:
            raise self.fail(p, f"loops nested more than {MAX_LOOP_DEPTH} deep")
        body = self.array(self.field(o, "body", p), f"{p}.body")
        return {"cls": Loop, "name": self.string(self.field(o, "name", p), f"{p}.name"),
                "var": self.string(self.field(o, "index", p), f"{p}.index"),
                "start": self.bound(self.field(o, "start", p), f"{p}.start"),
                "end": self.bound(self.field(o, "end", p), f"{p}.end"),
                "body": tuple(self.node(n, f"{p}.body[{i}]", depth + 1) for i, n in enumerate(body))}

    def bound(self, v: Any, p: str) -> int | str:
        s = self.string(v, p)
        if _INT.fullmatch(s):
            return int(s)
        if _NAME.fullmatch(s):
            return s
        raise self.fail(p, f"a loop bound is an integer or a name, found {s!r}")

    def var_ref(self, v: Any, p: str) -> VarRef:
        s = self.string(v, p)
        m = _VAR_REF.fullmatch(s)
        if m is None:
            raise self.fail(p, f"malformed variable reference {s!r} (expected `name` or `name[i,0]`)")
        if m.group(2) is None:
            return VarRef(s)
        return VarRef(m.group(1), tuple(int(x) if _INT.fullmatch(x) else x for x in m.group(2).split(",")))

    def access(self, v: Any, p: str) -> CacheAccess:
        o = self.obj(v, p)
        indices = []
        for i, ix in enumerate(self.array(self.field(o, "indices", p), f"{p}.indices")):
            ip = f"{p}.indices[{i}]"
            tag, payload = self.tagged(ix, ip)
            if tag == "Single":
                value = self.cache_value(payload, f"{ip}.Single")
                if value is None:
                    raise self.fail(f"{ip}.Single", "a single index cannot be null")
                indices.append(CacheSingle(value))
            elif tag == "Slice":
                so = self.obj(payload, f"{ip}.Slice")
                indices.append(CacheSlice(self.cache_value(so.get("start"), f"{ip}.Slice.start"),
                                          self.cache_value(so.get("end"), f"{ip}.Slice.end")))
            else:
                raise self.fail(ip, f"unknown cache index kind {tag!r} (expected Single or Slice)")
        return CacheAccess(self.string(self.field(o, "base", p), f"{p}.base"), tuple(indices),
                           self.boolean(self.field(o, "bracketed", p), f"{p}.bracketed"))

    def cache_value(self, v: Any, p: str) -> int | str | None:
        if v is None:
            return None
        tag, payload = self.tagged(v, p)
        if tag == "Lit":
            return self.integer(payload, f"{p}.Lit", hi=(1 << 63) - 1)
        if tag == "Ident":
            return self.string(payload, f"{p}.Ident")
        raise self.fail(p, f"unknown cache index value kind {tag!r} (expected Lit or Ident)")


_KIND_READERS = {
    "Assign": _Reader.k_assign, "Op": _Reader.k_op, "Branch": _Reader.k_branch, "Dep": _Reader.k_dep,
    "CacheRead": _Reader.k_cache_read, "CacheWrite": _Reader.k_cache_write,
    "CacheIncrement": _Reader.k_step, "CacheDecrement": _Reader.k_step, "CacheReset": _Reader.k_cache_reset,
    "Transfer": _Reader.k_transfer, "Yield": _Reader.k_vars, "Await": _Reader.k_vars, "Loop": _Reader.k_loop,
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"-?[0-9]+")
_DIM = re.compile(r"(?:[0-9]+|[A-Za-z_][A-Za-z0-9_]*)(?:\*(?:[0-9]+|[A-Za-z_][A-Za-z0-9_]*))?")
_VAR_REF = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[((?:-?[0-9]+|[A-Za-z_][A-Za-z0-9_]*)"
                      r"(?:,(?:-?[0-9]+|[A-Za-z_][A-Za-z0-9_]*))*)\])?")


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(v), type(v).__name__)
