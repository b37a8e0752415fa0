"""ONNX RNN, GRU and LSTM: a DSL `loop` over the time steps.

X @ W^T for every step is one `matmul` before the loop (with the biases that do not depend on the
state added once), as runtimes do; the loop then takes step t's row of it (`dynamic_slice` at a
counter), multiplies the hidden state by R^T (`matmul` with `transpose_b`, the stacked weights
used as ONNX stores them), applies the gates with the registry's element-wise ops, updates the
state variables in place and writes h into a cache table, row t, from which Y is read after the
loop. The reverse direction counts t down from T - 1 (the largest of an `arange` over T, so a
symbolic sequence length stays symbolic).

A constant `sequence_lens` with rows shorter than T masks the steps: a constant [T, B, H] table
holds 1 where t < len[b]; at each step the state is copied before the cell and, where the row's
step is past its length, put back (`filter`), and Y is multiplied by the table after the loop.
The same mask serves both directions: counting t down from T - 1, a row keeps its initial state
until t = len[b] - 1 and then runs its valid steps in reverse, as onnxruntime does. Lengths all
equal to T generate no mask.

With `import_onnx(..., streaming=True)` a node runs one time step per engine step: its sequence
length must be 1, and its hidden (and cell) state is `persistent` memory read at the start of the
step and written back at its end (initial_h / initial_c when constant, else zeros: `reset()`, the
generated `*_reset`, goes back to them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..context import Dim, NodeContext, Value, dsl_dim, handler, sanitize, setting_text

#: ONNX activation names the registry has as ops
_ACTIVATIONS = {"Tanh": "tanh", "Sigmoid": "sigmoid", "Relu": "relu"}


@dataclass(frozen=True)
class _Cell:
    gates: int                     # G: W is [num_directions, G*H, I]
    activations: tuple[str, ...]   # the defaults, one direction's
    inputs: int                    # the most inputs the op takes


_CELLS = {"RNN": _Cell(1, ("Tanh",), 6), "GRU": _Cell(3, ("Sigmoid", "Tanh"), 6),
          "LSTM": _Cell(4, ("Sigmoid", "Tanh", "Tanh"), 8)}

_COMMON = ("X [T, B, I] (layout 0, or [B, T, I] with layout 1); direction forward, reverse or bidirectional; W, R, "
           "B constant; initial_h{c} constant or computed; sequence_lens constant, each 1..T (T and B static where "
           "they differ: masked steps); activations Tanh, Sigmoid, Relu; clip as `clamp`; "
           "a `loop` over the steps (one step per run with --streaming)")


@handler("RNN", note="Y = f(x W^T + h R^T + b): " + _COMMON.format(c=""))
@handler("GRU", note="gates z, r, h; linear_before_reset 0 or 1: " + _COMMON.format(c=""))
@handler("LSTM", note="gates i, o, f, c; peepholes P; input_forget 0: " + _COMMON.format(c=", initial_c"))
def _recurrent(c: NodeContext) -> None:
    op = c.node.op_type
    cell = _CELLS[op]
    allowed = ["activations", "clip", "direction", "hidden_size", "layout"]
    allowed += {"GRU": ["linear_before_reset"], "LSTM": ["input_forget"], "RNN": []}[op]
    if "activation_alpha" in c.attrs or "activation_beta" in c.attrs:
        c.fail("activation_alpha / activation_beta are not supported (the activations Tanh, Sigmoid and Relu take "
               "none)")
    c.allow(*allowed)
    ins = c.inputs(3, cell.inputs)
    x, w, r, b, seq_lens, h0 = ins[:6]
    c0, peep = (ins[6], ins[7]) if op == "LSTM" else (None, None)
    c.float_input(x)
    if len(x.dims) != 3:
        c.fail(f"X must be 3-D, got shape {list(x.shape)}")
    layout = int(c.attrs.get("layout", 0))
    if layout not in (0, 1):
        c.fail(f"layout {layout} is not supported (0 or 1)")
    if int(c.attrs.get("input_forget", 0)) != 0:
        c.fail("input_forget=1 is not supported")
    lbr = int(c.attrs.get("linear_before_reset", 0))
    direction = c.attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    if direction not in ("forward", "reverse", "bidirectional"):
        c.fail(f"direction {direction!r} is not one of forward, reverse, bidirectional")
    reverse = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]
    nd = len(reverse)
    wc = c.const_input(w, "W")
    rc = c.const_input(r, "R")
    hidden = rc.shape[-1] if rc.ndim == 3 else 0
    g = cell.gates
    t_dim, b_dim = (x.dims[0], x.dims[1]) if layout == 0 else (x.dims[1], x.dims[0])
    inputs = x.shape[2]
    if wc.shape != (nd, g * hidden, inputs) or rc.shape != (nd, g * hidden, hidden):
        c.fail(f"W {list(wc.shape)} and R {list(rc.shape)} do not fit {nd} direction(s) of {g} gate(s) with "
               f"input size {inputs}")
    if "hidden_size" in c.attrs and int(c.attrs["hidden_size"]) != hidden:
        c.fail(f"hidden_size {c.attrs['hidden_size']} differs from R's {hidden}")
    dtype = x.dtype
    npt = wc.dtype
    bias = c.const_input(b, "B")
    bias = np.zeros((nd, 2 * g * hidden), npt) if bias is None else bias
    if bias.shape != (nd, 2 * g * hidden):
        c.fail(f"B {list(bias.shape)} is not [{nd}, {2 * g * hidden}]")
    peeps = c.const_input(peep, "P")
    if peeps is not None and peeps.shape != (nd, 3 * hidden):
        c.fail(f"P {list(peeps.shape)} is not [{nd}, {3 * hidden}]")
    acts = [str(a.decode() if isinstance(a, bytes) else a) for a in c.attrs.get("activations", [])] \
        or list(cell.activations) * nd
    if len(acts) != len(cell.activations) * nd:
        c.fail(f"activations {acts}: expected {len(cell.activations) * nd} ({len(cell.activations)} per direction)")
    unknown = sorted({a for a in acts if a not in _ACTIVATIONS})
    if unknown:
        c.fail(f"activations {', '.join(unknown)} are not supported ({', '.join(_ACTIVATIONS)} are)")
    clip = c.attrs.get("clip")
    streaming = c.imp.streaming
    if streaming and (any(reverse) or t_dim.size != 1):
        c.fail("--streaming runs one time step per run: it needs direction forward and a sequence length of 1 "
               f"(X has {t_dim.text()} steps" + (", direction " + direction if any(reverse) else "") + ")")
    if not streaming and dsl_dim(t_dim) is None and t_dim.expr is not None:
        c.fail(f"the sequence length {t_dim.text()} is neither a number nor one sizevar (a loop bound)")
    lens = _row_lengths(c, seq_lens, t_dim, b_dim)
    outs = list(c.node.output) + [""] * 3
    want_y = bool(outs[0])

    base = sanitize(c.node.name) if c.node.name else op.lower()
    seq = x
    if layout == 1:                                   # [B, T, I] -> [T, B, I]
        seq = c.emit("transpose", [c.var(x, 0)], {"perm": [1, 0, 2]}, dtype, (t_dim, b_dim, x.dims[2]),
                     temp=f"{base}_X_tbi")
    state_dims = (b_dim, Dim(hidden))
    valid = None                                      # 1 where step t < len[b]: [T, B, H]
    if lens is not None:
        steps = np.arange(t_dim.size)[:, None, None] < lens[None, :, None]
        valid = c.imp.new_constant(np.broadcast_to(steps, (t_dim.size, b_dim.size, hidden)).astype(npt),
                                   f"{base}_valid", f"{c.label}: 1 where step t < sequence_lens[b]")
    results = []
    for d, rev in enumerate(reverse):
        tag = f"{base}_{'rev' if rev else 'fwd'}" if nd == 2 else base
        per = len(cell.activations)
        step = _Step(c, tag, dtype, hidden, b_dim, [_ACTIVATIONS[a] for a in acts[d * per:(d + 1) * per]],
                     None if clip is None else float(clip))
        # X @ W^T for every step at once, plus the biases that do not multiply the state
        w_d = c.imp.new_constant(wc[d], f"{tag}_W", f"{c.label} W[{d}]: [{g}*{hidden}, {inputs}]")
        xw = c.emit("matmul", [seq.var if seq is not x else c.var(x, 0), w_d], {"transpose_b": True}, dtype,
                    (t_dim, b_dim, Dim(g * hidden)), temp=f"{tag}_XW")
        wb, rb = bias[d, :g * hidden], bias[d, g * hidden:]
        state_bias = None
        if op == "GRU" and lbr:                       # Rb_h is added inside r * (h R_h^T + Rb_h)
            into_x = wb + np.concatenate([rb[:2 * hidden], np.zeros(hidden, npt)])
            state_bias = rb[2 * hidden:]
        else:
            into_x = wb + rb
        if np.any(into_x):
            bias_var = c.imp.new_constant(into_x.astype(npt), f"{tag}_bias", f"{c.label} Wb + Rb of direction {d}")
            c.emit_inplace("add", [xw.var, bias_var], xw)
        h = step.state("h", h0, d, 5, layout)
        cc = step.state("c", c0, d, 6, layout) if op == "LSTM" else None
        weights = _Weights(c, tag, op, rc[d], hidden, lbr, state_bias, None if peeps is None else peeps[d], npt)
        if streaming:
            xg = c.emit("reshape", [xw.var], {}, dtype, state_dims[:1] + (Dim(g * hidden),), temp=f"{tag}_x")
            step.cell(op, weights, xg.var, h, cc)
            y = h                                     # the one step's Y
        else:
            y = step.loop(op, weights, xw, t_dim, rev, h, cc, want_y, valid)
        results.append((y, h, cc))
        step.finish()
    _outputs(c, results, outs, layout, t_dim, b_dim, hidden, dtype)


def _row_lengths(c: NodeContext, seq_lens: Value | None, t_dim: Dim, b_dim: Dim) -> np.ndarray | None:
    """The constant sequence_lens as [B] integers when some row is shorter than T; None when
    absent or all T (no mask)."""
    if seq_lens is None:
        return None
    lens = c.const_input(seq_lens, "sequence_lens")
    shown = lens.reshape(-1).tolist()
    if lens.shape != (b_dim.size,):
        c.fail(f"sequence_lens {shown} must have one length per batch row ({b_dim.text()})")
    if (t_dim.expr is None or c.imp.streaming) and np.all(lens == t_dim.size):     # streaming: T is 1
        return None
    if c.imp.streaming:
        c.fail(f"--streaming runs one time step per run: sequence_lens {shown} other than the sequence length "
               f"{t_dim.text()} would need a step count across runs")
    if t_dim.expr is not None or b_dim.expr is not None:
        c.fail(f"sequence_lens {shown}: per-row lengths need a static seq_length and batch (X has {t_dim.text()} "
               f"steps, {b_dim.text()} rows)")
    if np.any(lens < 1) or np.any(lens > t_dim.size):
        c.fail(f"sequence_lens {shown}: each length must be in 1..{t_dim.size} (the seq_length)")
    return lens.astype(np.int64)


class _Weights:
    """One direction's recurrent weights as constants: R (or GRU's R_zr and R_h), its bias kept
    apart (GRU with linear_before_reset), the peepholes."""

    def __init__(self, c: NodeContext, tag: str, op: str, r: np.ndarray, hidden: int, lbr: int, state_bias,
                 peeps, npt):
        new = c.imp.new_constant
        self.lbr = lbr
        if op == "GRU" and not lbr:
            self.r_zr = new(r[:2 * hidden], f"{tag}_R_zr", f"{c.label} R of gates z, r")
            self.r_h = new(r[2 * hidden:], f"{tag}_R_h", f"{c.label} R of gate h")
        else:
            self.r = new(r, f"{tag}_R", f"{c.label} R")
        self.state_bias = None
        if state_bias is not None and np.any(state_bias):
            self.state_bias = new(state_bias.astype(npt), f"{tag}_Rb_h", f"{c.label} Rb of gate h")
        self.peeps = None
        if peeps is not None and np.any(peeps):
            self.peeps = [new(peeps[k * hidden:(k + 1) * hidden], f"{tag}_P{n}", f"{c.label} peephole {n}")
                          for k, n in enumerate("iof")]


class _Step:
    """Writes one direction: its state variables and one time step's ops, inside the loop over
    the steps (or alone, streaming)."""

    def __init__(self, c: NodeContext, tag: str, dtype: str, hidden: int, b_dim: Dim, acts: list[str],
                 clip: float | None):
        self.c, self.tag, self.dtype, self.hidden, self.acts, self.clip = c, tag, dtype, hidden, acts, clip
        self.dims = (b_dim, Dim(hidden))
        self.indent = ""
        self.persistent: list[tuple[str, str]] = []      # (state variable, its persistent copy), streaming
        self.temps: dict[str, str] = {}

    # -- writing lines ----------------------------------------------------------------------
    def line(self, code: str) -> None:
        self.c.imp.lines.append((self.indent + code, f"{self.c.label} ({self.c.node.op_type})"))

    def declare(self, name: str, dims, dtype: str | None = None, kind: str = "volatile") -> str:
        var = self.c.imp.fresh(sanitize(f"{self.tag}_{name}"))
        self.c.imp.declare(kind, var, dtype or self.dtype, tuple(dims), None)
        return var

    def temp(self, name: str, width: int) -> str:
        """A [B, width] temporary, declared once per direction."""
        key = f"{name}:{width}"
        if key not in self.temps:
            self.temps[key] = self.declare(name, (self.dims[0], Dim(width)))
        return self.temps[key]

    def op(self, op: str, args: list[str], out: str, **settings) -> str:
        written = ", ".join(args + [f"{k}={setting_text(v)}" for k, v in settings.items()])
        self.line(f"op {op}({written}) >> {out};")
        return out

    def slice(self, src: str, start: int, end: int, name: str) -> str:
        return self.op("slice", [src], self.temp(name, end - start), starts=[start], ends=[end], axes=[1])

    def activate(self, var: str, k: int, out: str | None = None) -> None:
        """The k-th activation of `var` (clip first: ONNX clips the activations' inputs) into `out`
        (default: in place)."""
        if self.clip is not None:
            self.op("clamp", [var], var, min=-self.clip, max=self.clip)
        self.op(self.acts[k], [var], out or var)

    # -- state --------------------------------------------------------------------------------
    def state(self, name: str, init: Value | None, d: int, position: int, axis: int) -> str:
        """The [B, H] state variable `name` at its initial value: direction d's slice of
        initial_h / initial_c along `axis` (0, or 1 with layout 1: [B, D, H]), or zeros (a fresh
        volatile holds zeros at each step's start)."""
        c = self.c
        first = None if init is None or init.const is None else np.take(init.const, d, axis=axis)
        var = self.declare(name, self.dims)
        if c.imp.streaming:
            kept = self.declare(f"{name}_state", self.dims, kind="persistent")
            if init is not None:
                if init.const is None:
                    c.fail(f"--streaming keeps the state across runs from a constant start: "
                           f"{c.node.input[position]} is computed")
                c.imp.tensors[kept] = np.ascontiguousarray(first)
            self.line(f"cache.read {kept} >> {var};")
            self.persistent.append((var, kept))
            return var
        if init is None:
            return var
        if first is not None:
            start = c.imp.new_constant(first, f"{self.tag}_{name}0", f"{c.label} initial {name}[{d}]")
        else:
            one = (Dim(1), *self.dims) if axis == 0 else (self.dims[0], Dim(1), self.dims[1])
            start = self.declare(f"{name}0", one)
            self.op("slice", [c.var(init, position)], start, starts=[d], ends=[d + 1], axes=[axis])
        self.op("reshape", [start], var)
        return var

    def finish(self) -> None:
        for var, kept in self.persistent:
            self.line(f"cache.write {var} >> {kept};")

    # -- the loop -----------------------------------------------------------------------------
    def loop(self, op: str, weights: _Weights, xw: Value, t_dim: Dim, reverse: bool, h: str, cc: str | None,
             want_y: bool, valid: str | None) -> str | None:
        """The steps (t down from T - 1 when `reverse`); with `valid` ([T, B, H], 1 where step t
        is within row b's length) a row past its length keeps its state, and Y there is 0."""
        c = self.c
        g_width = xw.dims[-1].size
        counter = self.declare("t", (), "i32")
        one = c.imp.fresh(sanitize(f"{self.tag}_one"))
        c.imp.decls["constant"].append((f"{one}: i32 @init(1);", "the step counter's increment"))
        if reverse:                                   # t = T - 1, at the run-time T
            steps = self.declare("step_numbers", (t_dim,), "i32")
            self.op("arange", [steps], steps)
            self.op("max_axis", [steps], counter, axes=[0])
        table = None
        if want_y:
            table = c.imp.fresh(sanitize(f"{self.tag}_Y_steps"))
            c.imp.decls["persistent"].append(
                (f"{table}(i): {self.dtype}[{', '.join(d.text() for d in self.dims)}] @table @fixed(i={t_dim.size});",
                 f"{c.label}: h of each step, read as Y after the loop"))
        row = self.declare("XW_t", (Dim(1), self.dims[0], Dim(g_width)))
        xg = self.declare("x", (self.dims[0], Dim(g_width)))
        index = c.imp.fresh("step")
        self.line(f"loop {self.tag}_time ({index} in 0..{t_dim.text()}) {{")
        self.indent = "    "
        self.op("dynamic_slice", [xw.var, counter], row, sizes=[1], axes=[0])
        self.op("reshape", [row], xg)
        if valid is None:
            self.cell(op, weights, xg, h, cc)
        else:
            self.masked_cell(op, weights, xg, h, cc, valid, counter)
        if table is not None:
            self.line(f"cache.write {h} >> {table}[{counter}];")
        self.op("sub" if reverse else "add", [counter, one], counter)
        self.indent = ""
        self.line("}")
        if table is None:
            return None
        y = self.declare("Y", (t_dim, *self.dims))
        self.line(f"cache.read {table}[0..{t_dim.text()}] >> {y};")
        if valid is not None:
            self.op("mul", [y, valid], y)
        return y

    def masked_cell(self, op: str, w: _Weights, xg: str, h: str, cc: str | None, valid: str, counter: str) -> None:
        """`cell`, then the states of the rows whose step `counter` is past their length put back."""
        row = self.declare("valid_t", (Dim(1), *self.dims))
        self.op("dynamic_slice", [valid, counter], row, sizes=[1], axes=[0])
        on = self.op("reshape", [row], self.declare("on", self.dims))
        states = [(s, name) for s, name in ((h, "h"), (cc, "c")) if s is not None]
        kept = [self.op("reshape", [s], self.declare(f"{name}_kept", self.dims)) for s, name in states]  # copies
        self.cell(op, w, xg, h, cc)
        for (s, _), k in zip(states, kept, strict=True):
            self.op("filter", [s, k, on], s)

    # -- one time step ------------------------------------------------------------------------
    def cell(self, op: str, w: _Weights, xg: str, h: str, cc: str | None) -> None:
        """The ops of one step: `xg` is [B, G*H] (x W^T + biases), `h` (and `cc`) updated in place."""
        hid = self.hidden
        if op == "RNN":
            pre = self.op("matmul", [h, w.r], self.temp("pre", hid), transpose_b=True)
            self.op("add", [pre, xg], pre)
            self.activate(pre, 0, h)
        elif op == "GRU":
            zr = self.temp("zr", 2 * hid)
            if w.lbr:
                hr = self.op("matmul", [h, w.r], self.temp("hR", 3 * hid), transpose_b=True)
                self.slice(hr, 0, 2 * hid, "zr")
            else:
                self.op("matmul", [h, w.r_zr], zr, transpose_b=True)
            self.op("add", [zr, self.slice(xg, 0, 2 * hid, "x_zr")], zr)
            self.activate(zr, 0)
            z, r = self.slice(zr, 0, hid, "z"), self.slice(zr, hid, 2 * hid, "r")
            cand = self.temp("cand", hid)
            if w.lbr:                                   # r * (h R_h^T + Rb_h)
                self.slice(hr, 2 * hid, 3 * hid, "cand")
                if w.state_bias is not None:
                    self.op("add", [cand, w.state_bias], cand)
                self.op("mul", [cand, r], cand)
            else:                                       # (r * h) R_h^T
                rh = self.op("mul", [r, h], self.temp("rh", hid))
                self.op("matmul", [rh, w.r_h], cand, transpose_b=True)
            self.op("add", [cand, self.slice(xg, 2 * hid, 3 * hid, "x_h")], cand)
            self.activate(cand, 1)
            # h = (1 - z) * cand + z * h = cand + z * (h - cand)
            diff = self.op("sub", [h, cand], self.temp("diff", hid))
            self.op("mul", [diff, z], diff)
            self.op("add", [cand, diff], h)
        else:                                           # LSTM, gates i, o, f, c
            pre = self.op("matmul", [h, w.r], self.temp("pre", 4 * hid), transpose_b=True)
            self.op("add", [pre, xg], pre)
            i, o, f, g = (self.slice(pre, k * hid, (k + 1) * hid, n) for k, n in enumerate("iofg"))
            if w.peeps is not None:
                peep = self.temp("peep", hid)
                for gate, p in ((i, w.peeps[0]), (f, w.peeps[2])):
                    self.op("mul", [cc, p], peep)
                    self.op("add", [gate, peep], gate)
            self.activate(i, 0)
            self.activate(f, 0)
            self.activate(g, 1)
            self.op("mul", [cc, f], cc)
            self.op("mul", [g, i], g)
            self.op("add", [cc, g], cc)
            if w.peeps is not None:
                self.op("mul", [cc, w.peeps[1]], peep)
                self.op("add", [o, peep], o)
            self.activate(o, 0)
            ch = self.op(self.acts[2], [cc], self.temp("c_act", hid))
            self.op("mul", [o, ch], h)


def _outputs(c: NodeContext, results, outs: list[str], layout: int, t_dim: Dim, b_dim: Dim, hidden: int,
             dtype: str) -> None:
    """Y [T, D, B, H] (layout 1: [B, T, D, H]), Y_h and Y_c [D, B, H] (layout 1: [B, D, H]) from
    each direction's Y [T, B, H] and final states [B, H]."""
    nd = len(results)
    hd = Dim(hidden)
    for k, (name, lead) in enumerate(((outs[0], (t_dim,)), (outs[1], ()), (outs[2], ()))):
        if not name:
            continue
        parts = [r[k] for r in results]
        if k == 2 and parts[0] is None:
            c.fail("output Y_c is an LSTM's only")
        stacked = (*lead, Dim(nd), b_dim, hd)
        final = stacked if layout == 0 else ((b_dim, t_dim, Dim(nd), hd) if lead else (b_dim, Dim(nd), hd))
        perm = [2, 0, 1, 3] if lead else [1, 0, 2]
        if nd == 1:
            whole = c.emit("reshape", [parts[0]], {}, dtype, stacked, out=name if layout == 0 else None,
                           temp=f"{name}_stacked")
        else:
            one = (*lead, Dim(1), b_dim, hd)
            pieces = [c.emit("reshape", [p], {}, dtype, one, temp=f"{name}_{tag}").var
                      for p, tag in zip(parts, ("fwd", "rev"), strict=True)]
            whole = c.emit("concat", pieces, {"axis": len(lead)}, dtype, stacked,
                           out=name if layout == 0 else None, temp=f"{name}_stacked")
        if layout == 1:
            c.emit("transpose", [whole.var], {"perm": perm}, dtype, final, out=name)
