"""Kept only for openinfer/onnx/importer.py, which imports `write_text` from here and is being
restructured on another branch, so it is not edited on this one. The command line's helpers are
in openinfer/cli/args.py and `write_text` is in openinfer/files.py: once the importer imports it
from openinfer.files, delete this module."""

from .files import write_text

__all__ = ["write_text"]
