"""The ONNX front end: `import_onnx(path)` turns an ONNX model into DSL text and a `.oinf` model
(docs/onnx.md). Needs the optional `onnx` package (`pip install 'openinfer[onnx]'`)."""

from .importer import SUPPORTED_OPS, ImportedModel, import_onnx, list_ops, sanitize

__all__ = ["import_onnx", "ImportedModel", "SUPPORTED_OPS", "list_ops", "sanitize"]
