"""The element-wise expression table (openinfer/targets/elementwise.py) is the one list of
element-wise ops: the registry's element-wise ops, each scalar family's registered emitter (C,
GLSL), every op rendering in both, and the x86 vector set derived from it. Adding an op is one
table entry: a throwaway entry renders in C, GLSL and the vector intrinsics with no other edit."""

from __future__ import annotations

import math

import pytest

from openinfer.dtypes import lookup
from openinfer.ops import all_ops, get
from openinfer.ops.registry import cast_allowed
from openinfer.ops.types import TensorType
from openinfer.synth.program import KernelRequest
from openinfer.targets import devices
from openinfer.targets.base import target_for
from openinfer.targets.c.kernels import elementwise as c_elementwise
from openinfer.targets.c.kernels import registry as c_registry
from openinfer.targets.c.renderer import CRenderer
from openinfer.targets.elementwise import OPS, Lang, NotExpressible, Op
from openinfer.targets.vulkan.glsl import elementwise as glsl_elementwise
from openinfer.targets.vulkan.glsl import registry as glsl_registry
from openinfer.targets.vulkan.glsl.types import Caps, KernelCtx
from openinfer.targets.x86 import elementwise as x86_elementwise

F32 = lookup("f32")
PORTABLE = CRenderer.for_kernels(devices.load("x86_64-generic"))
#: the ops the x86 vector kernels computed before the table existed (templates/x86/chain.c.j2's
#: own list of ops), and the later table entries whose formulas render in intrinsics; the table
#: must keep deriving exactly these
VECTOR_OPS = {"add", "sub", "mul", "div", "fma", "min", "max", "neg", "abs", "recip", "sqrt", "rsqrt", "relu", "clamp",
              "exp", "tanh", "erf", "sigmoid", "silu", "gelu", "softsign", "hard_sigmoid", "hard_swish", "leaky_relu"}
#: settings the ops need to be applied at all
_ATTRS = {"shl": {"bits": 3}, "shr": {"bits": 2}, "fill": {"value": 0}, "arange": {"start": 2, "step": 3, "axis": 0}}


def _request(op: str, dtype: str, **attrs) -> KernelRequest:
    t = lookup(dtype)
    spec = get(op)
    shape = (3, 5)
    types = [TensorType(t, shape)] * len(spec.inputs)
    given = {**_ATTRS.get(op, {}), **attrs}
    if op == "cast" and "to" not in given:
        given["to"] = next(d for d in (F32, lookup("i32"), lookup("bool")) if d != t and cast_allowed(t, d))
    inf = spec.infer(types, given)
    # (is_finite's element-wise form: one bool per element, not the all-of-x 0-d one)
    out = TensorType(inf.out_dtype, shape if op == "is_finite" else inf.out_shape)
    return KernelRequest(op, "normal", tuple(types), out, tuple(sorted(inf.attrs.items())), (), None, False)


def test_the_table_is_the_ops_each_scalar_family_registers():
    """Every table op has its arity in the registry; the registry's element-wise ops are all in the
    table (plus arange and is_finite, whose kernels are element-wise too: is_finite's all-of-x form
    and arange's count); the C and the GLSL families register their element-wise emitter for
    exactly the table's ops."""
    registry_ew = {op.name for op in all_ops() if op.elementwise}
    assert registry_ew <= set(OPS)
    assert set(OPS) - registry_ew == {"arange", "is_finite"}
    for name, op in OPS.items():
        assert op.arity == len(get(name).inputs), name
        assert op.doc, name
    c_ops = {op for op, emit in c_registry._EMITTERS.items() if emit is c_elementwise.emit}
    glsl_ops = {op for op, emit in glsl_registry._EMITTERS.items() if emit is glsl_elementwise.emit}
    assert c_ops == set(OPS) == glsl_ops


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_table_op_renders_in_c_and_glsl(op):
    """For every dtype the op takes: the C kernel and the GLSL kernel render, and each kernel's
    comment carries the table's doc or the language's note for the op."""
    for t in get(op).dtypes:
        req = _request(op, t.name)
        c_text = c_registry.emit_kernel(req, "k", PORTABLE).definition
        assert f": {c_elementwise._NOTES.get(op, OPS[op].doc)}" in c_text, (op, t.name)
        body = glsl_registry.emitter(op)(req, KernelCtx(req, Caps()))
        assert body.value and body.doc.startswith(f"{op}: {glsl_elementwise._NOTES.get(op, OPS[op].doc)}"), \
            (op, t.name)


def test_the_vector_set_is_derived_from_the_table():
    """The x86 kernels vectorise an f32 op where its formula renders in intrinsics or it has a
    vector delta (no list of ops of their own): the same ops as before the table."""
    dev = devices.load("x86_64-avx2")
    renderer = target_for(dev).renderer_class.for_kernels(dev)
    vectorised = set()
    for op in OPS:
        if F32 not in get(op).dtypes:
            continue
        req = _request(op, "f32")
        if "oiv" in renderer.kernel(req, "k").definition:
            vectorised.add(op)
    assert vectorised == VECTOR_OPS
    assert set(x86_elementwise._DELTAS) <= set(OPS)


def test_vector_constants_are_the_attributes_a_step_reads():
    """A vector step's float constants (k<step>_<attr>) are the attributes its expression reads:
    no list of attributes per op beside the table."""
    def consts(req: KernelRequest) -> tuple[str, ...]:
        step = x86_elementwise.vector_step("_mm256", req, 0, [f"x{i}" for i in range(len(req.inputs))])
        return tuple(c.name for c in step.consts)

    assert consts(_request("relu", "f32")) == ("k0_alpha",)        # the default clamps are infinite: none
    assert consts(_request("relu", "f32", clamp_max=6.0, clamp_min=-1.0)) == ("k0_alpha", "k0_clamp_max",
                                                                             "k0_clamp_min")
    assert consts(_request("clamp", "f32", min=-1.0, max=1.0)) == ("k0_min", "k0_max")
    assert consts(_request("div", "f32")) == consts(_request("recip", "f32")) == ("k0_div_by_zero_mask",)
    assert consts(_request("gelu", "f32", approximate="tanh")) == ()


def _hardsigmoid(lang: Lang, x: str) -> str:
    return lang.maximum(lang.lit(0), lang.minimum(lang.lit(1), lang.arith("+", lang.arith("/", x, lang.lit(6)),
                                                                         lang.lit(0.5))))


def _log1pexp(lang: Lang, x: str) -> str:
    return lang.call("log", lang.arith("+", lang.lit(1), lang.call("exp", x)))


def _rendered(op: str) -> tuple[str, str, str | None]:
    """The op's expression in C, GLSL and AVX2 intrinsics (None: no vector form), each as the
    family's own dispatch renders it: the table's entry, no delta anywhere."""
    req = KernelRequest(op, "normal", (TensorType(F32, (4,)),), TensorType(F32, (4,)), (), (), None, False)
    _, c_value, c_type = c_elementwise.expression(c_elementwise.Ctx(req, F32, F32, "float", ("x0",)))
    k = KernelCtx(req, Caps())
    _, glsl_value, glsl_type = glsl_elementwise.expression(glsl_elementwise.Ew(req, k, F32, F32, "float", ("x0",)))
    assert c_type == glsl_type == "float"
    step = x86_elementwise.vector_step("_mm256", req, 0, ["x0"])
    return c_value, glsl_value, step and step.value


def test_adding_an_op_takes_one_table_entry(monkeypatch):
    """A throwaway entry, hardsigmoid = max(0, min(1, x / 6 + 0.5)), written once against Lang:
    added to the table alone, it renders in C, GLSL and the vector intrinsics. log1pexp =
    log(1 + exp(x)) renders in C and GLSL, and the vector kernels, which have no vector log, leave
    it to the portable kernel."""
    monkeypatch.setitem(OPS, "hardsigmoid", Op("hardsigmoid", 1, "max(0, min(1, x / 6 + 0.5))", _hardsigmoid))
    monkeypatch.setitem(OPS, "log1pexp", Op("log1pexp", 1, "log(1 + exp(x))", _log1pexp))
    assert _rendered("hardsigmoid") == (
        "oi_maxf(0.0f, oi_minf(1.0f, x0 / 6.0f + 0.5f))",
        "oi_maxf(0.0, oi_minf(1.0, x0 / 6.0 + uintBitsToFloat(0x3f000000u)))",     # (GLSL: exact f32 bits)
        "oiv_ieee_max(zero, oiv_ieee_min(one, _mm256_add_ps(_mm256_div_ps(x0, _mm256_set1_ps(6.0f)), half)))")
    assert _rendered("log1pexp") == ("logf(1.0f + expf(x0))", "oi_logf(1.0 + oi_expf(x0))", None)


def test_a_primitive_the_vectors_lack_is_not_expressible():
    """The vector language refuses what it has no form for (the caller falls back), and a negative
    zero constant is not the template's `zero`."""
    req = KernelRequest("neg", "normal", (TensorType(F32, (4,)),), TensorType(F32, (4,)), (), (), None, False)
    lang = x86_elementwise.VectorLang("_mm512", req, 0)
    for primitive in (lambda: lang.bitwise("&", "a", "b"), lambda: lang.call("log", "a"),
                      lambda: lang.compare("!=", "a", "b"), lambda: lang.flag("c"), lambda: lang.int_const(0)):
        with pytest.raises(NotExpressible):
            primitive()
    assert lang.lit(-0.0) == "_mm512_set1_ps(-0.0f)" and lang.lit(0.5) == "half"
    assert lang.lit(math.sqrt(2)) == "_mm512_set1_ps(1.4142135f)"
