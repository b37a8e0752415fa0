"""lrn's GLSL kernel (openinfer/targets/vulkan/glsl/nn.py `emit_lrn`) on the program tests/synth/test_lrn_kernels.py
runs on the C targets: planes around the vector widths, windows wider than the channels, specials,
a zero and a negative denominator, a subnormal bias, AlexNet's two layers, f64 and f16, in place,
and alpha and beta read at run time (push constants; alpha / size computed by the host), against
the NumPy reference at the C targets' tolerances, with the validation layer on and silent."""

from __future__ import annotations

import numpy as np

import openinfer as oi
from openinfer.compare import compare, table
from openinfer.sim import Simulator

from .conftest import VK_ARCH
from .test_vulkan_matmul import _model


def test_lrn_kernel_matches_the_reference():
    from synth.test_lrn_kernels import program

    text, inputs, outs = program(np.random.default_rng(3))
    g = oi.graph(text)
    sim = Simulator(_model(), g, arch=VK_ARCH)
    shaders = [s.decode() for n, s in sim.plan.files.items() if n.endswith("lrn.comp")]
    assert any("pc.alpha_per_size" in s for s in shaders)       # the run-time alpha, divided by the host
    ex = sim.make_executor()
    ex.insert(**inputs)
    ex.run_step()
    ref = oi.Reference(None, g).make_executor()
    ref.insert(**inputs)
    with np.errstate(all="ignore"):
        ref.run_step()
        rows = [compare(n, sim.vars[n].dtype, ref.fetch(n), ex.fetch(n)) for n in outs]
    assert all(r.ok for r in rows), table([r for r in rows if not r.ok])
    assert sim.validation_messages() in (0, None)
