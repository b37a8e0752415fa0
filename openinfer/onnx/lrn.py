"""ONNX LRN as the registry's `lrn` (registered into the importer's `SUPPORTED_OPS` when
openinfer/onnx/importer.py is imported): the same window, attributes and defaults, so the node's
attributes are written as it gives them."""

from __future__ import annotations

from .importer import _NodeContext, _op


@_op("LRN", note="lrn(size, alpha, beta, bias); float dtypes; X of at least 2 dims ([N, C, ...])")
def _lrn(c: _NodeContext) -> None:
    c.allow("size", "alpha", "beta", "bias")
    (x,) = c.inputs(1, 1)
    (out,) = c.outputs()
    c.float_input(x)
    if "size" not in c.attrs:
        c.fail("size is required")
    size = int(c.attrs["size"])
    if size < 1:
        c.fail(f"size {size}: expected at least 1")
    if len(x.dims) < 2:
        c.fail(f"a {len(x.dims)}-D input: expected [N, C, ...]")
    settings = {"size": size, **{k: float(c.attrs[k]) for k in ("alpha", "beta", "bias") if k in c.attrs}}
    c.emit("lrn", [c.var(x, 0)], settings, x.dtype, x.dims, out=out)
