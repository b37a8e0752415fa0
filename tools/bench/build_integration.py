"""Build-integration timings of examples/meson-consumer (OpenInfer as a meson subproject):
cold `meson setup` + `ninja`, a no-op `ninja`, and `ninja` after touching the graph.

    python tools/bench/build_integration.py [--out results.json] [--repeat 3]

Runs in a temporary copy whose subprojects/openinfer links to this checkout; needs meson, ninja
and a C compiler (the virtual environment's meson/ninja are used when on PATH).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def timed(argv, cwd, env) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    spec = importlib.util.spec_from_file_location("models_bench", REPO / "examples" / "models.py")
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    rows: dict[str, list[float]] = {"cold configure + build": [], "no-op rebuild": [],
                                    "rebuild after touching the graph": []}
    for _ in range(args.repeat):
        ws = Path(tempfile.mkdtemp(prefix="oi-consumer-"))
        shutil.copy(REPO / "examples" / "mlp_regression.oig", ws)
        proj = ws / "meson-consumer"
        shutil.copytree(REPO / "examples" / "meson-consumer", proj, symlinks=True)
        (proj / "subprojects" / "openinfer").unlink()
        (proj / "subprojects" / "openinfer").symlink_to(REPO, target_is_directory=True)
        model = ws / "mlp_regression.oinf"
        models.write_model("mlp_regression", model)
        cold = timed(["meson", "setup", "build", f"-Dmodel={model}"], proj, env)
        cold += timed(["ninja", "-C", "build"], proj, env)
        rows["cold configure + build"].append(cold)
        rows["no-op rebuild"].append(timed(["ninja", "-C", "build"], proj, env))
        time.sleep(0.05)
        os.utime(ws / "mlp_regression.oig")
        rows["rebuild after touching the graph"].append(timed(["ninja", "-C", "build"], proj, env))
        shutil.rmtree(ws)
    result = {name: min(v) for name, v in rows.items()}
    for name, value in result.items():
        print(f"{name:<36} {value:8.2f} s (best of {args.repeat})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
