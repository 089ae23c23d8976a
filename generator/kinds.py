"""What a kernel is, what its operands are, which pass it belongs to and the collective it
implies: the vocabulary of the kernel graph (generator.graph), shared by the generators and
the solver."""

from __future__ import annotations

from enum import Enum


class KernelKind(str, Enum):
    GEMM = "GEMM"
    BATCHED_GEMM = "BATCHED_GEMM"  # batched/grouped GEMM (attention scores, GQA groups)
    ELEMENTWISE = "ELEMENTWISE"
    NORM = "NORM"  # reduction/normalisation (LayerNorm, RMSNorm)
    SOFTMAX = "SOFTMAX"
    ATTENTION = "ATTENTION"  # fused attention (FlashAttention style): scores stay on chip
    EMBEDDING = "EMBEDDING"  # table lookup (gather)
    KV_READ = "KV_READ"
    KV_WRITE = "KV_WRITE"
    ROUTER = "ROUTER"
    COLLECTIVE = "COLLECTIVE"  # communication hint (e.g. all-to-all of embeddings)

    @property
    def uses_matrix_unit(self) -> bool:
        return self in (KernelKind.GEMM, KernelKind.BATCHED_GEMM, KernelKind.ATTENTION)


class OperandRole(str, Enum):
    INPUT = "INPUT"
    WEIGHT = "WEIGHT"
    OUTPUT = "OUTPUT"
    KV_CACHE = "KV_CACHE"


class Pass(str, Enum):
    FWD = "FWD"
    BWD = "BWD"  # activation gradients
    WGRAD = "WGRAD"  # weight gradients
    RECOMPUTE = "RECOMPUTE"  # forward recomputed in backward
    OPTIMIZER = "OPTIMIZER"


class Communication(str, Enum):
    """Communication a kernel implies by itself, independent of its sharding."""

    NONE = "NONE"
    ALL_REDUCE = "ALL_REDUCE"
    ALL_REDUCE_PERIODIC = "ALL_REDUCE_PERIODIC"  # DP gradient all-reduce, once per step
    ALL_TO_ALL = "ALL_TO_ALL"  # expert-parallel dispatch/combine, DLRM embeddings
    ALL_GATHER = "ALL_GATHER"
    REDUCE_SCATTER = "REDUCE_SCATTER"
    POINT_TO_POINT = "POINT_TO_POINT"
    BROADCAST = "BROADCAST"
