"""The ISA table: every fact about CPU instruction sets, stated once.

Three tables. `FEATURES` has a row per ISA extension a descriptor may list (`isa.features`): the
HAL's bit for it (hal/include/oi_hal.h OI_CPU_*, which generated code checks at create()), the
flag the kernel reports in /proc/cpuinfo, the compiler flag that enables it, and the kernel
family that introduces it (what OI_HOST_ISA takes away). `FAMILIES` has a row per CPU kernel
family, narrowest first: its architecture, the features its kernels need, the vector width they
are written for, the headers they include, the target wing that renders them
(openinfer/targets/<wing>/) and the bundled descriptor that selects it. `ARCHITECTURES` has a
row per CPU architecture a descriptor may name (`device.architecture`): how Python and meson
spell it, where /proc/cpuinfo lists its features, and its bundled portable-C descriptor.

Everything else reads these rows: descriptor validation and `Device.isa`
(openinfer/targets/devices.py), host probing and OI_HOST_ISA, the generated header's feature
mask, the kernels' includes and the choice of target. tests/synth/test_isa_table.py checks the
schema's feature enum, the HAL header's bits and the HAL's feature names against them.

Adding an ISA: a row (or rows) here, the schema's enum, the HAL's bit, and a wing of its own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feature:
    """One ISA extension a CPU descriptor may list."""

    name: str             # as descriptors spell it ("avx2")
    hal_bit: str          # OI_CPU_* in hal/include/oi_hal.h: what create() checks the CPU for
    cpuinfo: str          # the /proc/cpuinfo flag (Linux lists it only when the OS saves its registers)
    cflag: str | None     # the compiler flag that lets generated code use it (probed descriptors)
    family: str           # the kernel family that brings it: OI_HOST_ISA=<narrower family> hides it


@dataclass(frozen=True)
class Family:
    """One CPU kernel family: a set of kernels and what they need."""

    name: str                     # "avx2": the descriptor's `Device.isa`, an OI_HOST_ISA value
    architecture: str             # `device.architecture` of its descriptors, or ANY (portable code)
    requires: frozenset[str]      # features a descriptor must list to get these kernels
    vector_bits: int              # register width the kernels are written for
    includes: tuple[str, ...]     # system headers the kernels use (their intrinsics)
    wing: str                     # the target package that renders it: openinfer/targets/<wing>/
    descriptor: str               # the bundled descriptor of this family (best_host_target)


FEATURES: tuple[Feature, ...] = (
    Feature("sse4.2", "OI_CPU_SSE42", "sse4_2", None, "generic"),
    Feature("avx", "OI_CPU_AVX", "avx", None, "avx2"),
    Feature("avx2", "OI_CPU_AVX2", "avx2", "-mavx2", "avx2"),
    Feature("fma", "OI_CPU_FMA", "fma", "-mfma", "avx2"),
    Feature("f16c", "OI_CPU_F16C", "f16c", "-mf16c", "avx2"),
    Feature("avx512f", "OI_CPU_AVX512F", "avx512f", "-mavx512f", "avx512"),
    Feature("avx512bw", "OI_CPU_AVX512BW", "avx512bw", "-mavx512bw", "avx512"),
    Feature("avx512vl", "OI_CPU_AVX512VL", "avx512vl", "-mavx512vl", "avx512"),
    Feature("avx512dq", "OI_CPU_AVX512DQ", "avx512dq", "-mavx512dq", "avx512"),
    Feature("avx512_bf16", "OI_CPU_AVX512_BF16", "avx512_bf16", None, "avx512"),
    Feature("avx512_fp16", "OI_CPU_AVX512_FP16", "avx512_fp16", None, "avx512"),
    # VPDPBUSD (u8 x s8 sums of 4 into int32 lanes): the int8 kernels' multiply-add where listed
    # (openinfer/targets/x86/quantized.py); Cascade Lake, Ice Lake, Zen 4 and later have it
    Feature("avx512_vnni", "OI_CPU_AVX512_VNNI", "avx512_vnni", "-mavx512vnni", "avx512"),
    # AArch64 (Linux reports them in AT_HWCAP; /proc/cpuinfo's `Features` line spells them so).
    # No compiler flag: Advanced SIMD is baseline Armv8-A, and the Armv8.2-A extensions are
    # enabled together by one -march (a descriptor's `compiler.cflags`), which flags of single
    # features cannot compose.
    Feature("asimd", "OI_CPU_ASIMD", "asimd", None, "neon"),
    Feature("asimddp", "OI_CPU_ASIMDDP", "asimddp", None, "v82"),       # SDOT/UDOT (dot product)
    Feature("fphp", "OI_CPU_FPHP", "fphp", None, "v82"),                # scalar f16 arithmetic
    Feature("asimdhp", "OI_CPU_ASIMDHP", "asimdhp", None, "v82"),       # vector f16 arithmetic
)

#: The feature a descriptor lists when it wants portable C only (it needs nothing of the CPU).
SCALAR = "scalar"

#: The architecture of a family whose code compiles for any CPU (portable C).
ANY = "*"

FAMILIES: tuple[Family, ...] = (
    Family("generic", ANY, frozenset(), 128, (), "c", "x86_64-generic"),
    Family("avx2", "x86_64", frozenset({"avx2", "fma"}), 256, ("immintrin.h",), "x86", "x86_64-avx2"),
    Family("avx512", "x86_64", frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"}), 512,
           ("immintrin.h",), "x86", "x86_64-avx512"),
    # AArch64: the NEON wing's kernels (SDOT in the dequantizing GEMV where v8.2 has it); the
    # descriptors list every feature -march lets the compiler use, so create() checks the CPU for it.
    Family("neon", "aarch64", frozenset({"asimd"}), 128, ("arm_neon.h",), "arm", "aarch64-neon"),
    Family("v82", "aarch64", frozenset({"asimd", "asimddp", "fphp", "asimdhp"}), 128, ("arm_neon.h",), "arm",
           "aarch64-v82"),
    # Cortex-M4F / M7 (Armv7E-M with an FPU): scalar kernels, so no feature to require; the
    # portable width, which every descriptor's cap allows. The DSP extension (SMLAD, in the
    # dequantizing GEMV) is Armv7E-M's own; ACLE's intrinsics for it are in arm_acle.h.
    Family("cortex-m", "armv7e-m", frozenset(), 128, ("arm_acle.h",), "mcu", "cortex-m4"),
    # Cortex-M33 (Armv8-M Mainline with an FPU): the same wing's kernels (VLDM, VFMA and the DSP
    # extension's SMLAD are Armv8-M Mainline's too). The DSP extension is optional there: a
    # descriptor whose flags leave it out gets the dequantizing GEMV's #error, not wrong code.
    Family("cortex-m-v8m", "armv8-m", frozenset(), 128, ("arm_acle.h",), "mcu", "cortex-m33"),
    # Cortex-M55 (Armv8.1-M with Helium, the M-profile Vector Extension, floating point included):
    # the Cortex-M wing's MVE kernels. No feature to require: -mcpu=cortex-m55 enables MVE and
    # there is no CPU to probe (a microcontroller is never a host).
    Family("helium", "armv8.1-m", frozenset(), 128, ("arm_mve.h",), "mcu", "cortex-m55"),
)


@dataclass(frozen=True)
class Architecture:
    """One CPU architecture: a value of `device.architecture`."""

    name: str                     # as descriptors spell it ("aarch64")
    machines: tuple[str, ...]     # platform.machine() spellings of it
    cpuinfo_field: str            # the /proc/cpuinfo line that lists the CPU's features
    meson_cpu_family: str         # meson's `cpu_family` (a cross file's [host_machine])
    meson_cpu: str                # meson's `cpu`
    portable: str                 # the bundled portable-C descriptor for it (best_host_target's last resort)
    #: bytes of a pointer (and of size_t): how a generated program's context is laid out
    #: (openinfer/targets/c/layout.py)
    pointer_bytes: int = 8
    #: no operating system under its programs (microcontrollers): they link the bare-metal HAL
    #: (hal/src/oi_hal_baremetal.c), build as a static library, and run here in a firmware
    #: under QEMU's system emulation (openinfer/firmware.py)
    bare_metal: bool = False


ARCHITECTURES: tuple[Architecture, ...] = (
    Architecture("x86_64", ("x86_64", "AMD64"), "flags", "x86_64", "x86_64", "x86_64-generic"),
    Architecture("aarch64", ("aarch64", "arm64", "ARM64"), "Features", "aarch64", "aarch64", "aarch64-generic"),
    # 32-bit Arm, hard-float ABI; its one descriptor is portable C, so no feature of it is read
    Architecture("armv7", ("armv7l", "armv8l"), "Features", "arm", "armv7", "armv7-generic", pointer_bytes=4),
    # Cortex-M microcontrollers: Armv7E-M (M4, M7: the DSP extension), Armv8-M Mainline (M33) and
    # Armv8.1-M (M55: Helium).
    # Never a host: no machine spells them, no /proc/cpuinfo lists their features.
    Architecture("armv7e-m", (), "", "arm", "armv7e-m", "cortex-m4", pointer_bytes=4, bare_metal=True),
    Architecture("armv8-m", (), "", "arm", "armv8-m.main", "cortex-m33", pointer_bytes=4, bare_metal=True),
    Architecture("armv8.1-m", (), "", "arm", "armv8.1-m.main", "cortex-m55", pointer_bytes=4, bare_metal=True),
    # 32-bit RISC-V microcontrollers (RV32IMAC: the ESP32-C3 / C6 class)
    Architecture("riscv32", (), "", "riscv32", "riscv32", "riscv32-imac", pointer_bytes=4, bare_metal=True),
)

FEATURE = {f.name: f for f in FEATURES}
FAMILY = {f.name: f for f in FAMILIES}
ARCHITECTURE = {a.name: a for a in ARCHITECTURES}


def architecture_of_machine(machine: str) -> str:
    """The descriptors' name of a platform.machine() value (itself when the table lacks it)."""
    return next((a.name for a in ARCHITECTURES if machine in a.machines), machine)


def feature_names() -> list[str]:
    """Every feature a descriptor may list, in the table's order (`scalar` first)."""
    return [SCALAR, *FEATURE]


def family_of(features: frozenset[str], architecture: str, vector_bits: int | None = None) -> Family:
    """The widest kernel family of `architecture` whose needs `features` meet, no wider than
    `vector_bits` when the descriptor caps it (512-bit code is slower on some AVX-512 CPUs)."""
    best = None
    for fam in FAMILIES:
        if fam.architecture not in (architecture, ANY) or not fam.requires <= features:
            continue
        if vector_bits is not None and fam.vector_bits > vector_bits and best is not None:
            continue
        best = fam
    return best


def hidden_by_cap(cap: str) -> frozenset[str]:
    """The features OI_HOST_ISA=`cap` hides: those the families after `cap` in the table bring
    (of its architecture; every other family's when `cap` is portable). The HAL's
    oi_cpu_features applies the same cap."""
    arch = FAMILY[cap].architecture
    after = [f for f in FAMILIES[[f.name for f in FAMILIES].index(cap) + 1:] if arch in (ANY, f.architecture)]
    wider = {f.name for f in after}
    return frozenset(f.name for f in FEATURES if f.family in wider)
