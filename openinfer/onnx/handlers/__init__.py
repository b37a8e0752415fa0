"""The ONNX op handlers, a module per op family. Each handler is a function of a
`context.NodeContext` registered for its op types by `context.handler`, which fills
`context.SUPPORTED_OPS`: importing this package registers them all (the importer does, at its top).
"""

from . import (  # noqa: F401
    activations,
    constants,
    control,
    detection,
    einsum,
    elementwise,
    layout,
    nn,
    quant,
    recurrent,
    reduce,
    resample,
    transformer,
)
