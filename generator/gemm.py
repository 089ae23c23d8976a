"""A plain GEMM or batched GEMM: C[batch, M, N] = A[batch, M, K] x B[batch, K, N].

Dims: batch (only when > 1), M, N, K. FLOP 2 batch M N K. B is a WEIGHT operand (counted as
parameters, kernel class Ma_Mw) when `weight_operand` is set, else an INPUT (Ma_Ma).
"""

from __future__ import annotations

from pathlib import Path

from generator.builder import Arg, GraphBuilder
from generator.graph import KernelKind, ModelInfo, Phase, Workload
from generator.ops import IN, OUT, W
from generator.precision import Precision
from generator.requests import request_batch
from schema import setup_pb2
from schema.errors import SetupError


def gemm_workload(req: setup_pb2.Gemm, prec: Precision, path: Path) -> Workload:
    bad = [
        f"{path}: workload.gemm.{f} must be > 0, got {getattr(req, f)}"
        for f in ("M", "K", "N")
        if getattr(req, f) <= 0
    ]
    if req.batch < 0:
        bad.append(f"{path}: workload.gemm.batch must be >= 0 (0 = 1), got {req.batch}")
    if bad:
        raise SetupError(bad)
    batch = request_batch(req)
    a, w = prec.activation_bytes, prec.weight_bytes
    bd = (("batch", batch),) if batch > 1 else ()
    M, K, N = ("M", req.M), ("K", req.K), ("N", req.N)
    b = GraphBuilder("gemm")
    b_role, b_bpe = (W, w) if req.weight_operand else (IN, a)
    b.add_kernel(
        "gemm",
        KernelKind.BATCHED_GEMM if batch > 1 else KernelKind.GEMM,
        [
            Arg("a", IN, (*bd, M, K), a),
            Arg("b", b_role, (*bd, K, N), b_bpe),
            Arg("c", OUT, (*bd, M, N), a),
        ],
        2 * batch * req.M * req.N * req.K,
        kernel_class="Ma_Mw" if req.weight_operand else "Ma_Ma",
        shardable=["batch", "M", "N", "K"],
    )
    params = batch * req.K * req.N if req.weight_operand else 0
    model = (
        ModelInfo(
            name="gemm",
            num_params=params,
            num_active_params=params,
            num_layers=1,
            hidden_size=req.K,
        )
        if params
        else None
    )
    return Workload(
        kind="gemm",
        phases=(Phase("gemm", b.graph()),),
        model=model,
        activation_bytes_per_element=a,
        weight_bytes_per_param=w,
        compute_dtype=prec.math,
    )
