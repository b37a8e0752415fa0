"""The widths the shape sweep straddles: every vector width, register tile and selection
threshold of the targets' kernels, read from the emitters that use them (one source of truth:
a retuned tile moves the sweep's shapes with it).

A width w is covered by cases whose deciding extent is w - 1, w and w + 1 (`around`): one short
of a whole vector or tile (the tail path), exactly one (no tail), one past (a whole one and a
one-element tail). `APPLIES` says which widths decide which op's kernels, so the catalogue can be
checked for a case per op, width and offset (tests/sweep/test_shape_sweep.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from openinfer.targets.arm import conv as neon_conv
from openinfer.targets.arm import renderer as neon
from openinfer.targets.c.kernels import nn as cnn
from openinfer.targets.vulkan.glsl import linalg as glinalg
from openinfer.targets.vulkan.glsl import nn as gnn
from openinfer.targets.vulkan.glsl import rows as grows
from openinfer.targets.x86 import renderer as avx


@dataclass(frozen=True)
class Width:
    name: str
    value: int
    why: str


def _widths() -> dict[str, Width]:
    avx2_tile, avx512_tile = avx.Avx2Renderer.conv_tile, avx.Avx512Renderer.conv_tile
    sdpa_tile = avx.Avx2Renderer.sdpa_tile
    found = [
        # vector lanes: f64 on AVX2 / f32 on SSE2 and NEON (portable C's 128 bits), f32 on AVX2 /
        # f64 on AVX-512, f32 on AVX-512
        Width("lanes4", 128 // 32, "f32 lanes of 128-bit vectors (portable C), f64 lanes of AVX2"),
        Width("lanes8", avx.AVX2.lanes, "f32 lanes of AVX2, f64 lanes of AVX-512"),
        Width("lanes16", avx.AVX512.lanes, "f32 lanes of AVX-512"),
        Width("gemm_mr_avx2", avx.Avx2Renderer.gemm_mr, "AVX2 GEMM microkernel rows"),
        Width("gemm_mr_avx512", avx.Avx512Renderer.gemm_mr, "AVX-512 GEMM microkernel rows"),
        Width("gemm_nr_avx2", avx.Avx2Renderer.gemm_nv * avx.AVX2.lanes, "AVX2 GEMM panel columns"),
        Width("gemm_nr_avx512", avx.Avx512Renderer.gemm_nv * avx.AVX512.lanes, "AVX-512 GEMM panel columns"),
        Width("gemm_mr_neon", neon.NeonRenderer.gemm_mr, "NEON GEMM microkernel rows"),
        Width("gemm_nr_neon", neon.NeonRenderer.gemm_nv * neon.NEON.lanes, "NEON GEMM panel columns"),
        Width("gemm_kc", avx.GEMM_KC, "GEMM K block"),
        Width("skinny", avx._SKINNY, "rows of A up to which matmul takes the vecmat (GEMV) path"),
        Width("vecmat_ku", avx._VECMAT_KU, "rows of B one vecmat pass handles"),
        Width("dequant_mr", avx._DQ_MR, "rows of x one dequantizing GEMV kernel handles"),
        Width("conv_ocb_avx2", avx2_tile[1], "output channels of the AVX2 conv tile"),
        Width("conv_ocb_avx512", avx512_tile[1], "output channels of the AVX-512 conv tile"),
        Width("conv_owt_avx2", avx2_tile[2] * avx.AVX2.lanes, "output columns of the AVX2 conv tile"),
        Width("conv_ocb_neon", neon_conv._OCB, "output channels of the NEON conv tile"),
        Width("conv_owt_neon", neon_conv._NV * neon.NEON.lanes, "output columns of the NEON conv tile"),
        Width("conv_ocb_max", cnn._MAX_OCB, "output channels of a portable conv tile at most"),
        Width("sdpa_rows", cnn._SDPA_TILED_ROWS, "query rows from which sdpa takes the tiled kernel"),
        Width("sdpa_tile_rows", sdpa_tile[0], "query rows of the AVX2 sdpa tile"),
        Width("sdpa_tile_keys", sdpa_tile[1] * avx.AVX2.lanes, "keys of the AVX2 sdpa tile"),
        Width("sdpa_tile_keys_neon", neon.NeonRenderer.sdpa_tile[1] * neon.NEON.lanes, "keys of the NEON sdpa tile"),
        Width("vk_gemv_m", glinalg.GEMV_MAX_M, "rows of A up to which Vulkan takes the GEMV"),
        Width("vk_gemm_tile", glinalg.TUNE["gemm_tiles"][-1][0], "the smallest Vulkan GEMM tile"),
        Width("vk_sdpa_key_lanes", gnn.SDPA_KEY_LANES, "Vulkan sdpa lanes per key"),
        Width("vk_row_wg", grows.ROW_WG, "Vulkan row kernels' workgroup"),
    ]
    return {w.name: w for w in found}


WIDTHS = _widths()

#: the widths that decide each family's kernels (an op's family: `family_of`)
APPLIES: dict[str, tuple[str, ...]] = {
    "elementwise": ("lanes4", "lanes8", "lanes16"),
    "reduce": ("lanes4", "lanes8", "lanes16"),
    "rows": ("lanes4", "lanes8", "lanes16", "vk_row_wg"),
    "layout": ("lanes4", "lanes8", "lanes16"),
    "matmul": ("lanes8", "lanes16", "gemm_mr_avx2", "gemm_mr_avx512", "gemm_mr_neon", "gemm_nr_avx2", "gemm_nr_avx512",
               "gemm_nr_neon", "gemm_kc", "skinny", "vecmat_ku", "vk_gemv_m", "vk_gemm_tile"),
    "dequant": ("lanes8", "lanes16", "dequant_mr", "vk_gemv_m"),
    "gemv": ("lanes8", "lanes16", "skinny", "vk_gemv_m"),          # the Vulkan GEMVs' prologues
    "decode": ("lanes8", "lanes16", "vk_sdpa_key_lanes"),          # sdpa of one query over a cache
    "conv": ("lanes4", "lanes8", "lanes16", "conv_ocb_avx2", "conv_ocb_avx512", "conv_ocb_neon", "conv_owt_avx2",
             "conv_owt_neon", "conv_ocb_max"),
    "pool": ("lanes4", "lanes8", "lanes16"),
    "sdpa": ("lanes8", "lanes16", "sdpa_rows", "sdpa_tile_rows", "sdpa_tile_keys", "sdpa_tile_keys_neon",
             "vk_sdpa_key_lanes"),
    "rope": ("lanes4", "lanes8", "lanes16"),
}


def around(*names: str) -> list[int]:
    """w - 1, w, w + 1 for each named width (at least 1), ascending, without repeats."""
    out = {v for n in names for v in (WIDTHS[n].value - 1, WIDTHS[n].value, WIDTHS[n].value + 1) if v >= 1}
    return sorted(out)


def offsets(extent: int, names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """The (width, offset) pairs an extent covers among `names` (offset -1, 0 or +1)."""
    return tuple((n, extent - WIDTHS[n].value) for n in names if abs(extent - WIDTHS[n].value) <= 1)
