"""Device descriptors: load, validate against devices/schema.json, probe this machine, and
decide whether this machine's CPU may run a CPU descriptor's code.

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
from ..files import read_text
from ..resources import devices_dir, hal_dir
from . import isa

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
    cpu_only, gpu_only = ("isa", "cache", "threads", "compiler", "toolchain"), ("limits", "features", "memory")
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
class Toolchain:
    """A CPU descriptor's `toolchain`: the cross compiler and emulator for its architecture."""

    triple: str                   # GNU target triple: the binutils' prefix (aarch64-linux-gnu-ar)
    compiler: str                 # the C compiler command (CC replaces it: openinfer/cross.py)
    sysroot: str | None           # the target's headers and libraries, when the compiler needs one
    emulator: str                 # the QEMU binary that runs its programs here (user mode, or system)
    packages: tuple[str, ...]     # Debian packages that provide the above (named when one is missing)
    machine: str | None = None    # bare metal: the board QEMU's system emulator models (-M)
    specs: tuple[str, ...] = ()   # bare metal: the spec files that pick its C library (newlib-nano, picolibc)


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
    def architecture(self) -> str:
        """The CPU architecture its code is for (x86_64 when the descriptor does not say)."""
        return self.doc["device"].get("architecture", "x86_64")

    @property
    def single_precision(self) -> bool:
        """CPU: whether its FPU computes no double precision (`isa.fpu` single, or none: software
        floats, where a double costs twice a float): f32 kernels then keep to float arithmetic and
        float libm instead of double."""
        return self.is_cpu and self.doc["isa"].get("fpu", "double") in ("single", "none")

    @property
    def bare_metal(self) -> bool:
        """CPU: whether its programs run with no operating system (openinfer/targets/isa.py)."""
        arch = isa.ARCHITECTURE.get(self.architecture)
        return self.is_cpu and arch is not None and arch.bare_metal

    @property
    def pointer_bytes(self) -> int:
        """CPU: bytes of a pointer in its code (a GPU descriptor's host program: this machine's)."""
        arch = isa.ARCHITECTURE.get(self.architecture if self.is_cpu else host_architecture())
        return arch.pointer_bytes if arch is not None else 8

    @property
    def hal_platform(self) -> str:
        """The CPU HAL its programs link (openinfer/resources.py HAL_SOURCES)."""
        return "baremetal" if self.bare_metal else "posix"

    @property
    def family(self) -> isa.Family:
        """CPU: the kernel family its code uses (openinfer/targets/isa.py), the widest its
        features allow within `isa.vector_bits`."""
        return isa.family_of(self.features, self.architecture, self.doc["isa"].get("vector_bits"))

    @property
    def isa(self) -> str:
        """CPU kernel family name: "avx512", "avx2", "cortex-m", ... or "generic"."""
        return self.family.name

    @property
    def cpu_feature_macros(self) -> tuple[str, ...]:
        """The HAL's OI_CPU_* bits of the ISA extensions this CPU descriptor's code is compiled
        for: a generated program's create() refuses to run on a CPU without them."""
        if not self.is_cpu:
            return ()
        return tuple(f.hal_bit for f in isa.FEATURES if f.name in self.features)

    @property
    def cpu_feature_mask(self) -> int:
        """The same as a number: the value of the generated header's *_CPU_FEATURES."""
        bits = hal_cpu_bits()
        mask = 0
        for macro in self.cpu_feature_macros:
            mask |= bits[macro]
        return mask

    def missing_on_host(self) -> list[str]:
        """What this machine lacks to run this CPU descriptor's code ([] for GPU descriptors,
        which run on whatever CPU drives the device): its features this CPU does not have (as
        capped by OI_HOST_ISA), or the architecture when it is another one."""
        if not self.is_cpu:
            return []
        if self.architecture != host_architecture():
            return [f"architecture {self.architecture} (this machine is {platform.machine() or 'unknown'})"]
        have = host_features()
        return [f.name for f in isa.FEATURES if f.name in self.features and f.name not in have]

    @property
    def toolchain(self) -> Toolchain | None:
        """CPU: how to build and run its code on a machine of another architecture (None when the
        descriptor does not say)."""
        doc = self.doc.get("toolchain")
        if doc is None:
            return None
        return Toolchain(doc["triple"], doc["compiler"], doc.get("sysroot"), doc["emulator"],
                         tuple(doc.get("packages", ())), doc.get("machine"), tuple(doc.get("specs", ())))

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
        doc = json.loads(read_text(p, DeviceError))
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

def _cpuinfo() -> str:
    """/proc/cpuinfo ("" where there is none)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _cpu_flags() -> set[str]:
    """The CPU's features as /proc/cpuinfo lists them: the `flags` line on x86, `Features` on
    Arm (the architecture table says which; Linux lists what AT_HWCAP holds there)."""
    arch = isa.ARCHITECTURE.get(host_architecture())
    if arch is None:
        return set()
    m = re.search(rf"^{arch.cpuinfo_field}\s*:\s*(.*)$", _cpuinfo(), re.M)
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


@cache
def hal_cpu_bits() -> dict[str, int]:
    """OI_CPU_* name -> bit, as oi_hal.h defines them (the header is the one source of the values)."""
    text = (hal_dir() / "include" / "oi_hal.h").read_text()
    defines = re.finditer(r"^#define (OI_CPU_\w+)\s+\(1u << (\d+)\)", text, re.M)
    return {m.group(1): 1 << int(m.group(2)) for m in defines}


def host_isa_cap() -> str | None:
    """OI_HOST_ISA, checked: run as on a smaller CPU (tests, demos); None when unset. A family of
    this machine's architecture (or the portable one): another's would mean nothing here."""
    cap = os.environ.get("OI_HOST_ISA") or None
    arch = host_architecture()
    here = [f.name for f in isa.FAMILIES if f.architecture in (arch, isa.ANY)]
    if cap is not None and cap not in here:
        raise DeviceError(f"OI_HOST_ISA={cap!r}: expected one of {', '.join(reversed(here))}")
    return cap


def host_architecture() -> str:
    """This machine's architecture as descriptors name it (platform.machine() otherwise)."""
    return isa.architecture_of_machine(platform.machine())


def host_features() -> frozenset[str]:
    """The descriptor features this machine's CPU has, less what OI_HOST_ISA takes away."""
    flags = _cpu_flags()
    arch = host_architecture()
    families = {f.name for f in isa.FAMILIES if f.architecture in (arch, isa.ANY)}
    have = frozenset(f.name for f in isa.FEATURES if f.family in families and f.cpuinfo in flags)
    cap = host_isa_cap()
    return have - isa.hidden_by_cap(cap) if cap else have


def best_host_target() -> str:
    """The bundled CPU descriptor with the widest kernels this machine may run: a family of its
    architecture, else its architecture's portable C (x86_64-generic on an architecture the
    table lacks)."""
    arch = host_architecture()
    for family in reversed(isa.FAMILIES):
        if family.architecture == arch and not load(family.descriptor).missing_on_host():
            return family.descriptor
    known = isa.ARCHITECTURE.get(arch, isa.ARCHITECTURE["x86_64"])
    return known.portable


def probe_cpu() -> dict:
    """A descriptor for this machine's CPU, from /proc/cpuinfo and sysfs (as capped by OI_HOST_ISA)."""
    have = host_features()
    features = [f.name for f in isa.FEATURES if f.name in have] or [isa.SCALAR]
    family = isa.family_of(frozenset(features), host_architecture())
    cflags = [f.cflag for f in isa.FEATURES if f.name in features and f.cflag]
    cache_info = {}
    for key, level, kind in (("l1d_bytes", 1, "Data"), ("l2_bytes", 2, "Unified"), ("l3_bytes", 3, "Unified")):
        size = _cache_size(level, kind)
        if size:
            cache_info[key] = size
    m = re.search(r"^model name\s*:\s*(.*)$", _cpuinfo(), re.M)
    model = m.group(1).strip() if m else ""
    doc = {
        "device": {"type": "cpu", "api": "c", "vendor": "probed", "name": model or platform.processor() or "this CPU",
                   "architecture": host_architecture()},
        "isa": {"features": features, "vector_bits": family.vector_bits},
        "cache": cache_info,
        "threads": os.cpu_count() or 1,
        "compiler": {"cflags": cflags},
        "preferences": {"prefer_fusion": True, "max_kernel_ops": 8},
    }
    validate(doc)
    return doc


# ---------------------------------------------------------------------------------------- Vulkan probing
#
# Through ctypes into the Vulkan loader (libvulkan.so.1): no compiler or headers needed, so it
# works on a machine with just the driver. Structures are read as bytes at their offsets in the
# Vulkan C ABI (identical on every LP64 platform; checked against vulkan_core.h).

_VK_VENDORS = {0x10DE: "nvidia", 0x1002: "amd", 0x8086: "intel", 0x13B5: "arm", 0x5143: "qualcomm",
               0x10005: "mesa", 0x106B: "apple"}
_VK_TYPES = {0: "other", 1: "integrated_gpu", 2: "discrete_gpu", 3: "virtual_gpu", 4: "cpu"}


def _vk_version(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def probe_vulkan() -> list[dict]:
    """One GPU descriptor per Vulkan physical device (an empty list when there is no loader or
    no device). Limits and features are the device's own; preferences are defaults."""
    import ctypes
    import ctypes.util
    import struct

    lib = None
    for name in ("libvulkan.so.1", ctypes.util.find_library("vulkan"), "libvulkan.so"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return []
    vp = ctypes.c_void_p
    app_name = ctypes.c_char_p(b"openinfer-probe")
    app = ctypes.create_string_buffer(48)      # VkApplicationInfo
    struct.pack_into("=I4xQQI4xQII", app, 0, 0, 0, ctypes.cast(app_name, vp).value or 0, 1, 0, 0, (1 << 22) | (2 << 12))
    info = ctypes.create_string_buffer(64)     # VkInstanceCreateInfo
    struct.pack_into("=I4xQI4xQI4xQI4xQ", info, 0, 1, 0, 0, ctypes.addressof(app), 0, 0, 0, 0)
    inst = vp()
    lib.vkCreateInstance.argtypes = [vp, vp, ctypes.POINTER(vp)]
    if lib.vkCreateInstance(ctypes.addressof(info), None, ctypes.byref(inst)) != 0:
        return []
    out = []
    try:
        count = ctypes.c_uint32(0)
        lib.vkEnumeratePhysicalDevices.argtypes = [vp, ctypes.POINTER(ctypes.c_uint32), vp]
        lib.vkEnumeratePhysicalDevices(inst, ctypes.byref(count), None)
        handles = (vp * max(1, count.value))()
        lib.vkEnumeratePhysicalDevices(inst, ctypes.byref(count), handles)
        for i in range(count.value):
            out.append(_describe_vulkan(lib, handles[i], i, inst))
    finally:
        lib.vkDestroyInstance.argtypes = [vp, vp]
        lib.vkDestroyInstance(inst, None)
    for doc in out:
        validate(doc)
    return out


def _describe_vulkan(lib, phys, index: int, inst=None) -> dict:
    import ctypes
    import struct

    vp = ctypes.c_void_p
    u32 = lambda buf, off: struct.unpack_from("=I", buf, off)[0]   # noqa: E731
    u64 = lambda buf, off: struct.unpack_from("=Q", buf, off)[0]   # noqa: E731
    # VkPhysicalDeviceProperties2 -> VkPhysicalDeviceSubgroupProperties
    p12 = ctypes.create_string_buffer(736)          # VkPhysicalDeviceVulkan12Properties
    struct.pack_into("=I4xQ", p12, 0, 52, 0)
    sg = ctypes.create_string_buffer(32)
    struct.pack_into("=I4xQ", sg, 0, 1000094000, ctypes.addressof(p12))
    props2 = ctypes.create_string_buffer(16 + 824 + 64)
    struct.pack_into("=I4xQ", props2, 0, 1000059001, ctypes.addressof(sg))
    lib.vkGetPhysicalDeviceProperties2.argtypes = [vp, vp]
    lib.vkGetPhysicalDeviceProperties2(phys, ctypes.addressof(props2))
    p = props2.raw[16:16 + 824]
    lim = 296                                   # offsetof(VkPhysicalDeviceProperties, limits)
    api, driver, vendor, _dev, dtype = struct.unpack_from("=5I", p, 0)
    name = p[20:20 + 256].split(b"\0", 1)[0].decode(errors="replace")
    # VkPhysicalDeviceFeatures2 -> Vulkan11Features -> Vulkan12Features
    exts = _vk_device_extensions(lib, phys)
    fcm = ctypes.create_string_buffer(24)           # VkPhysicalDeviceCooperativeMatrixFeaturesNV
    struct.pack_into("=I4xQ", fcm, 0, 1000249000, 0)
    coop_ext = "VK_NV_cooperative_matrix" in exts
    f12 = ctypes.create_string_buffer(208)
    struct.pack_into("=I4xQ", f12, 0, 51, ctypes.addressof(fcm) if coop_ext else 0)
    f11 = ctypes.create_string_buffer(64)
    struct.pack_into("=I4xQ", f11, 0, 49, ctypes.addressof(f12))
    f2 = ctypes.create_string_buffer(240)
    struct.pack_into("=I4xQ", f2, 0, 1000059000, ctypes.addressof(f11))
    lib.vkGetPhysicalDeviceFeatures2.argtypes = [vp, vp]
    lib.vkGetPhysicalDeviceFeatures2(phys, ctypes.addressof(f2))
    feat = f2.raw[16:]
    mem = ctypes.create_string_buffer(520)
    lib.vkGetPhysicalDeviceMemoryProperties.argtypes = [vp, vp]
    lib.vkGetPhysicalDeviceMemoryProperties(phys, ctypes.addressof(mem))
    heaps = [struct.unpack_from("=QI", mem.raw, 264 + 16 * h) for h in range(u32(mem.raw, 260))]
    local = [size for size, flags in heaps if flags & 1] or [0]
    storage8, storage16 = bool(u32(f12.raw, 24)), bool(u32(f11.raw, 16))
    fp16, int8 = bool(u32(f12.raw, 44)), bool(u32(f12.raw, 48))
    sg_size, sg_stages, sg_ops = struct.unpack_from("=3I", sg.raw, 16)
    vendor_name = _VK_VENDORS.get(vendor, f"0x{vendor:04x}")
    return {
        "device": {"type": "gpu", "api": "vulkan", "vendor": vendor_name, "name": name,
                   "architecture": _VK_TYPES.get(dtype, "other"),
                   "driver": f"{driver} (Vulkan {_vk_version(api)}; device {index}: OI_VK_DEVICE={index})"},
        "limits": {
            "max_workgroup_size": list(struct.unpack_from("=3I", p, lim + 236)),
            "max_workgroup_invocations": u32(p, lim + 232),
            "max_shared_memory_bytes": u32(p, lim + 216),
            "max_push_constants_bytes": max(128, u32(p, lim + 32)),
            "max_storage_buffer_range_bytes": u32(p, lim + 28),
            "min_storage_buffer_offset_alignment": max(1, u64(p, lim + 328)),
            "max_storage_buffers_per_stage": max(1, u32(p, lim + 76)),
        },
        "features": {
            "fp16": fp16 and storage16, "int8": int8 and storage8, "int16": bool(u32(feat, 164)),
            "int64": bool(u32(feat, 160)), "fp64": bool(u32(feat, 156)),
            "storage_8bit": storage8, "storage_16bit": storage16,
            "subgroup_ops": bool(sg_stages & 0x20) and bool(sg_ops & 0x4),   # compute stage, arithmetic
            "subgroup_size": max(1, sg_size),
            # what the f16 GEMM kernels use (openinfer/targets/vulkan/glsl/linalg.py): VK_NV_cooperative_matrix
            # with 16x16x16 f16 x f16 -> f32 subgroup matrices, and the Vulkan memory model
            "cooperative_matrix": (coop_ext and bool(u32(fcm.raw, 16)) and bool(u32(f12.raw, 180))   # memory model
                                   and bool(u32(f12.raw, 184)) and fp16                             # device scope
                                   and _vk_f16_coopmat(lib, inst, phys)),
            "denorm_preserve_fp32": bool(u32(p12.raw, 560)),
        },
        "memory": {"global_bytes": max(local), "shared_bytes_per_sm": u32(p, lim + 216)},
        "preferences": {"default_precision": "fp32", "prefer_fusion": True, "prefer_persistent_kv": True,
                        "max_kernel_ops": 12},
    }


def _vk_f16_coopmat(lib, inst, phys) -> bool:
    """Whether vkGetPhysicalDeviceCooperativeMatrixPropertiesNV lists 16x16x16 subgroup matrices
    with f16 A and B and f32 C and D."""
    import ctypes
    import struct

    if inst is None:
        return False
    vp = ctypes.c_void_p
    lib.vkGetInstanceProcAddr.argtypes = [vp, ctypes.c_char_p]
    lib.vkGetInstanceProcAddr.restype = vp
    addr = lib.vkGetInstanceProcAddr(inst, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesNV")
    if not addr:
        return False
    get = ctypes.CFUNCTYPE(ctypes.c_int32, vp, ctypes.POINTER(ctypes.c_uint32), vp)(addr)
    n = ctypes.c_uint32(0)
    if get(phys, ctypes.byref(n), None) != 0 or n.value == 0:
        return False
    props = ctypes.create_string_buffer(48 * n.value)       # VkCooperativeMatrixPropertiesNV
    for i in range(n.value):
        struct.pack_into("=I4xQ", props, 48 * i, 1000249001, 0)
    if get(phys, ctypes.byref(n), ctypes.addressof(props)) != 0:
        return False
    for i in range(n.value):
        msize, nsize, ksize, at, bt, ct, dt, scope = struct.unpack_from("=8I", props.raw, 48 * i + 16)
        if (msize, nsize, ksize, at, bt, ct, dt, scope) == (16, 16, 16, 0, 0, 1, 1, 3):
            return True
    return False


def _vk_device_extensions(lib, phys) -> set[str]:
    import ctypes

    vp = ctypes.c_void_p
    n = ctypes.c_uint32(0)
    lib.vkEnumerateDeviceExtensionProperties.argtypes = [vp, vp, ctypes.POINTER(ctypes.c_uint32), vp]
    if lib.vkEnumerateDeviceExtensionProperties(phys, None, ctypes.byref(n), None) != 0:
        return set()
    buf = ctypes.create_string_buffer(260 * max(1, n.value))     # VkExtensionProperties: char[256] + uint32
    lib.vkEnumerateDeviceExtensionProperties(phys, None, ctypes.byref(n), ctypes.addressof(buf))
    return {buf.raw[260 * i:260 * i + 256].split(b"\0", 1)[0].decode(errors="replace") for i in range(n.value)}
