"""Builds the `.oinf` model of every bundled example workload, deterministically.

Each builder returns (tensors, sizevars, metadata). The ten original workloads use the same seeds,
draw order and distributions as the original generators, so the files written here are byte-for-
byte the originals' (tests/test_examples_models.py checks this against tests/data/compat/).

    python examples/models.py [--out DIR] [--format-version {1,2}] [NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

Built = tuple[dict, dict, dict]


def _normal(rng: np.random.Generator, scale: float, shape) -> np.ndarray:
    return rng.normal(0.0, scale, shape).astype(np.float32)


def mlp_regression() -> Built:
    rng = np.random.default_rng(1)
    tensors = {
        "w1": _normal(rng, 0.2, (16, 32)), "b1": _normal(rng, 0.05, 32),
        "w2": _normal(rng, 0.2, (32, 8)), "b2": _normal(rng, 0.05, 8),
    }
    return tensors, {"B": 4, "D": 16, "H": 32, "O": 8}, {}


def residual_mlp_stack() -> Built:
    rng = np.random.default_rng(2)
    tensors = {"bias0": np.zeros(32, np.float32)}
    for layer in range(3):
        tensors[f"res.mlp.w.{layer}"] = _normal(rng, 0.15, (32, 32))
        tensors[f"res.mlp.b.{layer}"] = _normal(rng, 0.05, 32)
    return tensors, {"B": 4, "D": 32, "num_layers": 3}, {}


def linear_attention() -> Built:
    rng = np.random.default_rng(3)
    tensors = {}
    for head in range(2):
        for w in ("wq", "wk", "wv"):
            tensors[f"attn.{w}.{head}"] = _normal(rng, 0.2, (32, 32))
    tensors["w_out"] = _normal(rng, 0.2, (32, 32))
    return tensors, {"B": 4, "D": 32, "num_heads": 2}, {}


def moe_routing() -> Built:
    rng = np.random.default_rng(4)
    tensors = {"w_gate": _normal(rng, 0.2, (16, 2))}
    for e in range(2):
        tensors[f"w{e}"] = _normal(rng, 0.2, (16, 8))
        tensors[f"b{e}"] = _normal(rng, 0.05, 8)
    return tensors, {"B": 4, "D": 16, "O": 8}, {}


def streaming_pipeline() -> Built:
    rng = np.random.default_rng(5)
    return {"w": _normal(rng, 0.2, (16, 16)), "bias": _normal(rng, 0.05, 16)}, {"B": 4, "D": 16}, {}


def kv_cache_decode() -> Built:
    return {"zero": np.zeros(16, np.float32)}, {"D": 16}, {}


def online_weight_update() -> Built:
    return {"zero": np.zeros((16, 8), np.float32)}, {"B": 4, "D": 16, "O": 8}, {}


def quantized_linear() -> Built:
    from openinfer import TensorSpec

    rng = np.random.default_rng(6)
    x = rng.integers(-8, 8, (4, 16), dtype=np.int8)
    w = rng.integers(-8, 8, (16, 8), dtype=np.int8)
    return {"x": TensorSpec(x, dtype="i4"), "w": TensorSpec(w, dtype="i4")}, {"B": 4, "D": 16, "O": 8}, {}


def stability_guard() -> Built:
    rng = np.random.default_rng(7)
    return {"bias": _normal(rng, 0.05, 16)}, {"B": 4, "D": 16}, {}


def cache_window_slice() -> Built:
    return {"limit": np.array(6, np.int32), "zero": np.array(0, np.int32)}, {"D": 8}, {}


def accumulation_demo() -> Built:
    rng = np.random.default_rng(42)
    x = _normal(rng, 0.2, (4, 8))
    w = _normal(rng, 0.2, (8, 6))
    tensors = {"x": x, "w": w, "matmul_out": (x @ w).astype(np.float32),
               "sum_axis_out": x.sum(axis=1, keepdims=True).astype(np.float32)}
    return tensors, {"B": 4, "D": 8, "H": 6}, {}


MODELS: dict[str, Callable[[], Built]] = {
    f.__name__: f for f in (
        mlp_regression, residual_mlp_stack, linear_attention, moe_routing, streaming_pipeline,
        kv_cache_decode, online_weight_update, quantized_linear, stability_guard, cache_window_slice,
        accumulation_demo,
    )
}


def write_model(name: str, path: Path, version: int = 2) -> Path:
    from openinfer import write_oinf

    tensors, sizevars, metadata = MODELS[name]()
    write_oinf(path, tensors=tensors, sizevars=sizevars, metadata=metadata, version=version)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models to build (default: all of {', '.join(MODELS)})")
    ap.add_argument("--out", type=Path, default=Path("build/models"), help="output directory")
    ap.add_argument("--format-version", type=int, choices=(1, 2), default=2)
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or MODELS:
        path = write_model(name, args.out / f"{name}.oinf", args.format_version)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
