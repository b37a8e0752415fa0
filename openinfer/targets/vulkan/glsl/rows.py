"""Workgroup-per-row kernels: one workgroup owns one row (a norm's or softmax's row, an argmax
lane, one query of sdpa); its invocations take the row's elements in strides of the workgroup
size and combine their partial results with a tree in shared memory.

The same tree serves the long reductions of reduce.py (sum, max, ... into few outputs).

Why: a decode step has one row per op (one token), and the element-per-row kernels then run the
whole row on one invocation: on an H100 an rms_norm of 768 elements took ~80 us, argmax over
8192 logits ~670 us and sdpa over a 64-row cache ~270 us, most of a 5.4 ms step. A workgroup
does the same work in a few microseconds.

The partial results combine in a different order than the reference's sequential loop, so these
kernels serve f32 only, where the reference's tolerance covers a reordered f32 sum (as the C
targets' row kernels do); other dtypes keep the sequential kernels and their order.
"""

from __future__ import annotations

from ....dims import capacity
from .registry import Grid, dispatch
from .types import KernelCtx

#: invocations per row at most
ROW_WG = 256
#: loads of a row an invocation has in flight at once (`strided`)
ROW_LOADS = 8


def row_wg(k: KernelCtx, work: int) -> int:
    """A power-of-two workgroup size for rows of `work` independent items (at most ROW_WG and
    the device's limit); a dynamic count decides at its bound (the strided loops take any count)."""
    work = capacity(work)
    wg = 1
    while wg < min(work, ROW_WG) and wg * 2 <= k.caps.max_wg:
        wg *= 2
    return wg


def pow2ceil(x: int) -> int:
    """The least power of two >= x (1 for x <= 1)."""
    return 1 << max(0, (max(1, x) - 1).bit_length())


def strided(n, wg: int, load, ct: str, body: list[str]) -> list[str]:
    """Lines running `body` (over `j`, the element's index, and `v`, its value `load(j)`) for
    each element j = lid, lid + wg, ... of a row of n, ROW_LOADS loads at a time, all issued
    before the first is used: a loop taking one element a turn waits out each load's latency
    in turn (the decoder's argmax over 8192 logits, 32 a lane: its stage, with the token's
    readback, 13.1 us on an H100; batched, 9.8). `body` must not depend on the order of the
    elements (an argmax's total order, a sum tolerance allows)."""
    per = min(ROW_LOADS, -(-capacity(n) // wg))
    exact = isinstance(n, int) and n % (wg * per) == 0     # no element past the row's end
    # (index, the guard of an element past the row's end; the first is in the row: the loop's test)
    at = [(f"j0 + {e * wg}u" if e else "j0", "" if exact or not e else f"j0 + {e * wg}u < {n}u") for e in range(per)]
    lines = [f"for (uint j0 = lid; j0 < {n}u; j0 += {wg * per}u) {{"]
    lines += [f"    {ct} v{e} = {inside} ? {load(j)} : {ct}(0);" if inside else f"    {ct} v{e} = {load(j)};"
              for e, (j, inside) in enumerate(at)]
    for e, (j, inside) in enumerate(at):
        lines.append(f"    {'if (' + inside + ') ' if inside else ''}{{ uint j = {j}; {ct} v = v{e};")
        lines += ["        " + x for x in body]
        lines.append("    }")
    lines.append("}")
    return lines


def header(rows: int) -> list[str]:
    """main()'s first lines: this workgroup's row (whole workgroups return together, so no
    barrier is left waiting for a returned invocation) and the invocation's lane."""
    return ["uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;",
            f"if (row >= {rows}u) return;",
            "uint lid = gl_LocalInvocationID.x;"]


def groups(rows: int) -> Grid:
    return dispatch(rows, 1)


def tree(wg: int, combine: str) -> list[str]:
    """Lines combining the invocations' entries of shared arrays into entry 0: `combine` is a
    statement over `a` (this lane's index) and `b` (the partner's), run log2(wg) times. Starts
    with the barrier that publishes the entries; ends with one, so every invocation may read
    entry 0, and the arrays may be written again only after another barrier."""
    return ["barrier();",
            f"for (uint h = {wg // 2}u; h > 0u; h >>= 1) {{",
            f"    if (lid < h) {{ uint a = lid, b = lid + h; {combine} }}",
            "    barrier();",
            "}"]
