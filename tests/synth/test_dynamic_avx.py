"""Dynamic sizes on the AVX targets: the requests whose extents depend on a dynamic size take the
vector kernels of openinfer/targets/x86/renderer.py, not the portable fallback (a regression there is only
slower, so the numbers alone would not show it).

The cases of tests/dynamic_cases.py are generated for AVX2 and AVX-512 and each output below is
checked to be written by the vector kernel of its path, found by its template's functions in
<name>_kernels.c; the file compiles with -Wall -Wextra -Werror and the target's flags (AVX-512 is
only generated and compiled: the host may lack it). tests/synth/test_dynamic_sizes.py runs the same
cases against the reference at several sizes; here the vector cases also run under ASan + UBSan.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib

import dynamic_cases as dc
import pytest
from sanitized import SANITIZE, run_sanitized

from openinfer.synth.program import Call
from openinfer.synthesizer import Synthesizer
from openinfer.targets.devices import best_host_target
from openinfer.testing import skip_unless_runs_here

#: (by ISA, not descriptor name: tests parametrised on a descriptor the host cannot run are skipped,
#: and generating and compiling need no such CPU)
ISAS = ("avx2", "avx512")

#: what the kernel `name` of each path has and no other template does: its helper functions, the
#: pool's vector loop (every AVX kernel uses the vector type `oiv`, which no portable kernel does)
PATHS = {
    "gemm": ("{name}_items(",),
    "vecmat": ("{name}_units",),
    "matvec": ("{name}_rows(", "{name}_units("),
    "dequant": ("{name}_sums",),
    "rows": ("{name}_rows(",),          # softmax, the norms, the reductions
    "elementwise": ("{name}_units(",),
    "pool": ("ov + OIV_LANES <=",),
    "lrn": ("oiv_log(d)",),
}

#: case -> {output: the path of the kernel that writes it (of each, in order, where several do)}
VECTOR = {
    "gemv-rows": {"y": "vecmat", "yt": "matvec", "ya": "vecmat", "y3": "vecmat", "yh": "vecmat", "yk": "vecmat",
                  "mv": "matvec"},
    "dequant-rows": {"y8": "dequant", "y4": "dequant", "yk": "dequant"},
    "matmul-few-rows": {"y": "gemm", "mv": "matvec"},
    "rows": {"ln": "rows", "rn": "rows", "sm": "rows"},
    "reductions": {"c": "rows", "r": "rows", "mx": "rows", "mn": "rows", "all": "rows"},
    "row-length": {"sm": "rows", "ln": "rows", "lp": "rows", "rn": "rows", "x3": "rows", "s0": "rows", "m1": "rows",
                   "mx1": "rows", "mn2": "rows", "s12": "rows", "mr": "rows", "rp": ("rows", "rows")},
    "attention-products": {"s": "gemm", "p": "rows", "o": "gemm", "s3": "gemm", "o2": "gemm"},
    "products-nk": {"s": ("gemm", "elementwise"), "o": "gemm", "s3": "gemm", "o2": "gemm", "ya": "gemm", "y2": "vecmat",
                    "s1": "matvec", "o1": "vecmat", "av": "matvec", "at": "vecmat"},
    "lrn": {"yx": "lrn", "yc": "lrn", "yp": "lrn"},
    "pool-plane": {"m1": "pool", "a1": "pool", "a2": "pool", "mh": "pool", "ah": "pool", "ab": "pool", "mb": "pool"},
    "elementwise-rows": {"y": "elementwise", "z": "elementwise", "s": "elementwise", "e": "elementwise"},
}


def definitions(source: str, names: list[str]) -> dict[str, str]:
    """Each kernel's text in <name>_kernels.c: its helpers and its entry point (kernels follow one
    another in the order of `names`)."""
    out, start = {}, 0
    for name in names:
        head = source.index(f"\noi_status {name}(", start)
        end = source.index("\n}\n", head) + 3
        out[name] = source[start:end]
        start = end
    return out


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("case_id", VECTOR)
def test_dynamic_requests_take_the_vector_kernels(tmp_path, isa, case_id):
    case = next(c for c in dc.CASES if c.id == case_id)
    model = case.write_model(tmp_path / "m.oinf")
    synth = Synthesizer.from_arch(f"x86_64-{isa}")
    plan = synth.synthesize(model, case.graph, name="g", dynamic={"T": case.bound})
    prog = plan.program
    names = [f"oi_g_k{i}_{k.op}" for i, k in enumerate(prog.kernels)]
    source = plan.files["g_kernels.c"].decode()
    texts = definitions(source, names)
    writers: dict[str, list[int]] = {}
    for stmt in prog.blocks[prog.entry]:
        if isinstance(stmt, Call):
            writers.setdefault(stmt.result.var, []).append(stmt.kernel)
    for var, paths in VECTOR[case_id].items():
        paths = (paths,) if isinstance(paths, str) else paths
        assert len(writers[var]) == len(paths), var
        for i, path in zip(writers[var], paths, strict=True):
            text = texts[names[i]]
            assert prog.kernels[i].sizes == ("T",), var
            assert "oiv" in text, f"{var}: {names[i]} is the portable kernel"
            assert all(m.format(name=names[i]) in text for m in PATHS[path]), f"{var}: {names[i]} is not the {path}"
            if path == "vecmat":
                assert f"{names[i]}_rows(" not in text, f"{var}: {names[i]} is a matvec"
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler")
    out = tmp_path / "out"
    plan.emit(out)
    proc = subprocess.run([cc, "-std=c11", "-O2", "-c", *synth.device.cflags, "-Wall", "-Wextra", "-Werror",
                           "-I", str(out), "-I", str(out / "hal" / "include"), str(out / "g_kernels.c"),
                           "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def sanitized_case(case_id: str, arch: str, directory: str) -> int:
    """(in the ASan child) the case at each of its lengths against the reference, built with the
    sanitizers"""
    from pathlib import Path

    case = next(c for c in dc.CASES if c.id == case_id)
    dc.run_case(case, arch, Path(directory), build_options=SANITIZE)
    return 0


#: the vector cases the sanitizers build in the default suite: every other one, by a fixed hash
#: (each child interpreter builds a program per case; OI_SLOW=1: all of them)
SANITIZED = list(VECTOR) if os.environ.get("OI_SLOW") == "1" else \
    [c for c in VECTOR if zlib.crc32(c.encode()) % 2 == 0]


@pytest.mark.parametrize("case_id", SANITIZED)
def test_vector_cases_clean_under_asan_and_ubsan(tmp_path, case_id):
    """The run-time row dispatch, the blocks and the scratch sums sized at the bound, at each length."""
    arch = best_host_target()
    skip_unless_runs_here(arch)
    run_sanitized(__file__, "sanitized_case", case_id, arch, str(tmp_path))
