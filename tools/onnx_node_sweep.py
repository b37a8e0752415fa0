"""Every ONNX backend node case that passes on the reference, through the generated C of each
named target, in parallel: the full version of the C subset tests/onnx/test_onnx_node_cases.py
runs by default (`OI_SLOW=1` runs this sweep serially there).

    python tools/onnx_node_sweep.py --arch x86_64-generic x86_64-avx2 --jobs 16 [--json out.json]

A target the host cannot run is refused before anything is built. Prints, per target, how many
cases passed and each failure with its reason; exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

from benchlib import cpu_model  # noqa: E402

from openinfer.onnx import node_tests as nt  # noqa: E402
from openinfer.targets.devices import load as load_device  # noqa: E402

_CASES: dict = {}


def _load_cases() -> None:
    _CASES.update((c.name, c) for c in nt.supported_cases(nt.collect_cases()))


def _run(job: tuple[str, str]) -> tuple[str, str, str, str]:
    name, arch = job
    result = nt.run_case(_CASES[name], nt.c_engine(arch))
    return name, arch, result.outcome, result.detail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=["x86_64-generic"], help="C device descriptors")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel processes")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    for arch in args.arch:
        missing = load_device(arch).missing_on_host()
        if missing:
            parser.error(f"{arch} needs {', '.join(missing)}, which this CPU lacks")
    os.environ.setdefault("OI_CACHE_DIR", tempfile.mkdtemp(prefix="oi-node-sweep-"))

    _load_cases()
    passing = [r.name for r in (nt.run_case(c) for c in _CASES.values()) if r.outcome == nt.PASSED]
    jobs = [(name, arch) for arch in args.arch for name in passing]
    print(f"{len(passing)} cases pass on the reference; {len(jobs)} C runs on {args.jobs} processes", flush=True)
    start = time.monotonic()
    results: list[tuple[str, str, str, str]] = []
    with ProcessPoolExecutor(args.jobs, initializer=_load_cases) as pool:
        for k, result in enumerate(pool.map(_run, jobs, chunksize=4), 1):
            results.append(result)
            if k % 100 == 0 or k == len(jobs):
                print(f"  {k}/{len(jobs)} ({time.monotonic() - start:.0f} s)", flush=True)
    failed = 0
    for arch in args.arch:
        mine = [r for r in results if r[1] == arch]
        bad = [r for r in mine if r[2] != nt.PASSED]
        failed += len(bad)
        print(f"{arch}: {len(mine) - len(bad)} of {len(mine)} pass")
        for name, _, outcome, detail in bad:
            print(f"  {outcome}: {name}: {detail}")
    if args.json:
        args.json.write_text(json.dumps({
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
            "seconds": round(time.monotonic() - start, 1),
            "results": [dict(zip(("case", "arch", "outcome", "detail"), r, strict=True)) for r in results]},
            indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
