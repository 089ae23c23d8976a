"""Precision names: the one vocabulary, and its one mapping to the setup's DType enum.

The chip tables (`*_tflops`, `gemm_util_by_precision`), the solver's math precision and the
reports use the lower-case names below ("bf16", "fp8", ...). The setup's `DType` enum
(setup_pb2) spells the same names in upper case ("BF16"); `precision_name` and `enum_name`
are the only conversions between the two.
"""

from __future__ import annotations

from schema import setup_pb2

# every precision, widest first
PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}


def enum_name(name: str) -> str:
    """The DType enum's spelling of precision `name` ("bf16" -> "BF16")."""
    return name.upper()


def precision_name(value: int, default: str) -> str:
    """The precision name of a DType enum value; DTYPE_UNSET (or an unknown value) gives
    `default`."""
    if value == setup_pb2.DTYPE_UNSET or value not in setup_pb2.DType.values():
        return default
    name = setup_pb2.DType.Name(value).lower()
    assert name in BYTES_PER_ELEMENT, name
    return name
