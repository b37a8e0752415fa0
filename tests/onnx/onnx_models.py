"""Small ONNX models built with onnx.helper for the importer tests (random weights, fixed seeds)."""

from __future__ import annotations

import numpy as np


def _init(rng, name: str, *shape, scale: float = 0.5):
    from onnx import numpy_helper

    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _model(nodes, name, inputs, outputs, initializers, opset: int = 17):
    import onnx
    from onnx import helper

    model = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, initializers),
                              opset_imports=[helper.make_opsetid("", opset)], producer_name="openinfer-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def mlp():
    """input.1[batch, 8] -> Gemm(transB) -> Relu -> Gemm(transB) -> Softmax, PyTorch-export style names."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(11)
    nodes = [
        helper.make_node("Gemm", ["input.1", "fc1.weight", "fc1.bias"], ["/fc1/Gemm_output_0"], name="/fc1/Gemm",
                         transB=1),
        helper.make_node("Relu", ["/fc1/Gemm_output_0"], ["/act/Relu_output_0"], name="/act/Relu"),
        helper.make_node("Gemm", ["/act/Relu_output_0", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm",
                         transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="/softmax/Softmax", axis=-1),
    ]
    return _model(nodes, "mlp", [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["batch", 8])],
                  [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 5])],
                  [_init(rng, "fc1.weight", 16, 8), _init(rng, "fc1.bias", 16), _init(rng, "fc2.weight", 5, 16),
                   _init(rng, "fc2.bias", 5)])


def cnn():
    """image[N, 3, 16, 16] -> Conv+BatchNormalization+Relu -> MaxPool -> Conv -> GlobalAveragePool ->
    Flatten -> Gemm: logits[N, 10]."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(12)
    bn = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("bn.weight", rng.uniform(0.5, 1.5, 8)), ("bn.bias", rng.standard_normal(8) * 0.1),
        ("bn.running_mean", rng.standard_normal(8) * 0.1), ("bn.running_var", rng.uniform(0.5, 2.0, 8)))]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["c1"], name="/conv1/Conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["b1"], name="/bn1/BatchNormalization", epsilon=1e-5),
        helper.make_node("Relu", ["b1"], ["r1"], name="/relu1/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="/conv2/Conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/flatten/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    return _model(nodes, "cnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 16, 16])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                  [_init(rng, "conv1.weight", 8, 3, 3, 3), _init(rng, "conv1.bias", 8, scale=0.1), *bn,
                   _init(rng, "conv2.weight", 16, 8, 3, 3, scale=0.2), _init(rng, "conv2.bias", 16, scale=0.1),
                   _init(rng, "fc.weight", 10, 16), _init(rng, "fc.bias", 10, scale=0.1)])


def imported_executors(model, tmp_path, archs=("x86_64-generic",), name: str = "m"):
    """`model` (a ModelProto) imported and written to `tmp_path`: (the ImportedModel, [an executor of
    the reference, then one of the generated C built for each of `archs`])."""
    import openinfer as oi
    from openinfer.sim import Simulator

    imported = oi.import_onnx(model, name=name)
    graph, oinf = imported.write(tmp_path)
    executors = [oi.Reference(oi.ModelLoader.open(oinf), oi.load_graph(graph)).make_executor()]
    executors += [Simulator(oi.ModelLoader.open(oinf), oi.load_graph(graph), arch=a, sizevars={}).make_executor()
                  for a in archs]
    return imported, executors
