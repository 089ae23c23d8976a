"""DFModel's GPT layer graph (generate_LLM_fwdbwd.py / generate_LLM_fwd.py), reproduced.

41 kernels and 53 connections for one layer, forward + backward + weight update, for one
sequence (DFModel's generator has no batch argument), or the 18-kernel / 21-connection
forward part. Tensor sizes are written as DFModel writes them: rounded to 8 significant
digits (its files hold 1342177300.0 for 160*2048*2048*2).
"""

from __future__ import annotations

from schema import setup_pb2
from schema.errors import SetupError

# (start id, end id) of every connection, in DFModel's order; the first 21 are the forward.
CONNECTIONS = (
    (1, 2),
    (2, 3),
    (2, 4),
    (2, 5),
    (3, 6),
    (4, 6),
    (6, 7),
    (7, 8),
    (5, 9),
    (8, 9),
    (9, 10),
    (10, 11),
    (11, 12),
    (1, 12),
    (12, 13),
    (13, 14),
    (14, 15),
    (15, 16),
    (16, 17),
    (17, 18),
    (12, 18),
    (19, 20),
    (20, 21),
    (21, 22),
    (22, 23),
    (23, 24),
    (24, 25),
    (25, 26),
    (26, 27),
    (5, 27),
    (26, 28),
    (8, 28),
    (27, 30),
    (28, 29),
    (30, 31),
    (31, 32),
    (31, 33),
    (4, 32),
    (3, 33),
    (32, 34),
    (33, 35),
    (20, 36),
    (15, 36),
    (22, 37),
    (13, 37),
    (25, 38),
    (9, 38),
    (28, 39),
    (2, 39),
    (33, 40),
    (2, 40),
    (32, 41),
    (2, 41),
)
FORWARD_KERNELS, FORWARD_CONNECTIONS = 18, 21


def dfmodel_float(x: float) -> float:
    """DFModel's float32 text output: 8 significant digits."""
    return float(f"{x:.8g}")


def dfmodel_gpt_graph(
    hidden: int, head_dim: int, num_head: int, seq: int, word: float = 2, forward_only: bool = False
) -> setup_pb2.DataflowGraph:
    """The layer as DFModel's generator writes it: its kernel table in DFModel's kernel
    format, then its connections (the forward part alone with `forward_only`)."""
    if num_head * head_dim != hidden:
        raise SetupError(
            f"execution.llm: num_head x head_dim ({num_head} x {head_dim}) must "
            f"equal hidden_dim ({hidden})"
        )
    table = _kernel_table(hidden, head_dim, num_head, seq, word)
    n_kernels = FORWARD_KERNELS if forward_only else len(table)
    n_conn = FORWARD_CONNECTIONS if forward_only else len(CONNECTIONS)
    dg = setup_pb2.DataflowGraph()
    for i, row in enumerate(table[:n_kernels], start=1):
        _add_kernel(dg, i, row)
    for j, (a, b) in enumerate(CONNECTIONS[:n_conn], start=1):
        dg.connections.add(startIdx=a, endIdx=b, id=j)
    return dg


# name, fwd_bwd, variant (ew1, ew12: elementwise with one or two inputs; gw: GEMM with a
# weight; g12: GEMM of two inputs), (outer, M, [K,] N), tensor sizes (inputs..., output)
Row = tuple[str, int, str, tuple[int, ...], tuple[float, ...]]


def _kernel_table(h: int, d: int, H: int, s: int, w: float) -> list[Row]:
    """The layer's 41 kernels in DFModel's order (the forward's 18 first), with their shapes
    and tensor sizes for one sequence."""
    hs, hh, ssh, fs, fh = h * s * w, h * h * w, s * s * H * w, 4 * h * s * w, 4 * h * h * w
    F, B = setup_pb2.FWD, setup_pb2.BWD
    return [
        ("Add_Prev_Layer", F, "ew1", (1, h, s), (hs, hs)),
        ("LayerNorm_1", F, "ew1", (1, h, s), (hs, hs)),
        ("Q", F, "gw", (H, d, h, s), (hs, hh, hs)),
        ("K", F, "gw", (H, d, h, s), (hs, hh, hs)),
        ("V", F, "gw", (H, d, h, s), (hs, hh, hs)),
        ("MHA_GEMM_1", F, "g12", (H, s, d, s), (hs, hs, ssh)),
        ("SOFTMAX", F, "ew1", (H, s, s), (ssh, ssh)),
        ("DropOut_1", F, "ew1", (H, s, s), (ssh, ssh)),
        ("MHA_GEMM_2", F, "g12", (H, d, s, s), (hs, ssh, hs)),
        ("PROJ_GEMM", F, "gw", (1, h, h, s), (hs, hh, hs)),
        ("DropOut_2", F, "ew1", (1, h, s), (hs, hs)),
        ("Add_1", F, "ew12", (1, h, s), (hs, hs, hs)),
        ("LayerNorm_2", F, "ew1", (1, h, s), (hs, hs)),
        ("FFN0", F, "gw", (1, 4 * h, h, s), (hs, fh, fs)),
        ("GeLU", F, "ew1", (1, 4 * h, s), (fs, fs)),
        ("FFN1", F, "gw", (1, h, 4 * h, s), (fs, fh, hs)),
        ("DropOut_3", F, "ew1", (1, h, s), (hs, hs)),
        ("Add_2", F, "ew12", (1, h, s), (hs, hs, hs)),
        ("Loss_bwd", B, "ew1", (1, h, s), (hs, hs)),
        ("DropOut_3_bwd", B, "ew1", (1, h, s), (hs, hs)),
        ("FFN1_bwd", B, "gw", (1, 4 * h, h, s), (hs, fh, fs)),
        ("GeLU_bwd", B, "ew1", (1, 4 * h, s), (fs, fs)),
        ("FFN0_bwd", B, "gw", (1, h, 4 * h, s), (fs, fh, hs)),
        ("LayerNorm_2_bwd", B, "ew1", (1, h, s), (hs, hs)),
        ("DropOut_2_bwd", B, "ew1", (1, h, s), (hs, hs)),
        ("PROJ_GEMM_bwd", B, "gw", (1, h, h, s), (hs, hh, hs)),
        ("MHA_GEMM_2_bwd1", B, "g12", (H, s, d, s), (hs, hs, ssh)),
        ("MHA_GEMM_2_bwd2", B, "g12", (H, d, s, s), (hs, ssh, hs)),
        ("V_bwd", B, "gw", (1, h, h, s), (hs, hh, hs)),
        ("DropOut_1_bwd", B, "ew1", (H, s, s), (ssh, ssh)),
        ("SOFTMAX_bwd", B, "ew1", (H, s, s), (ssh, ssh)),
        ("MHA_GEMM_1_bwd1", B, "g12", (H, d, s, s), (ssh, hs, hs)),
        ("MHA_GEMM_1_bwd2", B, "g12", (H, d, s, s), (ssh, hs, hs)),
        ("Q_bwd", B, "gw", (H, d, h, s), (hs, hh, hs)),
        ("K_bwd", B, "gw", (H, d, h, s), (hs, hh, hs)),
        ("FFN1_bwd_weight_update", B, "g12", (1, 4 * h, s, h), (hs, fs, fh)),
        ("FFN0_bwd_weight_update", B, "g12", (1, h, s, 4 * h), (fs, hs, fh)),
        ("PROJ_GEMM_bwd_weight_update", B, "g12", (1, h, s, h), (hs, hs, hh)),
        ("V_bwd_weight_update", B, "g12", (1, h, s, h), (hs, hs, hh)),
        ("K_bwd_weight_update", B, "g12", (1, h, s, h), (hs, hs, hh)),
        ("Q_bwd_weight_update", B, "g12", (1, h, s, h), (hs, hs, hh)),
    ]


def _add_kernel(dg: setup_pb2.DataflowGraph, i: int, row: Row) -> None:
    """One table row as DFModel writes a kernel: elementwise kernels on the SIMD unit,
    GEMMs on the systolic array, tiled along N except the weight-gradient GEMMs (along K,
    with the periodic all-reduce of the gradient)."""
    name, fb, variant, shape, sizes = row
    k = dg.kernels.add(name=name, id=i, config=-1, fwd_bwd=fb)
    sz = [dfmodel_float(x) for x in sizes]
    if variant.startswith("ew"):
        k.type = setup_pb2.SIMD
        v = k.elementwise_input1 if variant == "ew1" else k.elementwise_input1_input2
        v.outer, v.M, v.N = shape
        if variant == "ew1":
            v.input_tensor_size, v.output_tensor_size = sz
        else:
            v.input_tensor_1_size, v.input_tensor_2_size, v.output_tensor_size = sz
        v.tiling = setup_pb2.N_TILING
        return
    k.type = setup_pb2.SYSTOLIC
    g = k.gemm_input1_weight if variant == "gw" else k.gemm_input1_input2
    g.outer, g.M, g.K, g.N = shape
    if variant == "gw":
        g.input_tensor_size, g.weight_tensor_size, g.output_tensor_size = sz
        g.tiling = setup_pb2.N_TILING
    else:
        g.input_tensor_1_size, g.input_tensor_2_size, g.output_tensor_size = sz
        if name.endswith("_weight_update"):
            g.tiling = setup_pb2.K_TILING
            g.communication_type = setup_pb2.ALL_REDUCE_PERIODIC
            g.communication_size = sz[2]
        else:
            g.tiling = setup_pb2.N_TILING


def dfmodel_gpt_from_llm(llm: setup_pb2.Llm, word: float) -> setup_pb2.DataflowGraph:
    """The graph DFModel's README generates from an `execution.llm` block."""
    return dfmodel_gpt_graph(llm.hidden_dim, llm.head_dim, llm.num_head, llm.seq_len, word)
