"""GLSL types, loads, stores, literals and device capabilities for the kernel emitters.

Compute types (GLSL spelling): floats compute in "float" ("double" for f64); bool in "int"
(0/1); signed integers up to 32 bits in "int", unsigned (and bitset) in "uint"; 64-bit integers
in "int64_t" / "uint64_t". A value's compute type travels with it as `vct`.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import numpy as np

from ....dims import Dim
from ....dtypes import DTypeInfo, Kind
from ....errors import SynthesisError
from ....synth.program import KernelRequest
from ...geometry import collapse, contiguous_strides

#: device feature -> (what it is, the descriptor fields that declare it)
FEATURES = {
    "fp64": ("shaderFloat64", "features.fp64"),
    "int64": ("shaderInt64", "features.int64"),
    "storage8": ("8-bit storage buffers (storageBuffer8BitAccess)", "features.int8 or features.storage_8bit"),
    "storage16": ("16-bit storage buffers (storageBuffer16BitAccess)",
                  "features.fp16, features.int16 or features.storage_16bit"),
    "subgroup": ("subgroup arithmetic", "features.subgroup_ops"),
    "denorm32": ("the DenormPreserve float control for f32", "features.denorm_preserve_fp32"),
    "float16": ("f16 arithmetic types (shaderFloat16)", "features.fp16"),
    "coopmat": ("cooperative matrices (VK_NV_cooperative_matrix: 16x16x16 f16 x f16 -> f32 per subgroup, "
                "with vulkanMemoryModel)", "features.cooperative_matrix"),
}

FLOAT_CT = ("float", "double")
INT_CT = ("int", "uint", "int64_t", "uint64_t")
_C_TYPES = {"float": "float", "double": "double", "int": "int32_t", "uint": "uint32_t", "int64_t": "int64_t",
            "uint64_t": "uint64_t"}


@dataclass(frozen=True)
class Caps:
    """What a device descriptor lets shaders use."""

    fp64: bool = True
    int64: bool = True
    storage8: bool = True
    storage16: bool = True
    subgroup: bool = False
    subgroup_size: int = 0
    denorm32: bool = False               # request DenormPreserve for f32 (float controls)
    float16: bool = False                # shaderFloat16 (f16 arithmetic types)
    coopmat: bool = False                # cooperative matrices (see FEATURES)
    wg: int = 256                        # default workgroup size (invocations)
    max_wg: int = 1024                   # maxComputeWorkGroupInvocations
    max_shared: int = 16384              # bytes of shared memory per workgroup
    max_push: int = 128
    max_range: int = 2 ** 27             # maxStorageBufferRange
    max_bindings: int = 16
    device: str = "device"               # the descriptor (for messages)

    @classmethod
    def from_device(cls, dev) -> Caps:
        f, lim = dev.doc["features"], dev.doc["limits"]
        inv = int(lim.get("max_workgroup_invocations", lim["max_workgroup_size"][0]))
        max_wg = min(inv, int(lim["max_workgroup_size"][0]))
        wg = 1 << (min(256, max_wg).bit_length() - 1)       # a power of two, at most 256
        storage16 = f.get("storage_16bit", bool(f.get("fp16")) or bool(f.get("int16")))
        return cls(fp64=bool(f.get("fp64", False)), int64=bool(f.get("int64", False)),
                   storage8=bool(f.get("storage_8bit", f.get("int8", False))), storage16=bool(storage16),
                   subgroup=bool(f.get("subgroup_ops", False)), subgroup_size=int(f.get("subgroup_size", 0)),
                   denorm32=bool(f.get("denorm_preserve_fp32", False)), float16=bool(f.get("fp16", False)),
                   coopmat=bool(f.get("cooperative_matrix", False)),
                   wg=wg, max_wg=max_wg, max_shared=int(lim["max_shared_memory_bytes"]),
                   max_push=int(lim["max_push_constants_bytes"]), max_range=int(lim["max_storage_buffer_range_bytes"]),
                   max_bindings=min(16, int(lim.get("max_storage_buffers_per_stage", 16))),
                   device=_descriptor_name(dev))

    def has(self, feature: str) -> bool:
        return bool(getattr(self, feature))


def _descriptor_name(dev) -> str:
    """How error messages name the descriptor: its file name (devices/ada_mock.json -> ada_mock.json)."""
    src = getattr(dev, "source", "") or ""
    return src.rsplit("/", 1)[-1] if src and src != "<dict>" else dev.name


@dataclass(frozen=True)
class PushField:
    """One push-constant member: `expr` is the host C expression of its value (it may read the
    run-time attribute variables `rt_<attr>`, double or int64_t as the C kernels take them)."""

    name: str
    gtype: str
    expr: str

    @property
    def size(self) -> int:
        return 8 if self.gtype in ("double", "int64_t", "uint64_t") else 4

    @property
    def ctype(self) -> str:
        return _C_TYPES[self.gtype]


# ---------------------------------------------------------------------------------- dtypes

def storage_type(t: DTypeInfo) -> str:
    """The GLSL element type of a buffer holding `t`."""
    if t.is_packed:
        return "uint8_t"
    return {"f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t", "f8": "uint8_t",
            "i8": "int8_t", "i16": "int16_t", "i32": "int", "i64": "int64_t", "u8": "uint8_t", "u16": "uint16_t",
            "u32": "uint", "u64": "uint64_t", "bool": "uint8_t", "bitset": "uint8_t"}[t.name]


def storage_feature(t: DTypeInfo) -> str | None:
    st = storage_type(t)
    if st in ("uint8_t", "int8_t"):
        return "storage8"
    if st in ("uint16_t", "int16_t"):
        return "storage16"
    if st in ("int64_t", "uint64_t"):
        return "int64"
    if st == "double":
        return "fp64"
    return None


def compute_type(t: DTypeInfo) -> str:
    if t.is_float:
        return "double" if t.name == "f64" else "float"
    if t.kind is Kind.BOOL:
        return "int"
    if t.kind is Kind.SIGNED:
        return "int64_t" if t.bits == 64 else "int"
    return "uint64_t" if t.bits == 64 else "uint"


def is64(ct: str) -> bool:
    return ct in ("double", "int64_t", "uint64_t")


def signed(ct: str) -> bool:
    return ct in ("int", "int64_t")


def conv(expr: str, src: str, dst: str) -> str:
    if src == dst:
        return expr
    if src == "int" and dst == "int64_t":
        return f"oi_sext64({expr})"      # see oi_common.glsl: a driver bug with int64_t(int)
    return f"{dst}({expr})"


# ---------------------------------------------------------------------------------- literals

def float_lit(value: float) -> str:
    """An exact GLSL float literal of `value` rounded to f32 (bit patterns where a decimal could
    round twice)."""
    with np.errstate(over="ignore"):
        f = np.float32(float(value))
    if np.isnan(f):
        return "OI_NAN"
    if np.isinf(f):
        return "(-OI_INF)" if f < 0 else "OI_INF"
    if f == 0:
        return "(-0.0)" if math.copysign(1.0, float(f)) < 0 else "0.0"
    if float(f).is_integer() and abs(f) < 2 ** 24:
        text = f"{int(f)}.0"
    else:
        text = f"uintBitsToFloat(0x{struct.unpack('<I', struct.pack('<f', float(f)))[0]:08x}u)"
    return f"({text})" if f < 0 and not text.startswith("uint") else text


def double_lit(value: float) -> str:
    v = float(value)
    if v != v:
        return "OI_NAN_D"
    if math.isinf(v):
        return "(-OI_INF_D)" if v < 0 else "OI_INF_D"
    text = repr(v)
    if "e" not in text and "." not in text:
        text += ".0"
    text += "LF"
    return f"({text})" if v < 0 or text.startswith("-") else text


def _int_value(value, lo: int, hi: int, wrap: bool) -> int:
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return hi if value > 0 else lo
        value = int(value)
    v = int(value)
    if wrap:
        span = hi - lo + 1
        return (v - lo) % span + lo
    return max(lo, min(hi, v))


def int_lit(ct: str, value, wrap: bool = False) -> str:
    """A literal of an integer compute type; out-of-range values saturate (bounds) or wrap."""
    if ct == "int":
        v = _int_value(value, -2 ** 31, 2 ** 31 - 1, wrap)
        return "(-2147483647 - 1)" if v == -2 ** 31 else (f"({v})" if v < 0 else str(v))
    if ct == "uint":
        return f"{_int_value(value, 0, 2 ** 32 - 1, wrap)}u"
    if ct == "int64_t":
        v = _int_value(value, -2 ** 63, 2 ** 63 - 1, wrap)
        if v == -2 ** 63:
            return "(int64_t(-9223372036854775807l) - int64_t(1l))"
        return f"int64_t({v}l)"
    return f"uint64_t({_int_value(value, 0, 2 ** 64 - 1, wrap)}ul)"


def lit(ct: str, value, wrap: bool = False) -> str:
    if isinstance(value, Dim):      # a run-time extent (a mean's count): its macro, converted
        return f"{value}u" if ct == "uint" else (f"{value}" if ct == "int" else f"{ct}({value})")
    if ct == "float":
        return float_lit(value)
    if ct == "double":
        return double_lit(value)
    if isinstance(value, bool | np.bool_):
        value = int(value)
    return int_lit(ct, value, wrap)


# ---------------------------------------------------------------------------------- the kernel context

@dataclass
class KernelCtx:
    req: KernelRequest
    caps: Caps
    where: str = ""
    features: set[str] = field(default_factory=set)
    fallible: bool = False
    _push: dict[str, PushField] = field(default_factory=dict)

    # ------------------------------------------------------------ features
    def need(self, feature: str, why: str) -> None:
        """Record that the shader uses `feature`; refuse when the device lacks it."""
        if not self.caps.has(feature):
            what, fields = FEATURES[feature]
            raise SynthesisError(f"{self.where}op `{self.req.op}`: {why} needs {what}, which {self.caps.device} "
                                 f"does not declare ({fields})")
        self.features.add(feature)

    def need_dtype(self, t: DTypeInfo, var: str = "") -> None:
        f = storage_feature(t)
        if f is not None:
            self.need(f, f"`{var}` ({t.name})" if var and not var.startswith("#") else f"{t.name} data")

    def ct(self, t: DTypeInfo) -> str:
        """The compute type of `t`, recording the feature it needs."""
        c = compute_type(t)
        self.use(c, f"computing in {t.name}")
        return c

    def use(self, ct: str, why: str) -> str:
        if ct == "double":
            self.need("fp64", why)
        elif ct in ("int64_t", "uint64_t"):
            self.need("int64", why)
        return ct

    # ------------------------------------------------------------ loads and stores
    def load(self, t: DTypeInfo, buf: str, idx: str, ct: str | None = None) -> str:
        """Element `idx` of buffer `buf` (holding `t`) as a value of compute_type(t), or of `ct`."""
        own = self.ct(t)
        if t.is_packed:
            per, bits = 8 // t.bits, t.bits
            byte = f"uint({buf}[({idx}) / {per}u])"
            pos = f"({idx}) % {per}u" if per > 1 else "0u"
            if t.name == "t1":
                e = f"(oi_raw({byte}, {pos}, 1u) != 0u ? 1 : -1)"
            elif t.is_signed:
                e = f"oi_unpack_s({byte}, {pos}, {bits}u)"
            else:
                e = f"oi_unpack_u({byte}, {pos}, {bits}u)"
        elif t.name in ("f16", "bf16", "f8"):
            e = f"oi_{t.name}_to_f32(uint({buf}[{idx}]))"
        elif t.kind is Kind.BOOL:
            e = f"(uint({buf}[{idx}]) != 0u ? 1 : 0)"
        elif storage_type(t) in ("int8_t", "int16_t"):
            e = f"int({buf}[{idx}])"
        elif storage_type(t) in ("uint8_t", "uint16_t"):
            e = f"uint({buf}[{idx}])"
        else:
            e = f"{buf}[{idx}]"
        if ct is not None and ct != own:
            self.use(ct, f"computing {t.name} values as {ct}")
            return conv(e, own, ct)
        return e

    def store(self, t: DTypeInfo, v: str, vct: str) -> str:
        """`v` (compute type `vct`) as a value of storage_type(t): floats round (from f32 or from f64
        as the value is), integers wrap, bool is non-zero. Packed types: see `raw`."""
        st = storage_type(t)
        if t.is_packed:
            return "0u"
        if t.name in ("f16", "bf16", "f8"):
            if vct == "double":
                return f"{st}(oi_f64_to_{t.name}({v}))"
            return f"{st}(oi_f32_to_{t.name}({conv(v, vct, 'float')}))"
        if t.name == "f32":
            return f"oi_d2f({v})" if vct == "double" else conv(v, vct, "float")
        if t.name == "f64":
            return conv(v, vct, "double")
        if t.kind is Kind.BOOL:
            zero = "0.0" if vct == "float" else ("0.0LF" if vct == "double" else lit(vct, 0))
            return f"uint8_t(({v}) != {zero} ? 1u : 0u)"
        if vct in FLOAT_CT:
            raise SynthesisError(f"internal: float value stored into {t.name} without a conversion")
        if st in ("int8_t", "int16_t"):
            return f"{st}({conv(v, vct, 'int')})"
        if st in ("uint8_t", "uint16_t"):
            return f"{st}({conv(v, vct, 'uint')})"
        return conv(v, vct, st)

    def raw(self, t: DTypeInfo, v: str, vct: str) -> str:
        """The raw bits (a uint below 2^bits) a packed `t` stores for `v`: two's complement
        truncation; t2 clamps to -1..1, t1 is 1 for positive values and 0 otherwise."""
        if not t.is_packed:
            return "0u"
        if t.name == "t1":
            return f"(({v}) > {lit(vct, 0)} ? 1u : 0u)"
        if t.name == "t2":
            return f"(uint(clamp({conv(v, vct, 'int')}, -1, 1)) & 3u)"
        return f"(uint({v}) & {(1 << t.bits) - 1}u)"

    # ------------------------------------------------------------ attributes
    def runtime_dtype(self, name: str) -> DTypeInfo | None:
        for k, d in self.req.runtime_attrs:
            if k == name:
                return d
        return None

    def static(self, name: str):
        """A static attribute; those that shape the kernel cannot come from a variable."""
        if self.runtime_dtype(name) is not None:
            raise SynthesisError(f"{self.where}op `{self.req.op}`: attribute `{name}` must be a constant for the "
                                 "Vulkan backend (it decides the kernel's loops), not a variable")
        return self.req.attr(name)

    def attr(self, name: str, ct: str, wrap: bool = False) -> str:
        """A scalar attribute as a GLSL expression of compute type `ct`: a literal, or a push
        constant the host fills from the variable's value. `wrap`: an integer value that is
        stored (wraps to the type); otherwise a bound (saturates to ct's range, which keeps every
        comparison with in-range values the same)."""
        d = self.runtime_dtype(name)
        if d is None:
            return lit(ct, self.req.attr(name), wrap)
        self.use(ct, f"attribute `{name}`")
        rt = f"rt_{name}"
        if ct in FLOAT_CT:
            expr = f"({_C_TYPES[ct]}){rt}"
        elif d.is_float:
            # a float variable bounding / giving an integer: truncate, saturate to 64 bits (as C)
            base = (f"oi_f64_to_sint_sat(trunc({rt}), 64)" if signed(ct) or ct == "int"
                    else f"oi_f64_to_uint_sat(trunc({rt}), 64)")
            expr = _narrow_host(base, ct, wrap, from_unsigned=not (signed(ct) or ct == "int"))
        else:
            expr = _narrow_host(rt, ct, wrap, from_unsigned=False)
        return self.push(name, ct, expr)

    def push(self, name: str, gtype: str, expr: str) -> str:
        self.use(gtype, f"run-time value `{name}`")
        self._push[name] = PushField(name, gtype, expr)
        return f"pc.{name}"

    def push_fields(self) -> list[PushField]:
        fields = list(self._push.values())
        if self.fallible:
            fields.append(PushField("oi_node", "uint", "(uint32_t)NODE"))
        return sorted(fields, key=lambda f: (-f.size, f.name))   # 8-byte members first: no padding

    def lit(self, ct: str, value, wrap: bool = False) -> str:
        self.use(ct, "a constant")
        return lit(ct, value, wrap)


def _narrow_host(expr: str, ct: str, wrap: bool, from_unsigned: bool) -> str:
    """Host C converting a 64-bit integer expression to the push member type of `ct`."""
    if ct == "int":
        return f"(int32_t)(uint32_t)(uint64_t)({expr})" if wrap else f"oi_sat_i32((int64_t)({expr}))"
    if ct == "uint":
        if wrap:
            return f"(uint32_t)(uint64_t)({expr})"
        return f"oi_sat_u32_from_{'u' if from_unsigned else 's'}64({expr})"
    return f"({_C_TYPES[ct]})({expr})"


NARROW = ("f16", "bf16", "f8")


def round_to(k: KernelCtx, t: DTypeInfo, v: str, vct: str) -> str:
    """`v` rounded / wrapped to what `t` holds, as a compute-type value (store + load)."""
    if t.name in NARROW:
        enc = f"oi_f64_to_{t.name}({v})" if vct == "double" else f"oi_f32_to_{t.name}({v})"
        return f"oi_{t.name}_to_f32({enc})"
    if t.name == "f32":
        return f"oi_d2f({v})" if vct == "double" else v
    if t.is_float or t.bits in (32, 64):
        return v
    if t.kind.name == "BOOL":
        return f"(({v}) != 0 ? 1 : 0)"
    if vct in ("int64_t", "uint64_t"):
        return f"oi_wrap_{'s' if signed(vct) else 'u'}64({v}, {t.bits}u)"
    return f"oi_wrap_{'s' if signed(vct) else 'u'}({v}, {t.bits}u)"


def index_expr(i: str, out_shape, strides, base: int = 0) -> str:
    """Element index (uint) into an operand with element `strides` (0: broadcast; negative:
    walking backwards) of output element `i`, plus `base`. Positive terms come first, so the
    unsigned arithmetic never goes below zero."""
    sizes, ostr, istr = collapse(list(out_shape), list(contiguous_strides(tuple(out_shape))), list(strides))
    if len(sizes) == 1 and istr[0] == 1 and not base:
        return i
    pos = [f"{base}u"] if base else []
    neg = []
    for d, (n, os_, is_) in enumerate(zip(sizes, ostr, istr, strict=True)):
        if is_ == 0:
            continue
        coord = i if os_ == 1 else f"({i} / {os_}u)"
        if d > 0:
            coord = f"({coord} % {n}u)"
        (pos if is_ > 0 else neg).append(coord if abs(is_) == 1 else f"{coord} * {abs(is_)}u")
    text = " + ".join(pos) if pos else "0u"
    return f"({text}) - ({' + '.join(neg)})" if neg else text
