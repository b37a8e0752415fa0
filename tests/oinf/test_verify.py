"""The verifier's report: golden text for the original files, and the printed numbers themselves.

Golden files live in tests/oinf/golden/; `OI_UPDATE_GOLDEN=1 python3 -m pytest tests/oinf` rewrites
them (review the diff), otherwise they are compared byte for byte.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import COMPAT_DIR
from oinf_testlib import assemble, rich_model

from openinfer.oinf import ModelLoader, QuantParams, TensorSpec, UninitializedTensor, verify_file, write_oinf
from openinfer.oinf.verify import histogram

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("OI_UPDATE_GOLDEN") == "1"
FILES = sorted(p.relative_to(COMPAT_DIR).as_posix() for p in COMPAT_DIR.glob("v*/*.oinf"))


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with OI_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"verify output differs from {path} (OI_UPDATE_GOLDEN=1 to accept)"


@pytest.mark.parametrize("rel", FILES)
def test_golden_report_of_original_files(rel):
    check_golden(rel.replace(".oinf", ".txt"), verify_file(COMPAT_DIR / rel))


def test_golden_report_of_every_feature(tmp_path):
    write_oinf(tmp_path / "rich.oinf", *rich_model())
    check_golden("rich.txt", verify_file(tmp_path / "rich.oinf"))


STATS = re.compile(r"^- \[nbytes: (\d+), min: (\S+), max: (\S+), mean: (\S+), median: (\S+), std: (\S+)\]$")


@pytest.mark.parametrize("rel", FILES)
def test_printed_stats_are_numpys(rel):
    report = verify_file(COMPAT_DIR / rel)
    blocks = report.split("\n\n")
    with ModelLoader.open(COMPAT_DIR / rel) as m:
        for name in m.tensor_names:
            block = next(b for b in blocks if b.startswith(f"{name}: "))
            t = m.tensor(name)
            if t.size == 1:
                assert block == f"{name}: {m.info(name).dtype.name} = {t.item()}"
                continue
            match = next(STATS.match(line) for line in block.splitlines() if line.startswith("- ["))
            x = t.astype(np.float64)
            want = [t.nbytes] + [f"{v:.6g}" for v in (x.min(), x.max(), x.mean(), np.median(x), x.std())]
            assert [int(match.group(1)), *match.groups()[1:]] == want
            # the preview starts with the first five values (of the first row)
            first = block.splitlines()[1] if t.ndim > 1 else block.splitlines()[0].split(" = ")[1]
            assert first.startswith("{ " + ", ".join(f"{v:.6g}" for v in t.reshape(t.shape[0], -1)[0][:5]))
            hist = next(line for line in block.splitlines() if line.startswith("- hist: "))
            counts = [int(c) for c in re.findall(r"\], (\d+)\)", hist)]
            assert sum(counts) == t.size


def test_histogram_rules():
    # integers spanning <= 20 values: one bin per value, empty bins left out
    assert histogram(np.array([3, 3, 5, -1], np.int8)) == "{([-1, -1], 1), ([3, 3], 2), ([5, 5], 1)}"
    # wider integer range: 10 bins
    h = histogram(np.arange(0, 100, dtype=np.int32))
    assert h.count("([") == 10 and h.startswith("{([0, 9.9], 10)")
    # floats always bin in 10, even with a small range; constant -> a single bin
    assert histogram(np.array([1.0, 2.0], np.float32)) == "{([1, 1.1], 1), ([1.9, 2], 1)}"
    assert histogram(np.full(4, 2.5)) == "{([2.5, 2.5], 4)}"
    # bool of any rank (the original crashed on ndim >= 2)
    assert histogram(np.ones((2, 3), bool)) == "{([0, 0], 0), ([1, 1], 6)}"
    # non-finite values get their own entries; finite ones are binned
    assert histogram(np.array([np.nan, np.inf, -np.inf, 1.0])) == "{([1, 1], 1), (nan, 1), (-inf, 1), (inf, 1)}"
    # a range that overflows float64 does not crash
    h = histogram(np.array([-1.7e308, 1.7e308, 0.0]))
    assert sum(int(c) for c in re.findall(r"\], (\d+)\)", h)) == 3
    # huge integers, exact range arithmetic
    assert histogram(np.array([2**63 - 1, 2**63 - 3], np.int64)) == \
        f"{{([{2**63 - 3}, {2**63 - 3}], 1), ([{2**63 - 1}, {2**63 - 1}], 1)}}"
    assert histogram(np.zeros(0)) == "{(empty)}"


def test_report_layout(tmp_path):
    tensors = {
        "b2": np.array([[True, False, True], [False, False, False]]),
        "e": TensorSpec(np.array([1.0, np.nan, -2.0], np.float32), "f8"),
        "one": np.array([[4.5]], np.float32),
        "q": TensorSpec(np.arange(12).reshape(3, 4) % 8, "i4", QuantParams.per_channel(0, [1, 2, 3], [0, 1, 2])),
        "s": TensorSpec(np.int8(3), "i8", QuantParams.per_tensor(0.5)),
        "u": UninitializedTensor("f16", (2, 2**56)),      # never allocated: 2^57 elements verify
        "z": np.zeros((2, 0)),
        "long": np.arange(20, dtype=np.int16).reshape(10, 2),
    }
    write_oinf(tmp_path / "r.oinf", tensors, {"N": 3}, {"act": "gelu", "eps": 1e-5, "on": True, "ids": [1, 2]})
    report = verify_file(tmp_path / "r.oinf")
    assert report.startswith('N := 3\n\nact: str = "gelu"\neps: f32 = 1e-05\nids: i8[2] = { 1, 2 }\n'
                             'on: bool = true\n\n')
    assert "b2: bool[2, 3] = { \n{ true, false, true } ,\n{ false, false, false } ,\n}\n" in report
    assert "- hist: {([0, 0], 4), ([1, 1], 2)}" in report
    assert "e: f8[3] = { 1, nan, -2 }" in report                 # NaN stays NaN (the original printed inf)
    assert "one: f32 = 4.5\n\n" in report                        # one element prints as a scalar
    assert "- quant: scheme=asymmetric, scale=per_channel(axis=0, count=3), zero_point=per_channel(axis=0, count=3)" \
        in report
    assert "s: i8 = 3\n- quant: scheme=symmetric, scale=per_tensor(0.5), zero_point=none\n" in report
    assert f"u: f16[2, {2**56}] -- uninitialized\n" in report
    assert "z: f64[2, 0] -- uninitialized\n" in report
    # N-d previews show min(rows, ndim, 5) rows then "..."
    assert "long: i16[10, 2] = { \n{ 0, 1 } ,\n{ 2, 3 } ,\n...\n}\n" in report
    assert report.endswith("\n\n")


def test_long_preview_is_first5_last5(tmp_path):
    write_oinf(tmp_path / "p.oinf", {"v": np.arange(12, dtype=np.int32)})
    assert "v: i32[12] = { 0, 1, 2, 3, 4, ..., 7, 8, 9, 10, 11 }" in verify_file(tmp_path / "p.oinf")


def test_bitset_and_ndarray_metadata_lines(tmp_path):
    data = assemble(metadata=[("bits", 13, bytes([20, 0, 0, 0, 3, 0, 0, 0, 0xAB, 0xCD, 0x0F]) + b"\x00" * 5)])
    (tmp_path / "b.oinf").write_bytes(data)
    assert verify_file(tmp_path / "b.oinf") == "bits: bitset[20] = ab cd 0f\n\n"
