"""`openinfer oinf ...` through `openinfer.cli.main`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import COMPAT_DIR

from openinfer.cli import main
from openinfer.oinf import ModelLoader, QuantParams, TensorSpec, verify_file, write_oinf


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_oinf_alone_prints_its_help(capsys):
    code, out, _ = run(capsys, "oinf")
    assert code == 2
    for sub in ("verify", "inspect", "pack", "convert"):
        assert sub in out


@pytest.mark.parametrize("sub", ["verify", "inspect", "pack", "convert"])
def test_help_texts(capsys, sub):
    with pytest.raises(SystemExit) as info:
        main(["oinf", sub, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"openinfer oinf {sub}" in out and len(out) > 300


def test_verify_ok_and_bad(capsys, tmp_path):
    path = COMPAT_DIR / "v2" / "mlp_regression.oinf"
    code, out, _ = run(capsys, "oinf", "verify", str(path))
    assert code == 0 and out == verify_file(path)
    code, out, _ = run(capsys, "oinf", "verify", "-q", str(path))
    assert code == 0 and out == ""
    bad = tmp_path / "bad.oinf"
    bad.write_bytes(path.read_bytes()[:-8])
    code, out, err = run(capsys, "oinf", "verify", str(bad))
    assert code == 1 and out == ""
    assert err.startswith("openinfer: ") and "header, entry 'file_size', byte offset 61" in err
    code, _, err = run(capsys, "oinf", "verify", str(tmp_path / "missing.oinf"))
    assert code == 1 and "cannot open" in err


def test_inspect_text_and_json(capsys, tmp_path):
    path = tmp_path / "m.oinf"
    write_oinf(path, {"w": TensorSpec(np.arange(8).reshape(2, 4) % 4, "u2", QuantParams.per_channel(0, [1, 2], [0, 1])),
                      "x": np.ones(3, np.float32)}, {"B": 4}, {"eps": 0.5, "tags": [1.0, np.nan]})
    code, out, _ = run(capsys, "oinf", "inspect", str(path))
    assert code == 0
    assert "OINF v2" in out and "B     4" in out and "asymmetric per-channel(axis 0), zero point per-channel" in out
    code, out, _ = run(capsys, "oinf", "inspect", "--json", str(path))
    assert code == 0
    doc = json.loads(out)
    assert doc["header"]["version"] == 2 and doc["sizevars"] == {"B": 4}
    assert doc["metadata"]["tags"]["value"] == [1.0, "nan"] and doc["metadata"]["eps"]["type"] == "f32"
    w = doc["tensors"][0]
    with ModelLoader.open(path) as m:
        info = m.info("w")
        assert (w["name"], w["dtype"], w["shape"], w["data_offset"], w["data_nbytes"]) == \
            ("w", "u2", [2, 4], info.data_offset, info.data_nbytes)
    assert w["quant"]["zero_points"] == [0, 1] and w["quant"]["quant_offset"] == info.quant_offset
    # deterministic: the same file gives the same bytes
    assert run(capsys, "oinf", "inspect", "--json", str(path))[1] == out


def test_pack_from_npz(capsys, tmp_path):
    src = tmp_path / "w.npz"
    np.savez(src, w1=np.arange(6, dtype=np.float32).reshape(2, 3), b=np.array([1, -2, 3], np.int64))
    out_path = tmp_path / "m.oinf"
    code, out, err = run(capsys, "oinf", "pack", str(out_path), "--from", str(src), "--sizevar", "B=4",
                         "--sizevar", "D=0x10", "--meta", "n_layers=2", "--meta", "act=gelu", "--meta", "eps:f64=1e-5",
                         "--meta", "ids=[1,2,3]", "--meta", "flag=true", "--meta", "h:bf16=0.1",
                         "--dtype", "w1=bf16", "--dtype", "b=i4")
    assert code == 0, err
    assert "wrote" in out
    with ModelLoader.open(out_path) as m:
        assert m.sizevars == {"B": 4, "D": 16}
        assert m.meta("n_layers") == 2 and m.meta("act") == "gelu" and m.meta("eps") == 1e-5 and m.meta("flag") is True
        assert m.metadata_info("eps").type.name == "f64" and m.metadata_info("h").type.name == "bf16"
        np.testing.assert_array_equal(m.meta("ids"), [1, 2, 3])
        assert m.info("w1").dtype.name == "bf16" and m.info("b").dtype.name == "i4"
        np.testing.assert_array_equal(m.tensor("b"), [1, -2, 3])


def test_pack_version_1_and_errors(capsys, tmp_path):
    src = tmp_path / "w.npz"
    np.savez(src, w=np.arange(4, dtype=np.float32) * 10)
    code, _, err = run(capsys, "oinf", "pack", str(tmp_path / "v1.oinf"), "--from", str(src), "--format-version", "1")
    assert code == 0, err
    with ModelLoader.open(tmp_path / "v1.oinf") as m:
        assert m.version == 1
    code, _, err = run(capsys, "oinf", "pack", str(tmp_path / "x.oinf"), "--from", str(src), "--dtype", "w=i4")
    assert code == 1 and "values 0.0..30.0 are out of the i4 range -8..7" in err
    code, _, err = run(capsys, "oinf", "pack", str(tmp_path / "x.oinf"), "--from", str(src), "--dtype", "nope=f16")
    assert code == 1 and "no tensor named 'nope'" in err
    code, _, err = run(capsys, "oinf", "pack", str(tmp_path / "x.oinf"), "--from", str(src), "--meta", "k=two words")
    assert code == 1 and "invalid string value" in err
    code, _, err = run(capsys, "oinf", "pack", str(tmp_path / "x.oinf"), "--from", str(tmp_path / "w.txt"))
    assert code == 1 and "expected .npz or .safetensors" in err
    assert not (tmp_path / "x.oinf").exists()
    with pytest.raises(SystemExit) as info:
        main(["oinf", "pack", str(tmp_path / "x.oinf"), "--from", str(src), "--sizevar", "B"])
    assert info.value.code == 2


def test_convert(capsys, tmp_path):
    src = COMPAT_DIR / "v1" / "moe_routing.oinf"
    code, out, _ = run(capsys, "oinf", "convert", str(src), str(tmp_path / "v2.oinf"), "--to-version", "2")
    assert code == 0 and "OINF v2" in out
    v1, v2 = str(tmp_path / "v1.oinf"), str(tmp_path / "v2.oinf")
    assert run(capsys, "oinf", "convert", v2, v1, "--to-version", "1")[0] == 0
    assert (tmp_path / "v1.oinf").read_bytes() == src.read_bytes()
    # in place
    assert run(capsys, "oinf", "convert", v1, v1, "--to-version", "2")[0] == 0
    assert (tmp_path / "v1.oinf").read_bytes() == (tmp_path / "v2.oinf").read_bytes()


def test_convert_refuses_quant_to_v1(capsys, tmp_path):
    path = tmp_path / "q.oinf"
    write_oinf(path, {"w": TensorSpec([1, 2], "i8", QuantParams.per_tensor(0.5))})
    code, _, err = run(capsys, "oinf", "convert", str(path), str(tmp_path / "v1.oinf"), "--to-version", "1")
    assert code == 1 and "cannot convert to version 1" in err and "'w'" in err
    assert not (tmp_path / "v1.oinf").exists()
