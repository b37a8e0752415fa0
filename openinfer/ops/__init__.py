"""The op registry (ops.yaml): which ops exist, their attributes, type and shape rules, and docs.

    from openinfer.ops import get, TensorType
    inf = get("add").infer([TensorType(F32, (2, 3)), TensorType(F32, (3,))], {}, None)

The schema only: the NumPy kernels that compute the ops live with the reference interpreter
(`openinfer.reference.kernels.run_kernel(get("add"), [a, b], inf.attrs, inf)`).
"""

from .errors import OpRuntimeError, OpTypeError
from .registry import AttrSpec, Inference, InputSpec, OpSpec, OutputRule, all_ops, get
from .types import TensorType

__all__ = ["AttrSpec", "Inference", "InputSpec", "OpRuntimeError", "OpSpec", "OpTypeError", "OutputRule",
           "TensorType", "all_ops", "get"]
