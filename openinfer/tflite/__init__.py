"""The TFLite front end: `import_tflite(path)` reads a `.tflite` model (float or fully quantized
int8) into a DSL graph and its weights, as `openinfer.onnx` does for ONNX (docs/tflite.md)."""

from .importer import import_tflite
from .ops import list_ops

__all__ = ["import_tflite", "list_ops"]
