"""Conformance cases of the ops that pick elements by run-time indices beyond `gather`:
gather_elements, topk_indices, gather_nd and scatter_nd (kept apart from cases.py for its size;
cases.py looks builders up here)."""

from __future__ import annotations

import zlib

import numpy as np

from openinfer import dtypes as dt
from openinfer.dtypes import DTypeInfo
from openinfer.ops import OpSpec, get

from .cases import Builder, Variant, as_type, index_cases, index_dtypes, values
from .cases import index_tuples as tuples


def _gather_elements(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Along each axis of a [5, 3] table, negative indices, a block smaller than the data off the
    axis, a 3-d one; (f32) every index dtype."""
    idx_types = index_dtypes()
    it = idx_types[zlib.crc32(f"ge/{t.name}".encode()) % len(idx_types)]
    table, cube = values(t, (5, 3), rng), values(t, (3, 4, 5), rng, offset=2)

    def rows(d: DTypeInfo) -> tuple[DTypeInfo, np.ndarray]:
        return tuples(d, [[0, -1, 2], [-5, 1, 4], [4, 4, -3], [2, 0, 1]], [[0, 4, 2], [3, 1, 4], [4, 4, 0], [2, 0, 1]])
    return [Variant(f"axis0_{it.name}", [(t, table), rows(it)]),
            Variant("axis1_block", [(t, table), tuples(dt.I64, [[2, -1], [0, 0], [-3, 1]], [])], {"axis": 1}),
            Variant("axis-2_3d", [(t, cube), tuples(dt.lookup("i32"), rng.integers(-4, 4, (2, 7, 3)).tolist(), [])],
                    {"axis": -2}),
            *index_cases(op, t, lambda d: [(t, table), rows(d)])]


def _topk(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Ties (lower index first), largest and smallest, k of 1 and of the whole axis, each axis;
    floats: NaN (above every number), ±inf and ±0.0 (a tie)."""
    x = np.asarray(values(t, (4, 7), rng, edges=False, small=True, scale=1.0), np.float64 if t.is_float else object)
    x[0, :] = [1, 3, 3, 0, 1, 3, 2]
    x = as_type(x, t)
    out = [Variant(f"k{k}_axis{a}{'_smallest' if not largest else ''}", [(t, x)],
                   {"k": k, "axis": a, **({} if largest else {"largest": False})})
           for k, a, largest in [(3, -1, True), (3, 1, False), (1, 0, True), (4, 0, False), (7, -1, True),
                                 (2, -2, True)]]
    out.append(Variant("unsorted", [(t, x)], {"k": 2, "sorted": False}))
    if t.is_float:
        e = np.asarray(x, np.float64).copy()
        e[1, :] = [1.0, np.nan, 2.0, np.nan, -np.inf, np.inf, 0.5]
        e[2, :] = [-0.0, 0.0, -1.0, -0.0, 0.0, 1.0, -1.0]
        e = as_type(e, t)
        out += [Variant("specials_largest", [(t, e)], {"k": 5}),
                Variant("specials_smallest", [(t, e)], {"k": 7, "largest": False})]
    return out


def _gather_nd(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Rows (k = 1), tuples (k = 2) picking rows and single elements, batch_dims 1 with both, odd
    shapes, negative indices, and (f32) every index dtype."""
    idx_types = index_dtypes()
    it = idx_types[zlib.crc32(f"nd/{t.name}".encode()) % len(idx_types)]
    i64, i32 = dt.lookup("i64"), dt.lookup("i32")
    x53, x352 = values(t, (5, 3), rng), values(t, (3, 5, 2), rng, offset=3)
    return [Variant(f"rows_{it.name}", [(t, x53), tuples(it, [[[0], [-1]], [[4], [-5]], [[2], [2]]],
                                                         [[[0], [4]], [[4], [1]], [[2], [2]]])]),
            Variant("tuples", [(t, x352), tuples(i64, [[2, -1], [0, 3], [-3, 0], [1, 4]], [])]),
            Variant("elements", [(t, x53), tuples(i32, [[2, 2], [-1, -3], [0, 0]], [])]),
            Variant("batch_rows", [(t, x352), tuples(i64, [[[4], [-1]], [[0], [2]], [[-5], [3]]], [])],
                    {"batch_dims": 1}),
            Variant("batch_elements", [(t, values(t, (2, 3, 5), rng, offset=6)),
                                       tuples(i32, [[[2, 4], [0, 0]], [[-3, -1], [1, 2]]], [])], {"batch_dims": 1}),
            *index_cases(op, t, lambda d: [(t, x352), tuples(d, [[2, -1], [0, 3], [-3, 0]],
                                                              [[2, 4], [0, 3], [0, 0]])])]


def _scatter_nd(op: OpSpec, t: DTypeInfo, rng) -> list[Variant]:
    """Rows (k = 1) and single elements (k = 2) replaced, repeated tuples (the last row wins;
    every reduction the dtype takes combines them in order), negative indices, in place, and
    (f32) every index dtype."""
    idx_types = index_dtypes()
    it = idx_types[zlib.crc32(f"nd/{t.name}".encode()) % len(idx_types)]
    i64, i32 = dt.lookup("i64"), dt.lookup("i32")
    x53, x352 = values(t, (5, 3), rng), values(t, (3, 5, 2), rng, offset=3)
    repeated = tuples(i64, [[1], [-4], [3], [1]], [])                    # row 1 three times (-4 of 5)
    repeated_elems = tuples(i32, [[0, 1], [2, -1], [0, 1], [-3, 1], [1, 1]], [])
    out = [Variant(f"rows_{it.name}", [(t, x53), tuples(it, [[-2], [0]], [[3], [0]]),
                                       (t, values(t, (2, 3), rng, offset=5))], inplace=True),
           Variant("tuples", [(t, x352), tuples(i64, [[[2, -1], [0, 3]], [[-3, 0], [1, 1]]], []),
                              (t, values(t, (2, 2, 2), rng, offset=7))]),
           Variant("elements", [(t, values(t, (3, 5), rng, offset=2)), tuples(i32, [[2, 2], [-1, -4], [0, 0]], []),
                                (t, values(t, (3,), rng, offset=9))]),
           Variant("repeated", [(t, x53), repeated, (t, values(t, (4, 3), rng, offset=4))])]
    for r in ("add", "mul", "max", "min"):
        if t not in get(r).dtypes:
            continue
        out += [Variant(f"{r}_rows", [(t, x53), repeated, (t, values(t, (4, 3), rng, offset=8))], {"reduction": r},
                        inplace=r == "add"),
                Variant(f"{r}_elements", [(t, values(t, (3, 5), rng, offset=1)), repeated_elems,
                                          (t, values(t, (5,), rng, offset=11))], {"reduction": r})]
    return out + index_cases(op, t, lambda d: [(t, x53), tuples(d, [[-2], [0], [4]], [[3], [0], [4]]),
                                                (t, values(t, (3, 3), rng, offset=5))])


INDEXING_BUILDERS: dict[str, Builder] = {"gather_elements": _gather_elements, "topk_indices": _topk,
                                         "gather_nd": _gather_nd, "scatter_nd": _scatter_nd}
