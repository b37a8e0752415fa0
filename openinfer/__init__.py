"""OpenInfer: an ahead-of-time toolchain from a graph DSL and a `.oinf` model to C / GLSL source.

The public names below are stable (DESIGN.md §8); everything else is internal.
"""

__version__ = "0.1.0"

from .dsl import graph, load_graph  # noqa: E402
from .errors import (  # noqa: E402
    BindError,
    BuildError,
    DeviceError,
    DslError,
    ExecutionError,
    OinfError,
    OnnxImportError,
    OpenInferError,
    SimulationError,
    SynthesisError,
)
from .oinf import (  # noqa: E402
    Bitset,
    Model,
    ModelLoader,
    QuantParams,
    ScalarValue,
    SizeVar,
    TensorInfo,
    TensorSpec,
    UninitializedTensor,
    dataclass_to_oinf,
    write_dataclass,
    write_oinf,
)
from .onnx import import_onnx  # noqa: E402
from .reference.executor import Reference  # noqa: E402
from .sim import Simulator  # noqa: E402
from .synthesizer import Synthesizer  # noqa: E402

__all__ = [
    "__version__",
    "OpenInferError", "OinfError", "DslError", "BindError", "ExecutionError", "SynthesisError",
    "DeviceError", "BuildError", "SimulationError", "OnnxImportError",
    "graph", "load_graph",
    "ModelLoader", "Model", "TensorInfo", "write_oinf", "dataclass_to_oinf", "write_dataclass",
    "TensorSpec", "UninitializedTensor", "ScalarValue", "SizeVar", "Bitset", "QuantParams",
    "Reference", "Simulator", "Synthesizer",
    "import_onnx",
]
