"""`.oinf` model packages: reading (mmap, lazy), writing (deterministic, atomic), verifying, authoring.

See docs/oinf.md for the format, the API and the command line.
"""

from .authoring import dataclass_contents, dataclass_to_oinf, write_dataclass
from .format import Header
from .reader import MetadataInfo, Model, ModelLoader, TensorInfo
from .sources import load_npz, load_safetensors, pack_oinf
from .values import Bitset, QuantParams, ScalarValue, SizeVar, TensorSpec, UninitializedTensor, as_dtype
from .verify import verify_file, verify_report
from .writer import convert_oinf, encode_oinf, write_oinf

__all__ = [
    "ModelLoader", "Model", "TensorInfo", "MetadataInfo", "Header",
    "write_oinf", "encode_oinf", "convert_oinf", "dataclass_to_oinf", "dataclass_contents", "write_dataclass",
    "load_npz", "load_safetensors", "pack_oinf", "verify_file", "verify_report",
    "Bitset", "QuantParams", "ScalarValue", "SizeVar", "TensorSpec", "UninitializedTensor", "as_dtype",
]
