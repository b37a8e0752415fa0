"""Reproduce one shape-sweep case alone, or list what the sweep covers.

    .venv/bin/python tests/sweep/repro.py conv2d-3 --arch x86_64-avx2 --cc gcc -O3
    .venv/bin/python tests/sweep/repro.py conv2d-3 --show          # the case's program, no build
    .venv/bin/python tests/sweep/repro.py --list                   # every case id and what it is
    .venv/bin/python tests/sweep/repro.py --count                  # ops x paths x shapes x targets x compilers

A reproduction builds the case as a program of its own (kept in --out, default
/tmp/openinfer-sweep/<case>), runs it at 1 and 3 pool threads and prints each output's
comparison with the reference; the exit status is 1 when any differs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1]))      # the checkout this script is in, not an installed openinfer

from compilers import TOOLCHAINS, Toolchain  # noqa: E402

from sweep.catalog import ARM_TARGETS, CPU_TARGETS, arm_plan, by_id, catalogue, key_of, plan, vulkan_plan  # noqa: E402
from sweep.runner import References, program, run  # noqa: E402


def count() -> str:
    """The sweep's size, as docs/synthesis.md states it."""
    from compilers import PRIMARY

    cases = catalogue()
    keys = Counter(key_of(c) for c in cases)
    paths = {c.path for c in cases if c.path != "kernel"}
    ops = {op for c in cases for op in c.ops}
    widths = {w for c in cases for w, _ in c.covers}
    runs = {widest: sum(len(plan(t, tc, widest, False)) for t in CPU_TARGETS[:CPU_TARGETS.index(widest) + 1]
                        for tc in TOOLCHAINS) for widest in CPU_TARGETS}
    everything = len(cases) * len(CPU_TARGETS) * len(TOOLCHAINS)
    return "\n".join([
        f"{len(cases)} cases: {len(ops)} ops and {len(paths)} fused paths ({len(keys)} groups), "
        f"straddling {len(widths)} widths",
        f"{len(CPU_TARGETS)} CPU targets x {len(TOOLCHAINS)} toolchains ({', '.join(t.name for t in TOOLCHAINS)}) "
        f"x 2 thread counts, and Vulkan (lavapipe, host code built with {PRIMARY.name})",
        f"default suite: {runs['x86_64-avx512']} case runs on an AVX-512 host, {runs['x86_64-avx2']} on an AVX2 "
        f"host, {runs['x86_64-generic']} on another; Vulkan {len(vulkan_plan(False))}",
        f"OI_SLOW=1: {everything} case runs on an AVX-512 host; Vulkan {len(cases)}",
        f"Arm ({', '.join(ARM_TARGETS)}; each with its cross compiler at -O3, under QEMU): "
        f"{sum(len(arm_plan(t, False)) for t in ARM_TARGETS)} case runs, OI_SLOW=1 {len(cases) * len(ARM_TARGETS)}"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("case", nargs="?", help="a case id (as a failure names it: conv2d-3, conv+pool-2)")
    ap.add_argument("--arch", default="x86_64-generic", help="a CPU descriptor name (default x86_64-generic)")
    ap.add_argument("--cc", help="the C compiler (CC); default gcc, or a cross target's own compiler")
    ap.add_argument("-O", dest="opt", default="3", choices=("0", "1", "2", "3", "s"), help="optimization level")
    ap.add_argument("--out", type=Path, help="where the build goes (default a folder under the temp directory)")
    ap.add_argument("--show", action="store_true", help="print the case's program and stop")
    ap.add_argument("--list", action="store_true", help="list every case")
    ap.add_argument("--count", action="store_true", help="print what the sweep covers")
    args = ap.parse_args(argv)
    if args.count:
        print(count())
        return 0
    if args.list:
        for c in catalogue():
            print(f"{c.id:24} {c.desc}")
        return 0
    if not args.case:
        ap.error("give a case id, --list or --count")
    try:
        case = by_id(args.case)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.show:
        print(program([case])[0])
        return 0
    out = args.out or Path(tempfile.gettempdir()) / "openinfer-sweep" / case.id.replace("+", "_")
    out.mkdir(parents=True, exist_ok=True)
    import os
    os.environ["OI_CACHE_DIR"] = str(out / "cache")
    from openinfer.cross import is_foreign
    from openinfer.targets import devices

    cross = is_foreign(devices.load(args.arch)) and args.cc is None
    toolchain = Toolchain(None if cross else args.cc or "gcc", args.opt)
    with toolchain.active():
        failures, sim = run([case], args.arch, toolchain, References(out), out, "case")
    print(f"{case.id}: {case.desc}\n{args.arch} [{toolchain.name}], built in {sim.project}")
    for f in failures:
        print(f"  FAIL at {f.threads} thread(s): {f.detail}")
    if not failures:
        print("  every output matches the reference at 1 and 3 threads")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
