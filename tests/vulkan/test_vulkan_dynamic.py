"""Dynamic sizes on the Vulkan target (issue 18): the scenarios of tests/dynamic_cases.py on
lavapipe (or OI_VK_ARCH's device) with the validation layer on. Kernels read the sizes from push
constants and the host computes each dispatch's workgroups from them: one library (its pipelines
made once, at create) serves every size, and the tests check that it was built once."""

from __future__ import annotations

import dynamic_cases as dc
import pytest

from .conftest import VK_ARCH

ARCH = str(VK_ARCH)


def _clean(sim) -> None:
    assert sim.validation_messages() == 0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return dc.write_examples(tmp_path_factory.mktemp("vk-dynamic"))


@pytest.fixture
def mlp_model(tmp_path):
    return dc.write_mlp_model(tmp_path / "mlp.oinf")


@pytest.mark.parametrize("case", dc.CASES, ids=lambda c: c.id)
def test_every_kernel_family_takes_its_extents_at_run_time(case, tmp_path):
    _clean(dc.run_case(case, ARCH, tmp_path))


def test_sizes_out_of_range_and_stale_inputs_are_errors(mlp_model):
    _clean(dc.errors_and_stale_inputs(ARCH, mlp_model))


def test_mlp_batch(mlp_model):
    _clean(dc.mlp_batch(ARCH, mlp_model))


@pytest.mark.parametrize("graph", [dc.BATCHED, dc.MATVEC], ids=["batch-of-matrices", "matvec"])
def test_dynamic_rows_of_other_products(graph, mlp_model):
    _clean(dc.other_products(ARCH, mlp_model, graph))


def test_encoder_sequence(built):
    _clean(dc.encoder_sequence(ARCH, built))


def test_cnn_batch(built):
    _clean(dc.cnn_batch(ARCH, built))


def test_streaming_window_of_frames_per_call(built):
    _clean(dc.stream_chunks(ARCH, built))


def test_loops_cache_indices_and_table_windows(tmp_path):
    _clean(dc.loops_and_table_windows(ARCH, tmp_path))


def test_a_scalar_slice_bound_sets_a_dynamic_size(tmp_path):
    _clean(dc.read_sets_size(ARCH, tmp_path))


def test_decoder_attends_over_the_rows_in_use(tmp_path):
    _clean(dc.decoder_window(ARCH, tmp_path))
