"""Differential fuzz of the two `.oinf` readers: the same mutated files through `openinfer oinf
verify` (openinfer/oinf/verify.py) and the C loader (`oi_oinf_open_memory`, hal/src/oi_hal_core.c).

    python3 tools/fuzz_oinf.py [--mutants 100000] [--seed 1] [--asan]

Seeds are the original tools' files (tests/data/compat) and files written here with every
feature (all metadata kinds, bool/t2/packed/quantized/uninitialized/empty tensors, v1 and v2).
Each mutant applies one to four mutations: byte flips, truncation, extension, a header file_size
made consistent again, and field-targeted edits (a header, table or quant field set to an extreme
or nearby value, a field copied from another field of the same width — overlapping blobs,
repeated counts —, a name byte replaced, a name copied over another of the same length).

Verdicts must be equal: the file is accepted by both (verify prints its report) or rejected by
both (an OinfError; the C reader's OI_ERR_MODEL_FORMAT). It reports the counts and exits 1 on any
disagreement, any exception other than OinfError, or a crash of the C driver (a signal, or an
ASan/UBSan report with --asan, which builds the driver with -fsanitize=address,undefined).
tests/oinf/test_reader_agreement.py runs a bounded campaign of this in the default suite.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from openinfer import OinfError  # noqa: E402
from openinfer.oinf import (  # noqa: E402
    Bitset,
    ModelLoader,
    QuantParams,
    ScalarValue,
    TensorSpec,
    UninitializedTensor,
    encode_oinf,
    verify_file,
)
from openinfer.oinf.format import string_size  # noqa: E402
from openinfer.resources import hal_dir, hal_sources  # noqa: E402

COMPAT_DIR = REPO / "tests" / "data" / "compat"
DRIVER = Path(__file__).resolve().parent / "fuzz_oinf_driver.c"


def written_seeds() -> list[bytes]:
    """Files using every feature the format has, written by the writer."""
    rng = np.random.default_rng(0)
    tensors = {
        "a": rng.standard_normal((3, 5)).astype(np.float32),
        "b.bool": rng.integers(0, 2, (4, 3)).astype(bool),
        "c.t2": TensorSpec(rng.integers(-1, 2, (2, 5)), "t2",
                           QuantParams.per_channel(1, [1, 2, 3, 4, 5], [0, 1, -1, 2, -2])),
        "d.i4": TensorSpec(rng.integers(-8, 8, (3, 3)), "i4", QuantParams.per_channel(0, [0.5, 0.25, 2.0])),
        "e.u4": TensorSpec(rng.integers(0, 16, (5,)), "u4", QuantParams.per_tensor(0.1, 8)),
        "f.bf16": TensorSpec(rng.standard_normal(6).astype(np.float32), "bf16"),
        "g.f8": TensorSpec(np.array([0.0, 1.5, np.inf, np.nan], np.float32), "f8"),
        "h.empty": np.zeros((0, 4), np.float32),
        "i.uninit": UninitializedTensor("f32", (2, 8)),
        "j.uninit_q": UninitializedTensor("i8", (4,), quant=QuantParams.per_tensor(0.5)),
        "k.scalar": np.array(-7, np.int32),
        "l.u1": TensorSpec(rng.integers(0, 2, 13), "u1"),
    }
    sizevars = {"B": 4, "D": 16, "big": 2**64 - 1}
    metadata = {
        "m.bool": True, "m.str": "hello-world_1.0", "m.u64": 2**63, "m.f32": 0.1, "m.i4": ScalarValue(-8, "i4"),
        "m.t2": ScalarValue(-1, "t2"), "m.bitset": Bitset.from_bools([1, 0, 1, 1, 0, 0, 0, 1, 1, 1]),
        "m.nd_u4": ScalarValue([[1, 2, 3], [15, 0, 7]], "u4"), "m.nd_bool": np.array([[True, False], [False, True]]),
        "m.nd_t2": ScalarValue([1, -1, 0], "t2"), "m.nd_scalar": np.array(2.5, np.float64),
    }
    plain = {k: v for k, v in tensors.items() if getattr(v, "quant", None) is None}
    return [encode_oinf(tensors, sizevars, metadata),
            encode_oinf(plain, sizevars, metadata, version=1),
            encode_oinf({"x": np.arange(4, dtype=np.float32)}),
            encode_oinf({}, {"only": 3})]


def seeds() -> list[bytes]:
    return [p.read_bytes() for p in sorted(COMPAT_DIR.glob("v*/*.oinf"))] + written_seeds()


@dataclass
class Layout:
    """Where a seed's fields are: (offset, width) of every u32/u64 field, and (offset, length) of
    every name's bytes (after its u32 length)."""

    fields: list[tuple[int, int]] = field(default_factory=list)
    names: list[tuple[int, int]] = field(default_factory=list)


def layout(data: bytes) -> Layout:
    out = Layout([(5, 4), (9, 4), (13, 4), (17, 4), (21, 4), (25, 4)] + [(29 + 8 * i, 8) for i in range(5)])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "seed.oinf"
        path.write_bytes(data)
        with ModelLoader.open(path) as m:
            h = m.header
            pos = h.offset_sizevars
            for name in m.sizevars:
                out.fields += [(pos, 4), (pos + string_size(name), 8)]
                out.names.append((pos + 4, len(name)))
                pos += string_size(name) + 8
            for key, info in m.metadata_infos.items():
                at = info.entry_offset + string_size(key)
                out.fields += [(info.entry_offset, 4), (at, 4), (at + 4, 4), (at + 8, 8), (at + 16, 8),
                               (info.value_offset, 4), (info.value_offset + 4, 4), (info.value_offset + 8, 8)]
                out.names.append((info.entry_offset + 4, len(key)))
            for info in m.tensor_infos.values():
                at = info.entry_offset + string_size(info.name)
                out.fields += [(info.entry_offset, 4), (at, 4), (at + 4, 4), (at + 8, 4)]
                out.fields += [(at + 12 + 8 * i, 8) for i in range(info.ndim + (4 if m.version == 2 else 2))]
                out.names.append((info.entry_offset + 4, len(info.name)))
                if info.quant is not None:
                    out.fields += [(info.quant_offset + 4 * i, 4) for i in range(4)]
                    out.fields += [(info.quant_offset + 16 + 8 * i, 8) for i in range(4)]
    return out


U32_EDGES = [0, 1, 2, 3, 7, 8, 9, 12, 13, 14, 15, 16, 25, 26, 2**31 - 1, 2**31, 2**32 - 1]
U64_EDGES = [0, 1, 8, 48, 72, 2**32 - 1, 2**32, 2**56, 2**58, 2**62, 2**63 - 1, 2**63, 2**64 - 8, 2**64 - 1]
NAME_BYTES = b"Aaz09._-#/ \x00\xff"


def _field_value(rng: np.random.Generator, old: int, width: int) -> int:
    top = 2**(8 * width) - 1
    r = rng.integers(4)
    if r == 0:
        edges = U32_EDGES if width == 4 else U64_EDGES
        return edges[int(rng.integers(len(edges)))]
    if r == 1:
        return int(rng.integers(0, top, endpoint=True, dtype=np.uint64))
    return (old + int(rng.choice([-16, -8, -4, -1, 1, 4, 8, 16]))) & top    # a nearby value: off by a little


def mutate(rng: np.random.Generator, data: bytes, where: Layout) -> bytes:
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 5))):
        kind = int(rng.integers(9))
        if kind == 0 and b:                                            # byte flip
            b[int(rng.integers(len(b)))] ^= int(rng.integers(1, 256))
        elif kind in (1, 2):                                           # a field: extreme or nearby value
            at, width = where.fields[int(rng.integers(len(where.fields)))]
            if at + width <= len(b):
                fmt = "<I" if width == 4 else "<Q"
                old = struct.unpack_from(fmt, b, at)[0]
                struct.pack_into(fmt, b, at, _field_value(rng, old, width))
        elif kind == 3:                                                # a field copied onto another one
            (src, w1), (dst, w2) = (where.fields[int(i)] for i in rng.integers(len(where.fields), size=2))
            if w1 == w2 and max(src, dst) + w1 <= len(b):
                b[dst:dst + w1] = b[src:src + w1]
        elif kind == 4 and where.names:                                # a name byte replaced
            at, n = where.names[int(rng.integers(len(where.names)))]
            i = at + int(rng.integers(n))
            if i < len(b):
                b[i] = NAME_BYTES[int(rng.integers(len(NAME_BYTES)))]
        elif kind == 5 and where.names:                                # a name copied over one of its length
            (src, n1), (dst, n2) = (where.names[int(i)] for i in rng.integers(len(where.names), size=2))
            if n1 == n2 and max(src, dst) + n1 <= len(b):
                b[dst:dst + n1] = b[src:src + n1]
        elif kind == 6:                                                # truncation
            del b[int(rng.integers(len(b) + 1)):]
        elif kind == 7:                                                # extension
            b += rng.integers(0, 256, int(rng.integers(1, 65)), dtype=np.uint8).tobytes()
        elif kind == 8 and len(b) >= 69:                               # file_size made consistent again
            struct.pack_into("<Q", b, 61, len(b))
    return bytes(b)


def build_driver(out_dir: Path, asan: bool) -> Path:
    exe = out_dir / ("oinf_driver_asan" if asan else "oinf_driver")
    flags = ["-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"] if asan else ["-O2"]
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, "-I", str(hal_dir() / "include"),
                    str(DRIVER), *hal_sources(), "-pthread", "-o", str(exe)], check=True)
    return exe


def c_verdicts(exe: Path, images: list[bytes]) -> str:
    """'A'/'R'/'X' per image; raises RuntimeError when the driver dies (a crash or a sanitizer report)."""
    stream = b"".join(struct.pack("<Q", len(i)) + i for i in images)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="halt_on_error=1")
    proc = subprocess.run([str(exe)], input=stream, capture_output=True, env=env, timeout=3600)
    out = proc.stdout.decode("ascii", "replace")
    if proc.returncode != 0 or len(out) != len(images):
        raise RuntimeError(f"C driver failed (exit {proc.returncode}) after {len(out)} of {len(images)} images:\n"
                           f"{proc.stderr.decode(errors='replace')[-4000:]}")
    return out


def python_verdict(path: Path, image: bytes) -> str:
    """'A' when `oinf verify` accepts the file, 'R' on OinfError, else 'E: <the exception>'."""
    path.write_bytes(image)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")    # a NumPy warning printed before the verdict is a finding too
            verify_file(path)
        return "A"
    except OinfError:
        return "R"
    except Exception as exc:   # noqa: BLE001 - any other exception is a finding, reported with the mutant
        return f"E: {type(exc).__name__}: {exc}"


@dataclass
class Counts:
    mutants: int = 0
    accepted_by_both: int = 0
    rejected_by_both: int = 0
    disagreements: list[tuple[bytes, str, str]] = field(default_factory=list)   # (image, python, c)
    exceptions: list[tuple[bytes, str]] = field(default_factory=list)           # (image, python's exception)

    def line(self) -> str:
        return (f"{self.mutants} mutants: {self.accepted_by_both} accepted by both, {self.rejected_by_both} "
                f"rejected by both, {len(self.disagreements)} disagreements, {len(self.exceptions)} exceptions "
                f"outside OinfError, 0 crashes")


def campaign(mutants: int, seed: int, work_dir: Path, asan: bool = False, batch: int = 5000) -> Counts:
    """Runs `mutants` mutants (seeded: the same arguments give the same mutants)."""
    rng = np.random.default_rng(seed)
    files = seeds()
    layouts = [layout(s) for s in files]
    exe = build_driver(work_dir, asan)
    path = work_dir / "mutant.oinf"
    counts = Counts()
    # the unmutated seeds first: both readers must accept every one
    pending = list(files)
    while counts.mutants < mutants + len(files):
        if not pending:
            for _ in range(min(batch, mutants + len(files) - counts.mutants)):
                i = int(rng.integers(len(files)))
                pending.append(mutate(rng, files[i], layouts[i]))
        c_side = c_verdicts(exe, pending)
        for image, c in zip(pending, c_side, strict=True):
            py = python_verdict(path, image)
            counts.mutants += 1
            if py.startswith("E"):
                counts.exceptions.append((image, py))
            elif py != c:
                counts.disagreements.append((image, py, c))
            elif py == "A":
                counts.accepted_by_both += 1
            else:
                counts.rejected_by_both += 1
        pending = []
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--asan", action="store_true", help="build the C driver with ASan/UBSan")
    ap.add_argument("--keep", type=Path, help="write disagreeing mutants into this directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        counts = campaign(args.mutants, args.seed, Path(d), args.asan)
    print(counts.line())
    for image, exc in counts.exceptions[:10]:
        print(f"exception: {exc} ({len(image)} bytes)")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for i, (image, py, c) in enumerate(counts.disagreements):
            (args.keep / f"disagree{i}_py{py}_c{c}.oinf").write_bytes(image)
    return 1 if counts.disagreements or counts.exceptions else 0


if __name__ == "__main__":
    sys.exit(main())
