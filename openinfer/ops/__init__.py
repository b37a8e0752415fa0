"""The op registry (ops.yaml) and the NumPy reference kernels.

    from openinfer.ops import get, TensorType
    inf = get("add").infer([TensorType(F32, (2, 3)), TensorType(F32, (3,))], {}, None)
    y = get("add").reference([a, b], inf.attrs, inf)
"""

from .errors import OpRuntimeError, OpTypeError
from .registry import AttrSpec, Inference, InputSpec, OpSpec, OutputRule, all_ops, get
from .types import TensorType

__all__ = ["AttrSpec", "Inference", "InputSpec", "OpRuntimeError", "OpSpec", "OpTypeError", "OutputRule",
           "TensorType", "all_ops", "get"]
