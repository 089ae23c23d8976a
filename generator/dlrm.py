"""DLRM training step (Naumov et al. 2019): embedding tables with sum pooling, bottom MLP,
pairwise feature interaction, top MLP, loss, and the backward pass.

The graph covers the global batch (micro_batch_size samples per chip x the resolved system's
chips, DFModel's convention). Tables are split across chips (model parallel, dim `tables`),
MLPs across samples (data parallel, dim `batch`): the pooled embeddings go through an
all-to-all (communication ALL_TO_ALL on the embedding kernel, group "ep" = the chips the
tables are spread over), and their gradients come back through another (on the embedding
update). MLP weight gradients are all-reduced once per step (ALL_REDUCE_PERIODIC).

Dims: batch, tables, pooled (rows looked up per table per sample), rows, emb;
bottom_i / top_i = width of the activation entering MLP layer i; interactions = emb +
(tables + 1) tables / 2 (the dense vector and every distinct pair's dot product).
ReLU and bias adds are folded into the GEMM epilogues.
"""

from __future__ import annotations

from pathlib import Path

from generator.builder import Arg, GraphBuilder, Tensor
from generator.graph import Communication, KernelKind, ModelInfo, Pass, Phase, Workload
from generator.ops import IN, OUT, W, binary, linear
from generator.ops_loss import cross_entropy
from generator.precision import Precision
from schema import setup_pb2
from schema.errors import SetupError

A2A = Communication.ALL_TO_ALL


def dlrm_workload(req: setup_pb2.Dlrm, prec: Precision, num_chip: int, path: Path) -> Workload:
    """The forward pass of one training step in model order (sparse features, bottom MLP,
    interaction, top MLP, loss), then its backward."""
    _check(req, path)
    w, a = prec.weight_bytes, prec.activation_bytes
    batch = req.micro_batch_size * num_chip
    T, E, D = req.num_table, req.emb_dim, req.mlp_dim
    Bd = ("batch", batch)
    b = GraphBuilder("dlrm")
    sparse = _embeddings(b, req, batch, prec)
    dense = req.dense_features or D
    dense_in = b.input((Bd, ("bottom_0", dense)), a, requires_grad=False)
    bottom_widths = [dense] + [D] * (req.bottom_num_mlp - 1) + [E]
    bottom = _mlp(b, "bottom", dense_in, bottom_widths, batch, prec)
    z = _interaction(b, bottom, sparse, req, batch, prec)
    top_widths = [_interactions(req)] + [D] * (req.top_num_mlp - 1) + [1]
    top = _mlp(b, "top", z, top_widths, batch, prec)
    cross_entropy(b, "loss", top, abpe=a)
    b.backward([])
    graph = b.graph()
    params = sum(k.weight_params for k in graph.kernels if k.pass_ == Pass.FWD)
    model = ModelInfo(
        name="dlrm",
        num_params=params,
        num_active_params=params,
        num_layers=req.bottom_num_mlp + req.top_num_mlp,
        hidden_size=D,
        params_outside_layers=T * req.row * E,
    )
    return Workload(
        kind="dlrm",
        phases=(Phase("dlrm", graph),),
        model=model,
        global_batch=batch,
        micro_batch=req.micro_batch_size,
        weight_bytes_per_param=w,
        optimizer_bytes_per_param=prec.optimizer_bytes_per_param,
        activation_bytes_per_element=a,
        compute_dtype=prec.math,
        notes=(
            f"global batch {batch} = micro_batch_size {req.micro_batch_size} x {num_chip} chips",
        ),
    )


def _check(req: setup_pb2.Dlrm, path: Path) -> None:
    """Every size of the request positive (dense_features may be 0: = mlp_dim)."""
    bad = [
        f"{path}: workload.dlrm.{f} must be > 0, got {getattr(req, f)}"
        for f in (
            "mlp_dim",
            "bottom_num_mlp",
            "top_num_mlp",
            "pooled_row",
            "row",
            "num_table",
            "emb_dim",
            "micro_batch_size",
        )
        if getattr(req, f) <= 0
    ]
    if req.dense_features < 0:
        bad.append(f"{path}: workload.dlrm.dense_features must be >= 0 (0 = mlp_dim)")
    if bad:
        raise SetupError(bad)


def _embeddings(b: GraphBuilder, req: setup_pb2.Dlrm, batch: int, prec: Precision) -> Tensor:
    """The sparse features: lookups with sum pooling, split by table across chips, so the
    pooled vectors go through an all-to-all to the batch-split MLPs; their gradients come
    back through another, on the table update (WGRAD)."""
    w, a = prec.weight_bytes, prec.activation_bytes
    T, E = req.num_table, req.emb_dim
    Bd, Td, Ed = ("batch", batch), ("tables", T), ("emb", E)
    pooled = (Bd, Td, Ed)
    ids = (Bd, Td, ("pooled", req.pooled_row))
    table = (Td, ("rows", req.row), Ed)
    lookup_flop = batch * T * req.pooled_row * E
    a2a = batch * T * E * a

    def emb_rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dyv = b.view(dy, pooled)

        def update() -> None:
            b.add_kernel(
                "embedding_weight_update",
                KernelKind.EMBEDDING,
                [
                    Arg("dy", IN, pooled, a, dyv),
                    Arg("ids", IN, ids, 4.0),
                    Arg("dtable", OUT, table, w),
                ],
                lookup_flop,
                pass_=Pass.WGRAD,
                kernel_class="Vw_Va",
                shardable=["tables", "batch"],
                communication=A2A,
                communication_bytes=a2a,
            )

        b.defer(update)
        return []

    sparse = b.add_kernel(
        "embedding",
        KernelKind.EMBEDDING,
        [Arg("ids", IN, ids, 4.0), Arg("table", W, table, w), Arg("out", OUT, pooled, a)],
        lookup_flop,
        kernel_class="Vw_Va",
        shardable=["tables", "batch"],
        communication=A2A,
        communication_bytes=a2a,
        rule=emb_rule,
    )
    assert sparse is not None
    return sparse


def _mlp(
    b: GraphBuilder,
    prefix: str,
    x: Tensor,
    widths: list[int],
    batch: int,
    prec: Precision,
) -> Tensor:
    """A stack of linear layers (bias and ReLU in the epilogue) of the given widths, split
    across samples (data parallel: dim `batch`)."""
    Bd = ("batch", batch)
    for i in range(len(widths) - 1):
        xi, yo = (Bd, (f"{prefix}_{i}", widths[i])), (Bd, (f"{prefix}_{i + 1}", widths[i + 1]))
        x = linear(
            b,
            f"{prefix}_mlp_{i + 1}",
            x,
            xi,
            (xi[1], yo[1]),
            yo,
            wbpe=prec.weight_bytes,
            abpe=prec.activation_bytes,
            bias=True,
            shardable=["batch", xi[1][0], yo[1][0]],
        )
    return x


def _interactions(req: setup_pb2.Dlrm) -> int:
    """Width of the interaction's output: the dense vector and every distinct pair's dot."""
    T = req.num_table
    return req.emb_dim + T * (T + 1) // 2


def _interaction(
    b: GraphBuilder,
    bottom: Tensor,
    sparse: Tensor,
    req: setup_pb2.Dlrm,
    batch: int,
    prec: Precision,
) -> Tensor:
    """Pairwise feature interaction of the bottom MLP's output with the pooled embeddings:
    a batched GEMM of each sample's features with themselves."""
    T, E = req.num_table, req.emb_dim
    Bd, Ed = ("batch", batch), ("emb", E)
    return binary(
        b,
        "interaction",
        [("dense", bottom, (Bd, Ed)), ("sparse", sparse, (Bd, ("tables", T), Ed))],
        (Bd, ("interactions", _interactions(req))),
        batch * E * T * (T + 1),
        abpe=prec.activation_bytes,
        kind=KernelKind.BATCHED_GEMM,
        cls="Ma_Ma",
        shardable=["batch"],
    )
