"""Device descriptors: load, validate against devices/schema.json, probe this machine.

The schema file is the single source of truth for what a descriptor may contain; `validate`
interprets the small part of JSON Schema it uses (type, enum, required, properties,
additionalProperties, items, minItems/maxItems, minimum/maximum) and reports the first problem
with the JSON path of the offending field.
"""

from __future__ import annotations

import difflib
import json
import os
import platform
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..errors import DeviceError
from ..resources import devices_dir

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


@cache
def schema() -> dict:
    return json.loads((devices_dir() / "schema.json").read_text())


def _check(value, sch: dict, path: str) -> None:
    where = path or "(top level)"
    if "enum" in sch and value not in sch["enum"]:
        raise DeviceError(f"{where}: {json.dumps(value)} is not one of {', '.join(json.dumps(e) for e in sch['enum'])}")
    t = sch.get("type")
    if t == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise DeviceError(f"{where}: expected an integer, got {json.dumps(value)}")
    elif t is not None and not isinstance(value, _TYPES[t]):
        raise DeviceError(f"{where}: expected {'an' if t[0] in 'aeiou' else 'a'} {t}, got {json.dumps(value)}")
    if "minimum" in sch and value < sch["minimum"]:
        raise DeviceError(f"{where}: {value} is below the minimum {sch['minimum']}")
    if "maximum" in sch and value > sch["maximum"]:
        raise DeviceError(f"{where}: {value} is above the maximum {sch['maximum']}")
    if isinstance(value, dict):
        for req in sch.get("required", []):
            if req not in value:
                raise DeviceError(f"{path + '.' if path else ''}{req}: required field is missing")
        props = sch.get("properties", {})
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k in props:
                _check(v, props[k], sub)
            elif sch.get("additionalProperties") is False:
                hint = difflib.get_close_matches(k, list(props), n=1, cutoff=0.7)
                raise DeviceError(f"{sub}: unknown field" + (f" (did you mean `{hint[0]}`?)" if hint else
                                                              f"; allowed: {', '.join(props)}"))
    if isinstance(value, list):
        if len(value) < sch.get("minItems", 0) or len(value) > sch.get("maxItems", len(value)):
            raise DeviceError(f"{where}: expected {sch.get('minItems')}..{sch.get('maxItems')} items, got {len(value)}")
        for i, item in enumerate(value):
            if "items" in sch:
                _check(item, sch["items"], f"{path}[{i}]")


def validate(doc: dict) -> None:
    """Raise DeviceError naming the field if `doc` does not follow devices/schema.json."""
    _check(doc, schema(), "")
    dev = doc["device"]
    cpu_only, gpu_only = ("isa", "cache", "threads", "compiler"), ("limits", "features", "memory")
    if dev["type"] == "cpu":
        if dev["api"] != "c":
            raise DeviceError("device.api: a cpu device uses api \"c\"")
        if "isa" not in doc:
            raise DeviceError("isa: required field is missing for a cpu device")
        bad = [k for k in gpu_only if k in doc]
    else:
        if dev["api"] != "vulkan":
            raise DeviceError("device.api: a gpu device uses api \"vulkan\"")
        for k in ("limits", "features"):
            if k not in doc:
                raise DeviceError(f"{k}: required field is missing for a gpu device")
        bad = [k for k in cpu_only if k in doc]
    if bad:
        raise DeviceError(f"{bad[0]}: not a field of a {dev['type']} device")


@dataclass(frozen=True)
class Device:
    """A validated descriptor. `doc` keeps the JSON as loaded; the properties read it."""

    doc: dict
    source: str = field(default="<dict>", compare=False)

    @property
    def kind(self) -> str:
        return self.doc["device"]["type"]

    @property
    def name(self) -> str:
        return self.doc["device"]["name"]

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def features(self) -> frozenset[str]:
        if self.is_cpu:
            return frozenset(self.doc["isa"]["features"])
        return frozenset(k for k, v in self.doc["features"].items() if v is True)

    @property
    def isa(self) -> str:
        """CPU kernel family: "avx512", "avx2" or "generic"."""
        f = self.features
        if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"} <= f:
            return "avx512"
        if {"avx2", "fma"} <= f:
            return "avx2"
        return "generic"

    @property
    def threads(self) -> int:
        return int(self.doc.get("threads", 1))

    @property
    def cflags(self) -> tuple[str, ...]:
        return tuple(self.doc.get("compiler", {}).get("cflags", ()))

    @property
    def preferences(self) -> dict:
        return dict(self.doc.get("preferences", {}))

    def cache_bytes(self, level: str, default: int) -> int:
        return int(self.doc.get("cache", {}).get(f"{level}_bytes", default))


def load(path_or_name) -> Device:
    """A descriptor from a path, or the name of a bundled one (`x86_64-avx2`, `ada_mock`)."""
    p = Path(path_or_name)
    if not p.exists():
        bundled = devices_dir() / (p.name if p.suffix == ".json" else f"{p.name}.json")
        if not bundled.exists():
            raise DeviceError(f"device descriptor {str(path_or_name)!r} not found; bundled: "
                              + ", ".join(sorted(q.stem for q in devices_dir().glob("*.json") if q.stem != "schema")))
        p = bundled
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise DeviceError(f"{p}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    try:
        validate(doc)
    except DeviceError as exc:
        raise DeviceError(f"{p}: {exc}") from None
    return Device(doc, str(p))


def bundled() -> list[Path]:
    return sorted(q for q in devices_dir().glob("*.json") if q.stem != "schema")


# ---------------------------------------------------------------------------------------- probing

def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return set(m.group(1).split()) if m else set()


def _cache_size(level: int, kind: str) -> int | None:
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            if int((index / "level").read_text()) == level and (index / "type").read_text().strip() in kind:
                size = (index / "size").read_text().strip()
                mult = {"K": 1024, "M": 1024 * 1024}.get(size[-1], 1)
                return int(size.rstrip("KM")) * mult
        except (OSError, ValueError):
            continue
    return None


def probe_cpu() -> dict:
    """A descriptor for this machine's CPU, from /proc/cpuinfo and sysfs."""
    flags = _cpu_flags()
    mapping = {"sse4_2": "sse4.2", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
               "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512vl": "avx512vl", "avx512dq": "avx512dq",
               "avx512_bf16": "avx512_bf16", "avx512_fp16": "avx512_fp16"}
    features = [v for k, v in mapping.items() if k in flags] or ["scalar"]
    wide = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(features)
    vector_bits = 512 if wide else (256 if "avx2" in features else 128)
    cflags = []
    for feat, flag in (("avx2", "-mavx2"), ("fma", "-mfma"), ("f16c", "-mf16c")):
        if feat in features:
            cflags.append(flag)
    if wide:
        cflags += ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"]
    cache_info = {}
    for key, level, kind in (("l1d_bytes", 1, "Data"), ("l2_bytes", 2, "Unified"), ("l3_bytes", 3, "Unified")):
        size = _cache_size(level, kind)
        if size:
            cache_info[key] = size
    model = ""
    try:
        m = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = m.group(1).strip() if m else ""
    except OSError:
        pass
    doc = {
        "device": {"type": "cpu", "api": "c", "vendor": "probed", "name": model or platform.processor() or "this CPU",
                   "architecture": platform.machine()},
        "isa": {"features": features, "vector_bits": vector_bits},
        "cache": cache_info,
        "threads": os.cpu_count() or 1,
        "compiler": {"cflags": cflags},
        "preferences": {"prefer_fusion": True, "max_kernel_ops": 8},
    }
    validate(doc)
    return doc
