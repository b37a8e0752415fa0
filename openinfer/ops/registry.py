"""Typed view of `ops.yaml`: one frozen `OpSpec` per op, with type inference.

`get(name)` and `all_ops()` are the entry points. `OpSpec.infer` validates one application of an
op (arity, dtypes, attributes, mode, shapes) and says what it produces. This is the schema only:
how the reference computes an op is openinfer/reference/kernels (`run_kernel`), which reads this
module and is never read by it.

Mode selection follows digest §3.6: `accumulate` when the op allows it and `acc` is given,
otherwise `inplace` when the output variable is also an input (the op must allow it), otherwise
`normal`. There is no dtype promotion: every input whose type is not declared separately in the
registry must have input 0's type T.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np
import yaml

from .. import dtypes as dt
from ..dims import Dim, pretty_shape
from ..dtypes import DTypeInfo, Kind
from .errors import OpTypeError
from .shapes import SHAPE_RULES
from .types import TensorType

__all__ = ["AttrSpec", "Inference", "InputSpec", "OpSpec", "OpTypeError", "OutputRule", "TensorType", "all_ops",
           "categories", "dtype_sets", "get"]

ATTR_KINDS = ("scalar", "float", "int", "bool", "string", "dtype", "dtype_list", "int_list", "int_or_list")


# --------------------------------------------------------------------------- spec records

@dataclass(frozen=True)
class InputSpec:
    name: str
    optional: bool = False
    variadic: bool = False
    #: None: the op's type T (input 0's dtype); otherwise the dtypes allowed here
    dtypes: tuple[DTypeInfo, ...] | None = None
    #: with `dtypes`: T is allowed too (sdpa's mask: bool or T)
    or_t: bool = False
    #: the dtype-set shorthands `dtypes` was written with (for docs)
    dtype_text: str = ""

    @property
    def label(self) -> str:
        return self.name + ("?" if self.optional else "") + ("..." if self.variadic else "")


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: str
    doc: str = ""
    required: bool = False
    #: a plain value, or {"float": v, "int": v, "bool": v} for a default that depends on T
    #: ("$min"/"$max": T's range); None: no default (the attribute is absent unless given)
    default: Any = None
    values: tuple[str, ...] | None = None
    alias_of: str | None = None

    def default_for(self, t: DTypeInfo) -> Any:
        d = self.default
        if not isinstance(d, Mapping):
            return d
        key = "float" if t.is_float else "bool" if t.kind is Kind.BOOL else "int"
        v = d.get(key, d.get("int"))
        if v == "$min":
            return t.lo
        if v == "$max":
            return t.hi
        return v

    def default_text(self) -> str:
        if self.required:
            return "required"
        d = self.default
        if d is None:
            return "-"
        if isinstance(d, Mapping):
            return ", ".join(f"{k}: {_value_text(v)}" for k, v in d.items())
        return _value_text(d)


@dataclass(frozen=True)
class OutputRule:
    kind: str                           # same | fixed | from_attr
    dtype: DTypeInfo | None = None      # fixed
    attr: str | None = None             # from_attr

    def __str__(self) -> str:
        if self.kind == "same":
            return "T"
        if self.kind == "fixed":
            return self.dtype.name
        return f"attribute `{self.attr}`"


@dataclass(frozen=True)
class Inference:
    """What one op application produces. `attrs` is complete: defaults filled in, values converted
    for T (integer bounds as ints, ...), shape attributes normalised (non-negative axes, conv
    padding as begin..end tuples, ...); feeding it back to `infer` gives the same Inference."""

    op: str
    mode: str                                   # "normal" | "inplace" | "accumulate"
    inputs: tuple[TensorType, ...]
    out_dtype: DTypeInfo
    out_shape: tuple[int, ...]
    #: `acc` as given, normalised to a tuple: (A,) or (P, A); None outside accumulate mode
    acc: tuple[DTypeInfo, ...] | None
    broadcast: bool
    attrs: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def out(self) -> TensorType:
        return TensorType(self.out_dtype, self.out_shape)

    @property
    def acc_dtype(self) -> DTypeInfo | None:
        """The accumulator dtype: the last entry of `acc`."""
        return self.acc[-1] if self.acc else None

    @property
    def product_dtype(self) -> DTypeInfo | None:
        """matmul's product dtype: the first entry of `acc` (= the accumulator for a 1-element acc)."""
        return self.acc[0] if self.acc else None


@dataclass(frozen=True, eq=False)  # one instance per op: identity equality, hashable
class OpSpec:
    name: str
    category: str
    doc: str
    notes: str
    inputs: tuple[InputSpec, ...]
    attrs: tuple[AttrSpec, ...]
    dtypes: tuple[DTypeInfo, ...]
    dtype_text: str
    broadcast: bool
    inplace: bool
    #: input dtype name -> allowed accumulator dtypes (empty: no accumulate mode)
    acc_pairs: Mapping[str, tuple[DTypeInfo, ...]]
    acc_text: str
    output: OutputRule
    shape_rule: str
    elementwise: bool
    #: an in-place call needs no scratch copy (ops.yaml `in_place_kernels`; element-wise ops never do)
    in_place_kernels: bool = False

    def __repr__(self) -> str:
        return f"OpSpec({self.name!r})"

    @property
    def accumulate(self) -> bool:
        return bool(self.acc_pairs)

    @property
    def modes(self) -> tuple[str, ...]:
        return ("normal",) + (("inplace",) if self.inplace else ()) + (("accumulate",) if self.accumulate else ())

    @property
    def variadic(self) -> bool:
        return any(i.variadic for i in self.inputs)

    def attr(self, name: str) -> AttrSpec:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)

    def signature(self) -> str:
        """`add(a, b, acc=...)`-style text for messages and docs."""
        parts = [i.label for i in self.inputs]
        for a in self.attrs:
            if a.alias_of:
                continue
            if a.required:
                parts.append(f"{a.name}=...")
            elif a.default is None:
                parts.append(f"[{a.name}]")
            else:
                parts.append(f"{a.name}={'T-dependent' if isinstance(a.default, Mapping) else a.default_text()}")
        return f"{self.name}({', '.join(parts)})"

    # ----------------------------------------------------------------------- inference
    def infer(self, inputs: Sequence[TensorType], attrs: Mapping[str, object], output: TensorType | None = None,
              *, output_name_is_input: bool = False) -> Inference:
        """Validate an application of this op and say what it produces; raises OpTypeError.

        `attrs` holds plain Python values (float, int, bool, str, list[int], DTypeInfo,
        tuple[DTypeInfo, ...]); a value of None means "not given". `output` is the declared output,
        checked against the result when given; `output_name_is_input` says the output variable is
        also one of the inputs (in-place).
        """
        inputs = tuple(inputs)
        self._check_arity(inputs)
        values = self._check_attr_kinds(attrs)
        t = inputs[0].dtype
        self._check_input_dtypes(inputs)
        acc = values.get("acc")
        if acc is not None:
            mode = "accumulate"
            if output_name_is_input:
                raise OpTypeError(f"{self.name}: `acc` cannot be combined with an in-place output (the output is "
                                  "also an input)", "write the accumulated result to a new variable")
            self._check_acc(t, acc)
        elif output_name_is_input:
            if not self.inplace:
                raise OpTypeError(f"{self.name} cannot write in place (its output variable is also an input)",
                                  "write the result to a new variable")
            mode = "inplace"
        else:
            mode = "normal"
        if mode != "accumulate" and t not in self.dtypes:
            raise OpTypeError(f"{self.name} does not support dtype {t.name}",
                              f"{self.name} supports {_names(self.dtypes)}")
        self._fill_defaults(values, t)
        out_shape, broadcast = SHAPE_RULES[self.shape_rule](self, inputs, values, output)
        out_dtype = self._out_dtype(t, values, acc, output)
        if self.name == "cast":
            _check_cast(t, out_dtype)
        if self.name == "scatter_nd":
            _check_reduction(t, values["reduction"])
        if output is not None:
            _check_declared(self, output, out_dtype, tuple(out_shape), mode)
        return Inference(self.name, mode, inputs, out_dtype, tuple(out_shape), acc, broadcast, values)

    def _check_arity(self, inputs: tuple[TensorType, ...]) -> None:
        if not inputs:
            raise OpTypeError(f"{self.name} takes at least one input", f"usage: {self.signature()}")
        required = sum(1 for i in self.inputs if not i.optional)
        if self.variadic:
            return
        if not required <= len(inputs) <= len(self.inputs):
            want = str(required) if required == len(self.inputs) else f"{required} to {len(self.inputs)}"
            names = ", ".join(i.label for i in self.inputs)
            raise OpTypeError(f"{self.name} takes {want} input{'s' if len(self.inputs) > 1 else ''} ({names}), "
                              f"got {len(inputs)}", f"usage: {self.signature()}")

    def _check_attr_kinds(self, attrs: Mapping[str, object]) -> dict[str, Any]:
        known = {a.name: a for a in self.attrs}
        values: dict[str, Any] = {}
        for name, value in attrs.items():
            spec = known.get(name)
            if spec is None and name == "acc":
                raise OpTypeError(f"{self.name} does not accumulate: `acc` is not allowed",
                                  "ops that take acc: " + ", ".join(o.name for o in all_ops() if o.accumulate))
            if spec is None:
                close = difflib.get_close_matches(name, known, n=3)
                takes = ", ".join(a for a in known) or "no attributes"
                hint = f"did you mean `{close[0]}`?" if close else f"{self.name} takes: {takes}"
                raise OpTypeError(f"{self.name}: unknown attribute `{name}`", hint)
            if value is None:
                continue
            value = _check_kind(self.name, spec, value)
            target = spec.alias_of or name
            if target in values:
                raise OpTypeError(f"{self.name}: `{name}` is an alias of `{target}`; give only one of them")
            values[target] = value
        for spec in self.attrs:
            if spec.required and spec.name not in values:
                raise OpTypeError(f"{self.name}: missing required attribute `{spec.name}`",
                                  f"usage: {self.signature()}")
        return values

    def _input_spec(self, index: int) -> InputSpec:
        return self.inputs[-1] if self.variadic else self.inputs[index]

    def _check_input_dtypes(self, inputs: tuple[TensorType, ...]) -> None:
        t = inputs[0].dtype
        for i, x in enumerate(inputs[1:], start=1):
            spec = self._input_spec(i)
            if spec.dtypes is None:
                if x.dtype != t:
                    first = self._input_spec(0).name
                    raise OpTypeError(
                        f"{self.name}: input dtypes differ: {t.name} ({first}) and {x.dtype.name} ({spec.name}) "
                        "(no implicit promotion)",
                        f"cast one input with `op cast(..., to={t.name})`" if _castable(x.dtype, t)
                        else f"all of {self.name}'s inputs must have one dtype")
            elif x.dtype not in spec.dtypes and not (spec.or_t and x.dtype == t):
                allowed = _names(spec.dtypes) + (f" or {t.name} (the type of {self.inputs[0].name})"
                                                 if spec.or_t else "")
                raise OpTypeError(f"{self.name}: input `{spec.name}` cannot be {x.dtype.name}; it must be {allowed}")

    def _check_acc(self, t: DTypeInfo, acc: tuple[DTypeInfo, ...]) -> None:
        allowed = self.acc_pairs.get(t.name, ())
        a = acc[-1]
        if a not in allowed:
            hint = (f"for {t.name} inputs {self.name} accumulates in {_names(allowed)}" if allowed
                    else f"{self.name} accumulates only {_names(tuple(dt.lookup(n) for n in self.acc_pairs))} inputs")
            raise OpTypeError(f"{self.name}: cannot accumulate {t.name} in {a.name}", hint)
        if len(acc) > 2:
            raise OpTypeError(f"{self.name}: `acc` takes one or two dtypes ([accumulator] or [product, "
                              f"accumulator]), got {len(acc)}")
        if len(acc) == 2 and acc[0] != a:
            p = acc[0]
            if self.name != "matmul":
                raise OpTypeError(f"{self.name}: a two-dtype `acc` must name the same dtype twice (only matmul has "
                                  f"a separate product dtype), got [{p.name}, {a.name}]", f"write `acc={a.name}`")
            if (p != t and p not in allowed) or p.kind is not a.kind or p.bits > a.bits:
                raise OpTypeError(f"matmul: product dtype {p.name} does not fit {t.name} inputs accumulated in "
                                  f"{a.name}", f"the product dtype is {t.name} or one of {_names(allowed)}, "
                                  f"no wider than {a.name}")

    def _fill_defaults(self, values: dict[str, Any], t: DTypeInfo) -> None:
        for spec in self.attrs:
            if spec.alias_of:
                continue
            if spec.name not in values:
                default = spec.default_for(t)
                if default is None:
                    values[spec.name] = None
                    continue
                values[spec.name] = tuple(default) if isinstance(default, list) else default
            if spec.kind == "scalar" and values[spec.name] is not None:
                values[spec.name] = _typed_scalar(self.name, spec.name, values[spec.name], t)

    def _out_dtype(self, t: DTypeInfo, values: dict[str, Any], acc, output: TensorType | None) -> DTypeInfo:
        if acc is not None:
            a = acc[-1]
            # Floats may accumulate wide and round into T on store (f16 matmul with f32 acc).
            if output is not None and a.is_float and output.dtype == t:
                return t
            return a
        rule = self.output
        if rule.kind == "same":
            return t
        if rule.kind == "fixed":
            return rule.dtype
        return values[rule.attr]


# --------------------------------------------------------------------------- attribute values

def _value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    if v == "$min":
        return "T's min"
    if v == "$max":
        return "T's max"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def _check_kind(op: str, spec: AttrSpec, value: object) -> Any:
    """`value` checked against the attribute's kind and normalised (tuples for lists)."""
    kind = spec.kind
    if isinstance(value, np.generic):
        value = value.item()

    def bad(want: str) -> OpTypeError:
        return OpTypeError(f"{op}: attribute `{spec.name}` must be {want}, got {value!r}")

    if kind == "scalar":
        if not isinstance(value, bool | int | float):
            raise bad("a number")
        return value
    if kind == "float":        # a real number whatever T is (a quantization scale of an int8 op)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("a number")
        return float(value)
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise bad("a string")
        if spec.values and value not in spec.values:
            raise OpTypeError(f"{op}: attribute `{spec.name}` must be one of "
                              f"{', '.join(repr(v) for v in spec.values)}, got {value!r}")
        return value
    if kind == "dtype":
        return _dtype_value(op, spec, value)
    if kind == "dtype_list":
        items = value if isinstance(value, list | tuple) else [value]
        if not items:
            raise bad("a dtype or a list of one or two dtypes")
        return tuple(_dtype_value(op, spec, v) for v in items)
    if kind == "int_list":
        if not isinstance(value, list | tuple) or not all(_is_int(v) for v in value):
            raise bad("a list of integers")
        return tuple(_as_int(v) for v in value)
    if kind == "int_or_list":
        if _is_int(value):
            return _as_int(value)
        if not isinstance(value, list | tuple) or not value or not all(_is_int(v) for v in value):
            raise bad("an integer or a list of integers")
        return tuple(_as_int(v) for v in value)
    raise AssertionError(kind)


def _as_int(v) -> int:
    """A plain int, except that a dynamic size (`ends=[S]`, openinfer/dims.py) stays a Dim."""
    return v if isinstance(v, Dim) else int(v)


def _is_int(v: object) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _dtype_value(op: str, spec: AttrSpec, value: object) -> DTypeInfo:
    if isinstance(value, DTypeInfo):
        return value
    if isinstance(value, str):
        try:
            return dt.lookup(value)
        except KeyError:
            pass
    raise OpTypeError(f"{op}: attribute `{spec.name}` must be a dtype, got {value!r}")


def _typed_scalar(op: str, name: str, v: bool | int | float, t: DTypeInfo) -> bool | int | float:
    """Scalar attributes are values of (or bounds on) T: floats stay Python floats, integer types
    need integral values. Which attributes are bounds (±inf allowed) or exact values is op-specific."""
    bound = (op, name) in _BOUND_ATTRS
    multiplier = (op, name) in _FREE_ATTRS
    if multiplier or t.is_float:
        return float(v)
    if t.kind is Kind.BOOL:
        if isinstance(v, bool) or v in (0, 1):
            return bool(v)
        raise OpTypeError(f"{op}: `{name}` must be true or false for bool, got {v!r}")
    if isinstance(v, bool):
        raise OpTypeError(f"{op}: `{name}` is a bool but the type is {t.name}", f"write an integer, e.g. `{name}=1`")
    if isinstance(v, float):
        if bound and math.isinf(v):
            return t.lo if v < 0 else t.hi
        if op == "fill" or not v.is_integer():
            raise OpTypeError(f"{op}: `{name}`={v!r} is a float but the type is {t.name}",
                              f"write an integer value, e.g. `{name}={int(v) if math.isfinite(v) else 0}`")
        v = int(v)
    if bound:
        return min(max(v, t.lo), t.hi)
    if not t.lo <= v <= t.hi:
        raise OpTypeError(f"{op}: `{name}`={v} is out of range for {t.name} ({t.lo}..{t.hi})")
    return v


#: Scalar attributes that bound T's values: on integers ±inf means "no bound", others clip.
_BOUND_ATTRS = {("clamp", "min"), ("clamp", "max"), ("relu", "clamp_min"), ("relu", "clamp_max")}
#: Scalar attributes that are plain numbers, not values of T.
_FREE_ATTRS = {("relu", "alpha"), ("layer_norm", "eps"), ("rms_norm", "eps"), ("rope", "theta"),
               ("sdpa", "scale")}


# --------------------------------------------------------------------------- dtype rules

def _names(ds: Sequence[DTypeInfo]) -> str:
    return " ".join(d.name for d in ds) if ds else "nothing"


def cast_allowed(src: DTypeInfo, to: DTypeInfo) -> bool:
    """Digest §4: numeric -> float; float -> unpacked int; int -> strictly wider int of the same
    signedness. Beyond the original: numeric -> bool (x != 0) and bool -> float or unpacked int (0/1)."""
    numeric = src.is_float or src.is_int
    to_numeric = to.is_float or to.is_int
    if to.kind is Kind.BOOL:
        return numeric
    if src.kind is Kind.BOOL:
        return to_numeric and not to.is_packed
    if not numeric or to.is_packed or not to_numeric:
        return False
    if to.is_float:
        return True
    if src.is_float:
        return True
    return src.kind is to.kind and to.bits > src.bits


def _castable(src: DTypeInfo, to: DTypeInfo) -> bool:
    return cast_allowed(src, to) and src.name in {d.name for d in get("cast").dtypes}


def _check_cast(src: DTypeInfo, to: DTypeInfo) -> None:
    if cast_allowed(src, to):
        return
    if src.is_int and to.is_int and src.kind is not to.kind:
        why = "signed and unsigned types do not convert into each other"
    elif to.is_packed:
        why = "casting to packed types is not supported"
    elif src.is_int and to.is_int:
        why = "integer casts must widen (same signedness, strictly more bits)"
    elif src.kind is Kind.BOOL and to.kind is Kind.BOOL:
        why = "the input is already bool"
    else:
        why = "bitset does not cast"
    raise OpTypeError(f"cast: cannot cast {src.name} to {to.name}: {why}",
                      "allowed: numeric -> float, float -> integer, integer -> wider integer of the same signedness, "
                      "numeric -> bool, bool -> float or unpacked integer")


def _check_reduction(t: DTypeInfo, reduction: str) -> None:
    """scatter_nd combines a slice with its update by the op its `reduction` names: that op's dtypes."""
    if reduction != "none" and t not in get(reduction).dtypes:
        raise OpTypeError(f"scatter_nd: reduction {reduction!r} does not support dtype {t.name}",
                          f"the op {reduction} supports {_names(get(reduction).dtypes)}")


def _check_declared(op: OpSpec, output: TensorType, out_dtype: DTypeInfo, out_shape: tuple[int, ...],
                    mode: str) -> None:
    if output.dtype != out_dtype:
        why = {"same": f"the inputs' type {out_dtype.name}", "fixed": f"always {out_dtype.name}",
               "from_attr": f"`{op.output.attr}`={out_dtype.name}"}[op.output.kind]
        if mode == "accumulate":
            why = f"the accumulator {out_dtype.name}" + (" (or the input type, for floats)" if out_dtype.is_float
                                                         else "")
        raise OpTypeError(f"{op.name}: the output is declared {output.dtype.name} but the result is {out_dtype.name} "
                          f"({why})", f"declare the output as {out_dtype.name}")
    if output.shape != out_shape:
        shape, want = list(output.shape), list(out_shape)
        if mode == "inplace":
            raise OpTypeError(f"{op.name}: the in-place output has shape {shape} but the result has shape {want}",
                              "in-place broadcasting needs the in-place operand to already have the output shape; "
                              "write to a new variable")
        raise OpTypeError(f"{op.name}: the output is declared with shape {shape} but the result has shape {want}",
                          f"declare the output as {pretty_shape(out_shape)}")


# --------------------------------------------------------------------------- loading

def _expand(names: Sequence[str] | str, sets: Mapping[str, list]) -> tuple[DTypeInfo, ...]:
    items = names.split() if isinstance(names, str) else list(names)
    out: list[DTypeInfo] = []
    for n in items:
        for d in (_expand(sets[n], sets) if n in sets else (dt.lookup(n),)):
            if d not in out:
                out.append(d)
    return tuple(out)


def _set_text(names: Sequence[str] | str) -> str:
    return names if isinstance(names, str) else " ".join(names)


def _acc_pairs(names: Sequence[str], acc_sets: Mapping[str, Any]) -> dict[str, tuple[DTypeInfo, ...]]:
    pairs: dict[str, list[DTypeInfo]] = {}
    for n in names:
        body = acc_sets[n]
        if isinstance(body, list):
            for src, targets in _acc_pairs(body, acc_sets).items():
                pairs.setdefault(src, []).extend(t for t in targets if t not in pairs.get(src, []))
        else:
            for src, targets in body.items():
                pairs.setdefault(src, []).extend(dt.lookup(t) for t in targets)
    return {k: tuple(v) for k, v in pairs.items()}


def _attr(entry: Any, defs: Mapping[str, Any]) -> AttrSpec:
    if isinstance(entry, str):
        entry = {"name": entry, **defs[entry]}
    unknown = set(entry) - {"name", "kind", "doc", "required", "default", "values", "alias_of"}
    if unknown or entry["kind"] not in ATTR_KINDS:
        raise ValueError(f"ops.yaml: bad attribute {entry}")
    return AttrSpec(entry["name"], entry["kind"], entry.get("doc", ""), bool(entry.get("required", False)),
                    entry.get("default"), tuple(entry["values"]) if "values" in entry else None,
                    entry.get("alias_of"))


def _input(text: str, input_dtypes: Mapping[str, Any], sets: Mapping[str, list]) -> InputSpec:
    optional, variadic = text.endswith("?"), text.endswith("*")
    name = text.rstrip("?*")
    if name not in input_dtypes:
        return InputSpec(name, optional, variadic)
    spec = [s for s in input_dtypes[name] if s != "T"]
    return InputSpec(name, optional, variadic, _expand(spec, sets), "T" in input_dtypes[name],
                     _set_text(input_dtypes[name]))


def _output(rule: Any) -> OutputRule:
    if rule == "same":
        return OutputRule("same")
    if "fixed" in rule:
        return OutputRule("fixed", dtype=dt.lookup(rule["fixed"]))
    return OutputRule("from_attr", attr=rule["from_attr"])


def _op(e: Mapping[str, Any], data: Mapping[str, Any]) -> OpSpec:
    sets, defs = data["dtype_sets"], data.get("attr_defs", {})
    acc = e.get("accumulate") or []
    return OpSpec(
        name=e["name"], category=e["category"], doc=e["doc"], notes=e.get("notes", ""),
        inputs=tuple(_input(i, e.get("input_dtypes", {}), sets) for i in e["inputs"]),
        attrs=tuple(_attr(a, defs) for a in e.get("attrs", [])),
        dtypes=_expand(e["dtypes"], sets), dtype_text=_set_text(e["dtypes"]),
        broadcast=bool(e["broadcast"]), inplace=bool(e["inplace"]),
        acc_pairs=_acc_pairs(acc, data["acc_sets"]), acc_text=_set_text(acc),
        output=_output(e["output"]), shape_rule=e["shape"], elementwise=bool(e["elementwise"]),
        in_place_kernels=bool(e.get("in_place_kernels", False)))


@cache
def _load() -> tuple[Mapping[str, OpSpec], Mapping[str, Any]]:
    # libyaml's loader when PyYAML has it: ~20x faster than the pure-Python one on this file
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(resources.files(__package__).joinpath("ops.yaml").read_text(encoding="utf-8"), Loader=loader)
    ops = {e["name"]: _op(e, data) for e in data["ops"]}
    return MappingProxyType(ops), MappingProxyType(data)


def get(name: str) -> OpSpec:
    """The op called `name`; OpTypeError (naming close matches) if there is none."""
    ops = _load()[0]
    spec = ops.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, ops, n=3)
        hint = ("did you mean " + " or ".join(f"`{c}`" for c in close) + "?") if close else \
            "see docs/ops.md for the op list"
        raise OpTypeError(f"unknown op `{name}`", hint)
    return spec


def all_ops() -> tuple[OpSpec, ...]:
    """Every op, in ops.yaml order (the original's 47 first)."""
    return tuple(_load()[0].values())


def categories() -> tuple[str, ...]:
    seen: list[str] = []
    for op in all_ops():
        if op.category not in seen:
            seen.append(op.category)
    return tuple(seen)


def dtype_sets() -> Mapping[str, tuple[DTypeInfo, ...]]:
    sets = _load()[1]["dtype_sets"]
    return {k: _expand(v, sets) for k, v in sets.items()}
