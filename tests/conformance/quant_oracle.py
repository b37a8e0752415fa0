"""The conformance oracle of the integer-only int8 ops (TFLite's int8 kernels), element by element.

Written from TFLite's reference C (tensorflow/lite/kernels/internal/reference/, common.h and
gemmlowp's fixedpoint.h) as scalar Python integer arithmetic, independently of the vectorised
NumPy reference (openinfer/reference/kernels/quantized.py): C's truncating division and wrapping
int32 are spelled out per scalar. Bit-exactness with TFLite itself is checked against LiteRT's
interpreter on whole models (tests/tflite_front/).
"""

from __future__ import annotations

from .oracle import Arr, Ctx, _groups, _ints, _norm_axes, _pads, bindex, bshape, build, indices

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def wrap32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def c_div(a: int, b: int) -> int:
    """C's integer division: truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def srdhm(a: int, b: int) -> int:
    if a == b == I32_MIN:
        return I32_MAX
    ab = a * b
    return c_div(ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30)), 1 << 31)


def rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    return (x >> e) + (1 if (x & mask) > (mask >> 1) + (1 if x < 0 else 0) else 0)


def requant(x: int, m: int, s: int) -> int:
    return rdbpot(srdhm(wrap32(x << max(s, 0)), m), max(-s, 0))


def clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def c_round(v: float) -> int:
    """C's round(): half away from zero."""
    whole = int(v)
    frac = v - whole
    return whole + (1 if frac >= 0.5 else -1 if frac <= -0.5 else 0)


def _qconv(xs: list[Arr], c: Ctx) -> Arr:
    x, w, mult, shift = xs[:4]
    stride, dil = _ints(c.attr("stride", 1), 2), _ints(c.attr("dilation", 1), 2)
    pad = _pads(c.attr("padding", 0), 2)
    groups = c.attr("groups", 1)
    n, h, wd, cin = x.shape
    o, kh, kw, cg = w.shape
    og = o // groups
    xz, yz = c.attr("x_zero", 0), c.attr("y_zero", 0)
    lo, hi = c.attr("act_min", -128), c.attr("act_max", 127)

    def at(idx):
        b, oy, ox, oc = idx
        acc = xs[4][(oc,)] if len(xs) > 4 else 0
        for ky in range(kh):
            for kx in range(kw):
                iy, ix = oy * stride[0] + ky * dil[0] - pad[0], ox * stride[1] + kx * dil[1] - pad[1]
                if 0 <= iy < h and 0 <= ix < wd:
                    for ci in range(cg):
                        acc += (x[(b, iy, ix, (oc // og) * cg + ci)] - xz) * w[(oc, ky, kx, ci)]
        return clamp(yz + requant(wrap32(acc), mult[(oc,)], shift[(oc,)]), lo, hi)
    sp = [(x.shape[1 + i] + pad[i] + pad[2 + i] - dil[i] * ((kh, kw)[i] - 1) - 1) // stride[i] + 1 for i in range(2)]
    return build((n, *sp, o), at)


def _qlinear(xs: list[Arr], c: Ctx) -> Arr:
    x, w, scale = xs[:3]
    nout, k = w.shape
    xz, wz, yz = c.attr("x_zero", 0), c.attr("w_zero", 0), c.attr("y_zero", 0)

    def at(idx):
        row, j = idx[:-1], idx[-1]
        acc = xs[3][(j,)] if len(xs) > 3 else 0
        acc += sum((x[(*row, i)] - xz) * (w[(j, i)] - wz) for i in range(k))
        scaled = clamp(c_round(float(wrap32(acc)) * scale[(j,)]), I32_MIN, I32_MAX)
        return clamp(yz + scaled, c.attr("act_min", -128), c.attr("act_max", 127))
    return build((*x.shape[:-1], nout), at)


def _qpool(is_max: bool):
    def oracle(xs: list[Arr], c: Ctx) -> Arr:
        x = xs[0]
        kern, stride = _ints(c.attrs["kernel"], 2), _ints(c.attr("stride", 1), 2)
        pad = _pads(c.attr("padding", 0), 2)
        sp = [(x.shape[1 + i] + pad[i] + pad[2 + i] - kern[i]) // stride[i] + 1 for i in range(2)]

        def at(idx):
            b, oy, ox, ch = idx
            taps = [(oy * stride[0] + ky - pad[0], ox * stride[1] + kx - pad[1]) for ky, kx in indices(kern)]
            vals = [x[(b, iy, ix, ch)] for iy, ix in taps if 0 <= iy < x.shape[1] and 0 <= ix < x.shape[2]]
            if is_max:
                v = max(vals)
            else:
                total, count = sum(vals), len(vals)
                v = c_div(total + count // 2, count) if total > 0 else c_div(total - count // 2, count)
            return clamp(v, c.attr("act_min", -128), c.attr("act_max", 127))
        return build((x.shape[0], *sp, x.shape[3]), at)
    return oracle


def _qadd(xs: list[Arr], c: Ctx) -> Arr:
    a, b = xs
    shape = bshape(a.shape, b.shape)
    ls = c.attr("left_shift", 20)

    def scaled(v: int, p: str) -> int:
        return rdbpot(srdhm(wrap32((v - c.attr(f"{p}_zero", 0)) << ls), c.attrs[f"{p}_multiplier"]),
                      -c.attrs[f"{p}_shift"])

    def at(idx):
        total = wrap32(scaled(a[bindex(idx, a.shape)], "a") + scaled(b[bindex(idx, b.shape)], "b"))
        y = c.attr("y_zero", 0) + rdbpot(srdhm(total, c.attrs["y_multiplier"]), -c.attrs["y_shift"])
        return clamp(y, c.attr("act_min", -128), c.attr("act_max", 127))
    return build(shape, at)


def _qsub(xs: list[Arr], c: Ctx) -> Arr:
    """SubElementwise: the rescaled inputs' difference."""
    a, b = xs
    ls = c.attr("left_shift", 20)

    def scaled(v: int, p: str) -> int:
        shifted = wrap32((v - c.attr(f"{p}_zero", 0)) * (1 << ls))
        return rdbpot(srdhm(shifted, c.attrs[f"{p}_multiplier"]), -c.attrs[f"{p}_shift"])

    def at(idx):
        raw_sub = wrap32(scaled(a[bindex(idx, a.shape)], "a") - scaled(b[bindex(idx, b.shape)], "b"))
        raw_output = rdbpot(srdhm(raw_sub, c.attrs["y_multiplier"]), -c.attrs["y_shift"]) + c.attr("y_zero", 0)
        return clamp(raw_output, c.attr("act_min", -128), c.attr("act_max", 127))
    return build(bshape(a.shape, b.shape), at)


def _qmul(xs: list[Arr], c: Ctx) -> Arr:
    """MulElementwise: (a + input1_offset) * (b + input2_offset), requantized, offset, clamped."""
    a, b = xs

    def at(idx):
        product = (a[bindex(idx, a.shape)] - c.attr("a_zero", 0)) * (b[bindex(idx, b.shape)] - c.attr("b_zero", 0))
        y = c.attr("y_zero", 0) + requant(product, c.attrs["multiplier"], c.attrs["shift"])
        return clamp(y, c.attr("act_min", -128), c.attr("act_max", 127))
    return build(bshape(a.shape, b.shape), at)


def _qmean(xs: list[Arr], c: Ctx) -> Arr:
    """QuantizedMeanOrSum (compute_sum false): the multiplier readapted to 1 / num_elements_in_axis
    (shift = 63 - CountLeadingZeros(n), at most 32 and 31 + output_shift), then each sum less
    input_zero_point * n requantized."""
    x = xs[0]
    shape, groups = _groups(x, _norm_axes(c.attrs["axes"], len(x.shape)), c.attr("keepdims", False))
    n = len(groups[0])
    output_shift = c.attrs["shift"]
    shift = min(63 - (64 - n.bit_length()), 32, 31 + output_shift)
    output_multiplier = c_div(c.attrs["multiplier"] << shift, n)
    output_shift -= shift
    out = []
    for vals in groups:
        shifted_sum = wrap32(sum(vals) - c.attr("x_zero", 0) * n)
        out.append(clamp(requant(shifted_sum, output_multiplier, output_shift) + c.attr("y_zero", 0), -128, 127))
    return Arr(shape, out)


def _exp_quarter(a: int) -> int:
    x = wrap32(a + (1 << 28))
    x2 = srdhm(x, x)
    x3, x4 = srdhm(x2, x), srdhm(x2, x2)
    poly = rdbpot(wrap32(srdhm(wrap32(rdbpot(x4, 2) + x3), 715827883) + x2), 1)
    return wrap32(1895147668 + srdhm(1895147668, wrap32(x + poly)))


def _sat_shl(x: int, e: int) -> int:
    return clamp(x << e, I32_MIN, I32_MAX)


def exp_q5(a: int) -> int:
    """gemmlowp's exp_on_negative_values<5 integer bits>."""
    mod = wrap32((a & ((1 << 24) - 1)) - (1 << 24))
    result = _exp_quarter(_sat_shl(mod, 5))
    remainder = wrap32(mod - a)
    for bit, factor in zip(range(24, 31), (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242),
                           strict=True):
        if remainder & (1 << bit):
            result = srdhm(result, factor)
    return I32_MAX if a == 0 else result


def reciprocal(x: int) -> tuple[int, int]:
    """TFLite's GetReciprocal(x, 12): (1 / (1 + fraction) in Q0.31, num_bits_over_unit)."""
    headroom_plus_one = 32 - x.bit_length()
    a = wrap32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    s = a + I32_MAX
    half = c_div(s + (1 if s >= 0 else -1), 2)
    r = wrap32(1515870810 + srdhm(half, -1010580540))
    for _ in range(3):
        r = wrap32(r + _sat_shl(srdhm(r, wrap32((1 << 29) - srdhm(half, r))), 2))
    return _sat_shl(r, 1), 12 - headroom_plus_one


def _qsoftmax(xs: list[Arr], c: Ctx) -> Arr:
    x = xs[0]
    depth = x.shape[-1]
    m, ls, dmin = c.attrs["multiplier"], c.attrs["left_shift"], c.attrs["diff_min"]
    out = []
    for r in range(len(x.flat) // depth):
        row = x.flat[r * depth:(r + 1) * depth]
        top = max(row)
        exps = [exp_q5(srdhm(wrap32((v - top) << ls), m)) if v - top >= dmin else None for v in row]
        total = 0
        for e in exps:
            if e is not None:
                total = wrap32(total + rdbpot(e, 12))
        scale, over = reciprocal(total)
        out += [-128 if e is None else clamp(rdbpot(srdhm(scale, e), over + 23) - 128, -128, 127) for e in exps]
    return Arr(x.shape, out)

def _qlut(xs: list[Arr], c: Ctx) -> Arr:
    table = list(xs[1].flat)
    return Arr(xs[0].shape, [table[v + 128] for v in xs[0].flat])


def _srdhm16(a: int, b: int) -> int:
    if a == b == -(1 << 15):
        return (1 << 15) - 1
    ab = a * b
    return c_div(ab + ((1 << 14) if ab >= 0 else 1 - (1 << 14)), 1 << 15)


def _sat16(v: int) -> int:
    return clamp(v, -(1 << 15), (1 << 15) - 1)


def _qhard_swish(xs: list[Arr], c: Ctx) -> Arr:
    """reference_ops::HardSwish (hard_swish.h), one int16 step at a time."""
    a = c.attrs
    e = a["reluish_shift"]

    def one(x: int) -> int:
        hires = (x - c.attr("x_zero", 0)) * 128
        preshift = _srdhm16(hires, a["output_multiplier"])
        r = _sat16(hires << (e - 1)) if e > 0 else hires
        r = _srdhm16(r, a["reluish_multiplier"])
        r = _sat16(r << 1) if e > 0 else rdbpot(r, -e) if e < 0 else r
        r = (r + (1 << 15)) >> 1
        product = (1 << 15) - 1 if r == preshift == -(1 << 15) else c_div(r * preshift, 1 << 15)
        return clamp(rdbpot(product, -a["output_shift"]) + c.attr("y_zero", 0), -128, 127)
    return Arr(xs[0].shape, [one(v) for v in xs[0].flat])



def _quantize(xs: list[Arr], c: Ctx) -> Arr:
    import numpy as np
    scale, zero = np.float32(c.attrs["scale"]), c.attr("zero", 0)

    def one(v: float) -> int:
        q = float(np.float32(v) / scale)      # the division in f32
        if q != q:
            return clamp(zero, -128, 127)
        if abs(q) > 1e6:
            return -128 if q < 0 else 127
        return clamp(c_round(q) + zero, -128, 127)
    return Arr(xs[0].shape, [one(v) for v in xs[0].flat])


def _dequantize(xs: list[Arr], c: Ctx) -> Arr:
    import numpy as np
    scale = float(np.float32(c.attrs["scale"]))
    return Arr(xs[0].shape, [float(np.float32(scale * (v - c.attr("zero", 0)))) for v in xs[0].flat])


def _requantize(xs: list[Arr], c: Ctx) -> Arr:
    """Requantize, and ReluX: clamped to [act_min, act_max]."""
    lo, hi = c.attr("act_min", -128), c.attr("act_max", 127)
    return Arr(xs[0].shape, [clamp(c.attr("y_zero", 0) + requant(v - c.attr("x_zero", 0), c.attrs["multiplier"],
                                                                  c.attrs["shift"]), lo, hi) for v in xs[0].flat])


QUANT = {"qconv2d": _qconv, "qlinear": _qlinear, "qavg_pool2d": _qpool(False), "qmax_pool2d": _qpool(True),
         "qadd": _qadd, "qsub": _qsub, "qmul": _qmul, "qmean": _qmean, "qsoftmax": _qsoftmax, "qlut": _qlut,
         "qhard_swish": _qhard_swish, "quantize": _quantize, "dequantize": _dequantize, "requantize": _requantize}
