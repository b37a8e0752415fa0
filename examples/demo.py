"""The main job on a bundled example, as a user runs it from the shell (`bash tools/dev.sh demo`).

1. build the example models (examples/models.py) into build/demo/models/
2. verify and inspect the mlp_regression package
3. run the graph with the NumPy reference
4. generate C for this machine's best bundled CPU descriptor, build it with meson/ninja
5. simulate: run the compiled library beside the reference and compare every output

Every step is an `openinfer` command, printed before it runs.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from openinfer.targets.devices import best_host_target

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "demo"


def openinfer() -> str:
    exe = Path(sys.executable).parent / "openinfer"
    return str(exe) if exe.exists() else "openinfer"


def sh(*argv: str) -> None:
    print(f"\n$ {' '.join(shlex.quote(a) for a in argv)}", flush=True)
    subprocess.run(argv, check=True, cwd=ROOT)


def main() -> int:
    models = OUT / "models"
    model = models / "mlp_regression.oinf"
    graph = "examples/mlp_regression.oig"
    arch = f"devices/{best_host_target()}.json"     # the widest kernels this CPU runs (OI_HOST_ISA caps it)
    try:
        sh(sys.executable, "examples/models.py", "--out", str(models))
        sh(openinfer(), "oinf", "verify", str(model))
        sh(openinfer(), "oinf", "inspect", str(model))
        sh(openinfer(), "run", graph, "--model", str(model), "--steps", "2")
        sh(openinfer(), "gen", graph, "--model", str(model), "--arch", arch, "--out", str(OUT / "mlp_regression"))
        sh(openinfer(), "build", str(OUT / "mlp_regression"))
        sh(openinfer(), "sim", graph, "--model", str(model), "--arch", arch, "--steps", "3")
    except subprocess.CalledProcessError as exc:
        print(f"\ndemo failed: `{' '.join(exc.cmd)}` exited with {exc.returncode}", file=sys.stderr)
        return 1
    print(f"\ndemo done: generated sources and library in {OUT / 'mlp_regression'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
