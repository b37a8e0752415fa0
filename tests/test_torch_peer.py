"""tools/bench/torch_decoder.py, the decoder's PyTorch peer (vulkan_bench.py `--rows
decoder-torch`): the module computes what the graph computes (a greedy generation over every
cache position of the test size: the same tokens as OpenInfer's reference, logits within 1e-4 of
the largest), and its check fails for a module that computes something else (another RoPE base).
Where torch is not installed (CI) these skip; the peer's speed is the bench's to measure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "bench"))

import torch_decoder  # noqa: E402


def test_torch_decoder_generates_the_reference_tokens(tmp_path):
    pytest.importorskip("torch", reason="the PyTorch peer needs torch (a tools-only dependency)")
    assert torch_decoder.main(["--size", "test", "--steps", "16", "--out", str(tmp_path)]) == 0


def test_torch_decoder_check_fails_for_another_model(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="the PyTorch peer needs torch (a tools-only dependency)")
    monkeypatch.setattr(torch_decoder, "THETA", 500.0)
    assert torch_decoder.main(["--size", "test", "--steps", "16", "--out", str(tmp_path)]) == 1
