"""The four MLPerf Tiny int8 reference models (tests/data/mlperf_tiny) imported from their
`.tflite` files and run on the NumPy reference and on compiled targets: every tensor an operator
computes (not only the outputs) equals LiteRT's reference kernels bit for bit, on inputs drawn in
the float domain. Targets this machine cannot run (another ISA without its emulator, a CPU feature
it lacks) are skipped with the reason."""

from __future__ import annotations

import pytest

pytest.importorskip("tflite", minversion="2.18",
                    reason="needs the tflite flatbuffer package (pip install 'openinfer[tflite]')")
pytest.importorskip("ai_edge_litert.interpreter", reason="needs ai-edge-litert (LiteRT's interpreter)")

from tflite_oracle import DATA, feed, litert_inputs, litert_run, mismatches  # noqa: E402

from openinfer.reference.executor import Reference  # noqa: E402
from openinfer.testing import skip_unless_runs_here  # noqa: E402
from openinfer.tflite import import_tflite  # noqa: E402

MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
#: portable C, the x86 wing's targets (the host's best runs; the others skip), the NEON wing with the
#: dot product, and the two Cortex-M wings (DSP; Helium) under QEMU
ARCHS = ["x86_64-generic", "x86_64-avx2", "x86_64-avx512", "aarch64-v82", "cortex-m4", "cortex-m55"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    cache = {}

    def get(name: str):
        if name not in cache:
            data = (DATA / "mlperf_tiny" / f"{name}.tflite").read_bytes()
            result = import_tflite(DATA / "mlperf_tiny" / f"{name}.tflite")
            graph, model = result.write(tmp_path_factory.mktemp(name))
            cache[name] = (result, data, graph, model)
        return cache[name]
    return get


@pytest.mark.parametrize("name", MODELS)
def test_reference_is_bit_exact_with_litert(name, imported) -> None:
    result, data, graph, model = imported(name)
    ex = Reference(model, graph).make_executor()
    for seed in range(3):
        by_index, by_name = litert_inputs(data, seed)
        ex.insert(**feed(result, by_name))
        ex.run_step()
        bad = mismatches(result, data, ex, litert_run(data, by_index))
        assert not bad, f"{name}, input seed {seed}:\n" + "\n".join(bad)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", MODELS)
def test_compiled_is_bit_exact_with_litert(name, arch, imported) -> None:
    from openinfer.sim import Simulator

    skip_unless_runs_here(arch)
    result, data, graph, model = imported(name)
    ref = Reference(model, graph)
    ex = Simulator(ref.model, ref.graph, arch=arch).make_executor()
    by_index, by_name = litert_inputs(data, 7)
    ex.insert(**feed(result, by_name))
    ex.run_step()
    bad = mismatches(result, data, ex, litert_run(data, by_index))
    assert not bad, f"{name} on {arch}:\n" + "\n".join(bad)
