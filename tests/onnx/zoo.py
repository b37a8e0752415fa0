"""The ONNX "light" model zoo inside the onnx wheel, with real-looking weights.

The wheel's `onnx/backend/test/data/light/light_*.onnx` are nine ImageNet CNNs whose weights are
`ConstantOfShape` nodes of 0.02 (and a few small trained tensors): every output is flat, so a wrong
kernel still matches. `randomized` rebuilds a model from the wheel's file with every float weight
an initializer of random values (fixed seed) scaled so that the activations keep their spread
through 50+ layers and the logits depend on the input:

- Conv and Gemm weights He-uniform with the gain `_GAIN`, each output's weights centred (summing
  to 0, so that the mean a ReLU adds is not passed on and piled up layer after layer); biases small;
- BatchNormalization: scale around 1, mean around 0, variance positive around 1, bias small; scale
  around 0.2 for a residual branch's last norm (its value goes straight into a `Sum`/`Add` with a
  value no norm made: the identity shortcut), as after training, so that ResNet's and ShuffleNet's
  residual streams do not double their variance at every block;
- the per-channel scale and bias DenseNet and Inception v2 apply after their norms (`Mul`/`Add` by
  an unsqueezed constant): around 1 and around 0.

The final Softmax (where there is one) is removed and its input, the logits, made the graph output:
probabilities near 1/1000 would hide errors in the logits. `image` draws inputs for them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: the models, by the name in light_<name>.onnx
MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
          "vgg19", "zfnet512")

#: fan_in times the variance of a weight. A ReLU of a centred input of variance v outputs variance
#: (1/2 - 1/(2 pi)) v = 0.3408 v, the rest of its mean square being its mean, which the next
#: layer's centred weights cancel; 1 / 0.3408 keeps the variance from layer to layer. (He's 2 keeps
#: the mean square: with it the spread of ResNet-50's activations, what depends on the input, shrank
#: 100-fold through the network while the per-channel constants stayed, and every input got the
#: same class.)
_GAIN = 2.934


def light_dir() -> Path:
    import onnx

    return Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"


def _fan_in(shape: tuple[int, ...], transposed: bool) -> int:
    """What each output of a weight sums over: [O, C/g, kh, kw] for a conv, [N, K] (transB) or
    [K, N] for Gemm."""
    if len(shape) == 2:
        return shape[1] if transposed else shape[0]
    return int(np.prod(shape[1:]))


def _values(rng, shape: tuple[int, ...], consumer, position: int, users: dict, inits: dict) -> np.ndarray:
    """Random f32 values for input `position` of node `consumer`, scaled by what that input is."""
    from onnx import numpy_helper

    op = consumer.op_type
    if op == "Reshape" and position == 0:                          # a weight reshaped for its user
        target = [d or shape[k] for k, d in enumerate(numpy_helper.to_array(inits[consumer.input[1]]))]
        ((user, at),) = [(u, list(u.input).index(consumer.output[0])) for u in users[consumer.output[0]]]
        return _values(rng, np.empty(shape).reshape(target).shape, user, at, users, inits).reshape(shape)
    if op in ("Conv", "Gemm") and position == 1:
        transposed = op == "Gemm" and any(a.name == "transB" and a.i for a in consumer.attribute)
        bound = np.float32(np.sqrt(3.0 * _GAIN / _fan_in(shape, transposed)))
        w = rng.random(shape, dtype=np.float32) * (2 * bound) - bound
        axes = tuple(range(1, len(shape))) if transposed or len(shape) > 2 else (0,)
        return w - w.mean(axis=axes, keepdims=True, dtype=np.float64).astype(np.float32)
    if op in ("Conv", "Gemm"):                                     # bias
        return rng.normal(0.0, 0.01, shape).astype(np.float32)
    if op == "BatchNormalization":
        if position == 1:                                          # scale
            branch_end = any(u.op_type in ("Sum", "Add") and all(i in users["computed"] for i in u.input)
                             and not all(i in users["normalised"] for i in u.input)
                             for u in users[consumer.output[0]])
            return rng.uniform(0.1, 0.3, shape).astype(np.float32) if branch_end else \
                rng.uniform(0.8, 1.2, shape).astype(np.float32)
        if position == 4:                                          # variance
            return rng.uniform(0.5, 1.5, shape).astype(np.float32)
        return rng.normal(0.0, 0.1, shape).astype(np.float32)      # bias, mean
    if op == "Unsqueeze":                                          # a per-channel scale or bias after a norm
        (after,) = users[consumer.output[0]]
        return (rng.uniform(0.8, 1.2, shape) if after.op_type == "Mul" else rng.normal(0.0, 0.1, shape)
                ).astype(np.float32)
    raise AssertionError(f"no rule for input {position} of {op} ({consumer.name or consumer.output[0]})")


def randomized(name: str, seed: int = 0):
    """light_<name>.onnx with random weights and the logits as its output, a ModelProto (checked
    by onnxruntime when it loads it). Every float weight is drawn: the ConstantOfShape ones and
    the few small tensors the wheel kept (some norms' statistics and biases, trained for the
    original weights and 0-255 pixels: Inception v2's first norm divides by ~60, ShuffleNet's
    variances of 1e-14 multiply by ~300)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(light_dir() / f"light_{name}.onnx"))
    graph = model.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in graph.initializer}
    users: dict = {"computed": {o for n in graph.node if n.op_type != "ConstantOfShape" for o in n.output},
                   "normalised": {n.output[0] for n in graph.node if n.op_type == "BatchNormalization"}}
    for node in graph.node:
        for i in node.input:
            users.setdefault(i, []).append(node)

    def draw(value: str, shape: tuple[int, ...]):
        ((consumer, position),) = [(u, list(u.input).index(value)) for u in users[value]]
        return numpy_helper.from_array(_values(rng, shape, consumer, position, users, inits), value)

    drawn, shapes = {}, set()
    for node in list(graph.node):
        if node.op_type == "ConstantOfShape":
            shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
            drawn[node.output[0]] = draw(node.output[0], shape)
            shapes.add(node.input[0])
            graph.node.remove(node)
    for t in graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and t.name in users:
            drawn[t.name] = draw(t.name, tuple(t.dims))
    keep = [t for t in graph.initializer if t.name not in shapes and t.name not in drawn]
    del graph.initializer[:]
    graph.initializer.extend(keep + list(drawn.values()))
    # (IR version 3: every initializer is also a graph input)
    inputs = [i for i in graph.input if i.name not in shapes]
    listed = {i.name for i in inputs}
    inputs += [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, t.dims) for n, t in drawn.items()
               if n not in listed]
    del graph.input[:]
    graph.input.extend(inputs)
    last = graph.node[-1]
    if last.op_type == "Softmax" and last.output[0] == graph.output[0].name:
        graph.node.remove(last)
        graph.output[0].name = last.input[0]                      # the logits, of the Softmax's shape
    return model


def image(rng, shape: tuple[int, ...]) -> np.ndarray:
    """Random images with a photograph's statistics as far as a CNN's pooled features see them:
    1/f noise (the power spectrum of natural images) with a random gain and offset per channel
    (contrast and colour cast). White noise would not do: its features, averaged over the image
    by the final pooling, come out nearly the same for every draw, and so does the class."""
    n, c, h, w = shape
    fy, fx = np.fft.fftfreq(h)[:, None], np.fft.rfftfreq(w)[None, :]
    f = np.hypot(fy, fx)
    f[0, 0] = 1.0 / max(h, w)
    half = (n, c, h, w // 2 + 1)
    x = np.fft.irfft2((rng.standard_normal(half) + 1j * rng.standard_normal(half)) / f, s=(h, w))
    x = (x - x.mean(axis=(2, 3), keepdims=True)) / x.std(axis=(2, 3), keepdims=True)
    gain, offset = rng.uniform(0.5, 2.0, (n, c, 1, 1)), rng.normal(0.0, 1.0, (n, c, 1, 1))
    return (gain * x + offset).astype(np.float32)


def input_name_and_shape(model) -> tuple[str, tuple[int, ...]]:
    """The image input: the one graph input that is no initializer."""
    inits = {t.name for t in model.graph.initializer}
    (x,) = [i for i in model.graph.input if i.name not in inits]
    return x.name, tuple(d.dim_value for d in x.type.tensor_type.shape.dim)
