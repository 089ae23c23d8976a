"""Bytes per element of weights, activations and KV cache from a `Precision` message."""

from __future__ import annotations

from dataclasses import dataclass

from schema import setup_pb2
from schema.dtypes import BYTES_PER_ELEMENT, enum_name, precision_name

# bytes per element by the DType enum's name ("BF16"), from schema.dtypes
DTYPE_BYTES: dict[str, float] = {enum_name(n): b for n, b in BYTES_PER_ELEMENT.items()}


def dtype_name(value: int, default: str) -> str:
    """The DType enum value's name ("BF16"); DTYPE_UNSET gives `default`."""
    name = precision_name(value, "")
    return enum_name(name) if name else default


@dataclass(frozen=True)
class Precision:
    """Resolved precision: names and bytes per element of each tensor class."""

    weight: str = "BF16"
    activation: str = "BF16"
    kv_cache: str = "BF16"
    math: str = "BF16"
    optimizer_bytes_per_param: float = 14.0

    @property
    def weight_bytes(self) -> float:
        return DTYPE_BYTES[self.weight]

    @property
    def activation_bytes(self) -> float:
        return DTYPE_BYTES[self.activation]

    @property
    def kv_bytes(self) -> float:
        return DTYPE_BYTES[self.kv_cache]


# Default element type per workload kind (setup.workload oneof `kind`) when the precision
# block leaves it unset: HPL is FP64 by definition (the Top500 rules), FFT libraries'
# default single-precision complex transforms are FP32, everything else (LLMs, DLRM, GEMM)
# BF16 as the setup documents.
DEFAULT_DTYPE = {"hpl": "FP64", "fft": "FP32"}


def default_dtype(setup: setup_pb2.Setup) -> str:
    """The workload's default element type name ("FP64", "FP32" or "BF16")."""
    return DEFAULT_DTYPE.get(setup.workload.WhichOneof("kind") or "", "BF16")


def resolve_precision(p: setup_pb2.Precision, default: str = "BF16") -> Precision:
    """Unset types default to `default` (BF16 for LLMs); math defaults to the activation type;
    optimizer bytes 0 = 16 - weight bytes (mixed-precision Adam keeps 16 bytes per param)."""
    weight = dtype_name(p.weight, default)
    activation = dtype_name(p.activation, default)
    kv = dtype_name(p.kv_cache, activation)
    math_ = dtype_name(p.math, activation)
    opt = p.optimizer_bytes_per_param or max(0.0, 16.0 - DTYPE_BYTES[weight])
    return Precision(weight, activation, kv, math_, opt)
