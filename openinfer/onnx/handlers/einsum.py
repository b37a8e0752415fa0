"""ONNX Einsum, lowered onto the registry's sum_axis, transpose, reshape and matmul (no op of its
own). One operand: sum_axis over the labels the output drops, then a transpose to the output's
order. Two operands: each first sums the labels only it has and the output drops; the labels
left are batch (both operands and the output), contracted (both, not the output) and kept (one
operand and the output), and the product is one matmul of [batch..., M, K] @ [batch..., K, N]
(M, K, N: the kept and contracted labels' sizes multiplied), its operands read through
transpose_a / transpose_b where they are stored [batch..., K, M] / [batch..., N, K], its batch
dims broadcast by matmul; a reshape and a transpose give the output's labels and order. Folded
on constants by np.einsum.
"""

from __future__ import annotations

import numpy as np

from ..context import FLOATS, ONNX_INTS, ONNX_UINTS, Dim, NodeContext, Value, dim_product, handler

#: labels standing for the dims an ellipsis covers (ONNX labels are letters, so these never clash),
#: right-aligned: an operand whose ellipsis covers r dims takes the last r of them
_ELLIPSIS_LABELS = "0123456789"


def _parse(c: NodeContext, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The equation's input terms and output term with each ellipsis replaced by digit labels
    (the implicit output: the ellipsis dims, then the labels used once, alphabetically)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        c.fail(f"equation {equation!r} has {len(terms)} operand terms for {len(ranks)} inputs")
    ell_rank = 0
    expanded = []
    for term, rank in zip(terms, ranks, strict=True):
        letters = term.replace("...", "")
        if letters and not letters.isalpha():
            c.fail(f"equation {equation!r}: term {term!r} (letters and at most one `...`)")
        covered = rank - len(letters)
        if covered < 0 or (covered and "..." not in term):
            c.fail(f"equation {equation!r}: term {term!r} for an operand of rank {rank}")
        if len(set(letters)) != len(letters):
            c.fail(f"equation {equation!r}: term {term!r} repeats a label (a diagonal), which is not supported")
        ell_rank = max(ell_rank, covered)
        expanded.append(term.replace("...", _ELLIPSIS_LABELS[10 - covered:] if covered else ""))
    if ell_rank > len(_ELLIPSIS_LABELS):
        c.fail(f"an ellipsis covering {ell_rank} dims (at most {len(_ELLIPSIS_LABELS)})")
    ellipsis = _ELLIPSIS_LABELS[10 - ell_rank:] if ell_rank else ""
    if arrow:
        letters = rhs.replace("...", "", 1)
        if (letters and not letters.isalpha()) or len(set(letters)) != len(letters):
            c.fail(f"equation {equation!r}: output term {rhs!r} (distinct letters and at most one `...`)")
        out = rhs.replace("...", ellipsis)
        if not set(out) <= set("".join(expanded)):
            c.fail(f"equation {equation!r}: the output {rhs!r} names a label no input has")
    else:
        counts = {}
        for label in "".join(t.replace("...", "") for t in terms):
            counts[label] = counts.get(label, 0) + 1
        out = ellipsis + "".join(sorted(label for label, n in counts.items() if n == 1))
    return expanded, out


class _Operand:
    """An operand being lowered: its value and variable, and the label of each of its dims."""

    def __init__(self, value: Value, var: str, labels: str):
        self.value, self.var, self.labels = value, var, labels

    def dim(self, label: str) -> Dim:
        return self.value.dims[self.labels.index(label)]


def _emit(c: NodeContext, op: str, x: _Operand, settings: dict, dims: tuple[Dim, ...], labels: str,
          out: str | None, what: str) -> _Operand:
    """`op` of x into the node's output (`out` given) or a temporary."""
    target = {"out": out} if out is not None else {"temp": f"{c.node.output[0]}_{what}"}
    v = c.emit(op, [x.var], settings, x.value.dtype, dims, **target)
    return _Operand(v, v.var, labels)


def _sum_out(c: NodeContext, x: _Operand, drop: set[str], out: str | None) -> _Operand:
    """x without the labels in `drop`: summed over them (only size-1 dims: a reshape)."""
    axes = [k for k, label in enumerate(x.labels) if label in drop]
    if not axes:
        return x
    labels = "".join(label for label in x.labels if label not in drop)
    dims = tuple(x.dim(label) for label in labels)
    if all(x.value.shape[a] == 1 for a in axes):
        return _emit(c, "reshape", x, {}, dims, labels, out, "squeezed")
    return _emit(c, "sum_axis", x, {"axes": axes}, dims, labels, out, "sum")


def _ordered(c: NodeContext, x: _Operand, labels: str, out: str | None) -> _Operand:
    """x transposed to `labels`' order (unchanged where it has it and no `out` is asked for)."""
    if x.labels == labels and out is None:
        return x
    if x.labels == labels:
        return _emit(c, "reshape", x, {}, x.value.dims, labels, out, "copy")
    perm = [x.labels.index(label) for label in labels]
    return _emit(c, "transpose", x, {"perm": perm}, tuple(x.dim(label) for label in labels), labels, out, "t")


def _as_matrix(c: NodeContext, x: _Operand, batch: str, rows: str, cols: str, name: str) -> tuple[str, bool]:
    """x as [batch..., R, C] (R, C: the sizes of `rows` and `cols` multiplied), or as that matrix
    transposed ([batch..., C, R], True) where that is how it is stored: the variable, and whether
    matmul must read it transposed."""
    swapped = x.labels == batch + cols + rows and x.labels != batch + rows + cols
    first, second = (cols, rows) if swapped else (rows, cols)
    x = _ordered(c, x, batch + first + second, None)
    dims = tuple(x.dim(label) for label in batch) + (dim_product(x.dim(lb) for lb in first),
                                                    dim_product(x.dim(lb) for lb in second))
    if tuple(d.size for d in dims) != x.value.shape:
        x = _emit(c, "reshape", x, {}, dims, "", None, name)
    return x.var, swapped


@handler("Einsum", note="sum_axis, transpose, reshape and matmul (transpose_a / transpose_b, batch dims broadcast); "
                        "one or two operands, explicit or implicit output, `...`; a label repeated within a term "
                        "(a diagonal) is refused; folded on constants")
def _einsum(c: NodeContext) -> None:
    c.allow("equation")
    if "equation" not in c.attrs:
        c.fail("no equation")
    equation = c.attrs["equation"]
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    ins = [v for v in c.ins if v is not None]
    if not 1 <= len(ins) <= 2 or len(ins) != len(c.ins):
        c.fail(f"{len(c.ins)} inputs (one or two operands are supported)")
    (out,) = c.outputs()
    if any(v.dtype != ins[0].dtype for v in ins) or ins[0].dtype not in FLOATS + ONNX_INTS + ONNX_UINTS:
        c.fail(f"inputs of dtypes {[v.dtype for v in ins]} (one numeric dtype)")
    terms, out_labels = _parse(c, equation, [len(v.dims) for v in ins])
    sizes: dict[str, int] = {}
    for v, term in zip(ins, terms, strict=True):
        for label, n in zip(term, v.shape, strict=True):
            if sizes.setdefault(label, n) != n and 1 not in (sizes[label], n):
                c.fail(f"equation {equation!r}: label {label!r} of sizes {sizes[label]} and {n}")
            sizes[label] = max(sizes[label], n)
    if any(n == 0 for n in sizes.values()):
        c.fail(f"an empty dim in {[list(v.shape) for v in ins]}")
    if all(v.const is not None for v in ins):
        np_terms = [t.translate(str.maketrans(_ELLIPSIS_LABELS, "ABCDEFGHIJ")) for t in terms]
        np_out = out_labels.translate(str.maketrans(_ELLIPSIS_LABELS, "ABCDEFGHIJ"))
        folded = np.einsum(f"{','.join(np_terms)}->{np_out}", *[v.const for v in ins])
        c.folded(out, np.asarray(folded).astype(ins[0].const.dtype))
        return
    ops = [_Operand(v, c.var(v, k), term) for k, (v, term) in enumerate(zip(ins, terms, strict=True))]
    if len(ops) == 1:
        (x,) = ops
        drop = set(x.labels) - set(out_labels)
        kept = "".join(lb for lb in x.labels if lb not in drop)
        if not drop or kept != out_labels:
            x = _sum_out(c, x, drop, None)
            _ordered(c, x, out_labels, out)
        else:
            _sum_out(c, x, drop, out)
        return
    a, b = ops
    # a label that the output drops, of size 1 in one operand and n in the other: that operand is
    # constant along it, so it sums out of that operand and the other sums over it alone
    squeezed_a, squeezed_b = ({lb for lb in x.labels if lb not in out_labels and lb in y.labels
                               and x.dim(lb).size == 1 and y.dim(lb).size > 1} for x, y in ((a, b), (b, a)))
    a, b = (_sum_out(c, x, mine | {lb for lb in x.labels if lb not in out_labels
                                   and (lb not in y.labels or lb in theirs)}, None)
            for x, y, mine, theirs in ((a, b, squeezed_a, squeezed_b), (b, a, squeezed_b, squeezed_a)))
    batch = "".join(lb for lb in out_labels if lb in a.labels and lb in b.labels)
    kept_a = "".join(lb for lb in out_labels if lb in a.labels and lb not in b.labels)
    kept_b = "".join(lb for lb in out_labels if lb in b.labels and lb not in a.labels)
    contracted = "".join(lb for lb in a.labels if lb in b.labels and lb not in out_labels)
    an, trans_a = _as_matrix(c, a, batch, kept_a, contracted, "a")
    bn, trans_b = _as_matrix(c, b, batch, contracted, kept_b, "b")
    batch_dims = tuple(max(a.dim(lb), b.dim(lb), key=lambda d: (d.size, d.expr is not None)) for lb in batch)
    product = batch_dims + (dim_product(a.dim(lb) for lb in kept_a), dim_product(b.dim(lb) for lb in kept_b))
    natural = batch + kept_a + kept_b
    labelled = batch_dims + tuple(a.dim(lb) for lb in kept_a) + tuple(b.dim(lb) for lb in kept_b)
    reshaped = tuple(d.size for d in labelled) != tuple(d.size for d in product)
    last = not reshaped and natural == out_labels
    settings = {"acc": "f32" if a.value.dtype == "f16" else None,
                "transpose_a": trans_a or None, "transpose_b": trans_b or None}
    target = {"out": out} if last else {"temp": f"{out}_matmul"}
    m = c.emit("matmul", [an, bn], settings, a.value.dtype, product, **target)
    if last:
        return
    y = _Operand(m, m.var, natural if not reshaped else "")
    if reshaped:
        y = _emit(c, "reshape", y, {}, labelled, natural, out if natural == out_labels else None, "product")
    if natural != out_labels:
        _ordered(c, y, out_labels, out)
