"""DataflowGraph proto -> KernelGraph (the way back: generator.proto_write).

DFModel kernel variants map to einsum form (dim and operand names matter to the solver):
- gemm_input1_weight: dims (outer, M, K, N); in (outer,K,N), weight (outer,M,K) WEIGHT,
  out (outer,M,N); FLOP 2 outer M K N; GEMM (BATCHED_GEMM if outer > 1).
- gemm_input1_input2: in1 (outer,M,K), in2 (outer,K,N), out (outer,M,N); FLOP 2 outer M K N.
- elementwise_input1: dims (outer,M,N); in, out; FLOP outer M N; ELEMENTWISE (SOFTMAX or NORM
  when the name says so).
- elementwise_input1_input2: in1, in2, out.
Bytes per element of an operand = its given tensor size / its element count when the size is
> 0, else execution.word. An absent `outer` reads as 1, as DFModel's own files omit it.

Pass: FWD/BWD from fwd_bwd; names ending in `_weight_update` are WGRAD, `_recompute`
RECOMPUTE, `_optimizer` OPTIMIZER (the einsum form carries no pass field, so generators name
their kernels this way and the round trip keeps the pass).

Connections: see generator.proto_edges.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from generator.builder import DEFAULT_GROUP
from generator.graph import (
    Communication,
    DFModelExtra,
    Kernel,
    KernelGraph,
    KernelKind,
    Operand,
    OperandRole,
    Pass,
)
from generator.pins import sharding_problem, tile_problem
from generator.proto_edges import check_acyclic, edges_from_proto
from schema import setup_pb2
from schema.dtypes import PRECISIONS
from schema.errors import SetupError

VARIANTS = (
    "gemm_input1_weight",
    "gemm_input1_input2",
    "elementwise_input1",
    "elementwise_input1_input2",
    "einsum",
)
TILING_DIM = {setup_pb2.M_TILING: "M", setup_pb2.K_TILING: "K", setup_pb2.N_TILING: "N"}
ROLE = {
    setup_pb2.INPUT: OperandRole.INPUT,
    setup_pb2.WEIGHT: OperandRole.WEIGHT,
    setup_pb2.OUTPUT: OperandRole.OUTPUT,
    setup_pb2.KV_CACHE: OperandRole.KV_CACHE,
}
ROLE_PB = {v: k for k, v in ROLE.items()}
DFModelVariant = (
    setup_pb2.GemmInput1Weight
    | setup_pb2.GemmInput1Input2
    | setup_pb2.ElementwiseInput1
    | setup_pb2.ElementwiseInput1Input2
)
COMM = {
    setup_pb2.CommunicationType.Name(v): Communication(setup_pb2.CommunicationType.Name(v))
    for v in setup_pb2.CommunicationType.values()
    if v != setup_pb2.NO_COMMUNICATION
}
PASS_SUFFIX = {
    "_weight_update": Pass.WGRAD,
    "_recompute": Pass.RECOMPUTE,
    "_optimizer": Pass.OPTIMIZER,
}


def pass_of(name: str, fwd_bwd: int) -> Pass:
    for suffix, p in PASS_SUFFIX.items():
        if name.endswith(suffix):
            return p
    return Pass.BWD if fwd_bwd == setup_pb2.BWD else Pass.FWD


# Bytes per element a tensor size may imply. Below one byte is kept: the operand does not
# span every loop dim (DFModel's Q input is shared by its 160 heads: 104,857,600 bytes for
# 160 x 25600 x 2048 loop elements, 0.0125 each), and size / elements gives its true
# bytes. Above complex128's 16 bytes is not a per-element size: DFModel's FFT files give a
# 2^40-point FFT's 2.2 TB as the size of a K x N = 2^29-element GEMM operand (4096 bytes
# per element), and `word` is used.
MAX_BYTES_PER_ELEMENT = 16.0


def _bpe(size: float, elements: int, word: float) -> float:
    """Bytes per element of an operand: its given size / its element count unless that is
    above MAX_BYTES_PER_ELEMENT, else (and without a size) the setup's word."""
    if size <= 0:
        return word
    bpe = size / elements
    return bpe if bpe <= MAX_BYTES_PER_ELEMENT else word


def _dfmodel_kernel(
    k: setup_pb2.Kernel,
    variant: str,
    word: float,
    where: str,
    problems: list[str],
    group: str = "",
) -> Kernel | None:
    v = getattr(k, variant)
    outer = v.outer if v.HasField("outer") else 1  # DFModel's files leave it out
    names = ("M", "K", "N") if variant.startswith("gemm") else ("M", "N")
    bad = [f"{n}={getattr(v, n)}" for n in names if getattr(v, n) <= 0]
    if outer <= 0:
        bad.insert(0, f"outer={v.outer}")
    if bad:
        problems.append(f"{where}.{variant}: dims must be > 0, got {', '.join(bad)}")
        return None
    size = {"outer": outer, **{n: getattr(v, n) for n in names}}
    if variant.startswith("gemm"):
        dims = (("outer", outer), ("M", v.M), ("K", v.K), ("N", v.N))
        flop = 2.0 * outer * v.M * v.K * v.N
        kind = KernelKind.BATCHED_GEMM if outer > 1 else KernelKind.GEMM
        if variant == "gemm_input1_weight":
            spec = [
                ("in", OperandRole.INPUT, ("outer", "K", "N"), v.input_tensor_size),
                ("weight", OperandRole.WEIGHT, ("outer", "M", "K"), v.weight_tensor_size),
            ]
        else:
            spec = [
                ("in1", OperandRole.INPUT, ("outer", "M", "K"), v.input_tensor_1_size),
                ("in2", OperandRole.INPUT, ("outer", "K", "N"), v.input_tensor_2_size),
            ]
        spec.append(("out", OperandRole.OUTPUT, ("outer", "M", "N"), v.output_tensor_size))
    else:
        dims = (("outer", outer), ("M", v.M), ("N", v.N))
        flop = float(outer * v.M * v.N)
        low = k.name.lower()
        kind = (
            KernelKind.SOFTMAX
            if "softmax" in low
            else KernelKind.NORM
            if "norm" in low
            else KernelKind.ELEMENTWISE
        )
        od = ("outer", "M", "N")
        if variant == "elementwise_input1":
            spec = [("in", OperandRole.INPUT, od, v.input_tensor_size)]
        else:
            spec = [
                ("in1", OperandRole.INPUT, od, v.input_tensor_1_size),
                ("in2", OperandRole.INPUT, od, v.input_tensor_2_size),
            ]
        spec.append(("out", OperandRole.OUTPUT, od, v.output_tensor_size))
    operands = tuple(
        Operand(n, r, d, _bpe(s, math.prod(size[x] for x in d), word)) for n, r, d, s in spec
    )
    comm = setup_pb2.CommunicationType.Name(v.communication_type)
    return Kernel(
        name=k.name,
        kind=kind,
        dims=dims,
        operands=operands,
        flop=flop,
        pass_=pass_of(k.name, k.fwd_bwd),
        unit=_unit(k, kind),
        **_comm(comm, v.communication_size, group),
        **_second_comm(v),
    )


def _extra(v: DFModelVariant) -> DFModelExtra:
    """The variant's fields only DFModel's equations read (gemm_input1_weight alone has
    skip_weight and use_effective_stage)."""
    return DFModelExtra(
        memory_size_bytes=float(v.memory_size),
        num_input=int(v.num_input),
        use_effective_stage=bool(getattr(v, "use_effective_stage", False)),
        skip_weight=bool(getattr(v, "skip_weight", False)),
        sram_extra_bytes=float(v.sram_extra),
        dram_extra_bytes=float(v.dram_extra),
    )


def _second_comm(v: DFModelVariant) -> dict[str, Any]:
    """DFModel's communication_type_2: a second collective over the kernel's group."""
    name = setup_pb2.CommunicationType.Name(v.communication_type_2)
    if name == "NO_COMMUNICATION" or v.communication_size_2 <= 0:
        return {}
    return dict(communication_2=COMM[name], communication_2_bytes=float(v.communication_size_2))


# DFModel's `type`, when given: which unit runs the kernel (a SIMD GEMM runs on the vector
# unit). Absent, or DFModel's unset enum value: inferred from the kernel kind.
UNIT = {setup_pb2.SYSTOLIC: "matrix", setup_pb2.SIMD: "vector"}


def _unit(k: setup_pb2.Kernel, kind: KernelKind) -> str:
    """The unit `type` asks for where it differs from the kind's own ("" = the kind's), so
    a kernel reads back the same whether its type was written or inferred."""
    if not k.HasField("type") or k.type not in UNIT:
        return ""
    own = "matrix" if kind.uses_matrix_unit else "vector"
    return UNIT[k.type] if UNIT[k.type] != own else ""


# groups a collective may name (EinsumKernel.communication_group)
GROUPS = ("tp", "dp", "ep", "pp", "cp", "all", "hpl_row", "hpl_col")


def _comm(name: str, size: float, group: str = "") -> dict[str, Any]:
    """The kernel's collective; `group` overrides its default group (DFModel's non-LLM
    graphs run theirs over every chip: "all")."""
    if name == "NO_COMMUNICATION":
        return {}
    c = COMM[name]
    if group and c == Communication.ALL_REDUCE_PERIODIC:
        group = ""  # a gradient reduction stays on the data-parallel group
    return dict(
        communication=c,
        communication_bytes=float(size),
        communication_group=group or DEFAULT_GROUP.get(c, ""),
    )


def _einsum_kernel(
    k: setup_pb2.Kernel, word: float, where: str, problems: list[str]
) -> Kernel | None:
    e = k.einsum
    n0 = len(problems)
    kind_name = e.kind.strip().upper()
    if kind_name not in KernelKind.__members__:
        problems.append(
            f"{where}.einsum.kind {e.kind!r} is not a kernel kind; valid: "
            f"{', '.join(KernelKind.__members__)}"
        )
    dims: dict[str, int] = {}
    for j, d in enumerate(e.dims):
        if not d.name or d.name in dims:
            problems.append(f"{where}.einsum.dims[{j}].name {d.name!r} is empty or repeated")
        if d.size <= 0:
            problems.append(f"{where}.einsum.dims[{j}] ({d.name}) size must be > 0, got {d.size}")
        dims[d.name] = d.size
    operands = []
    for j, o in enumerate(e.operands):
        unknown = [d for d in o.dims if d not in dims]
        if unknown or len(set(o.dims)) != len(o.dims):
            problems.append(
                f"{where}.einsum.operands[{j}] ({o.name}) dims {list(o.dims)} must "
                f"be distinct loop dims of the kernel ({', '.join(dims)})"
            )
        if o.bytes_per_element < 0:
            problems.append(f"{where}.einsum.operands[{j}].bytes_per_element must be >= 0")
        operands.append(Operand(o.name, ROLE[o.role], tuple(o.dims), o.bytes_per_element or word))
    if not any(o.role == OperandRole.OUTPUT for o in operands) and kind_name not in (
        "KV_WRITE",
        "COLLECTIVE",
    ):
        problems.append(f"{where}.einsum needs an OUTPUT operand")
    if len({o.name for o in operands}) != len(operands):
        problems.append(f"{where}.einsum: operand names must be distinct")
    for d in e.shardable_dims:
        if d not in dims:
            problems.append(f"{where}.einsum.shardable_dims {d!r} is not a loop dim")
    if e.math_precision and e.math_precision not in PRECISIONS:
        problems.append(
            f"{where}.einsum.math_precision {e.math_precision!r} is not a precision; "
            f"valid: {', '.join(PRECISIONS)} (or empty: the execution's)"
        )
    if e.communication_group and e.communication_group not in GROUPS:
        problems.append(
            f"{where}.einsum.communication_group {e.communication_group!r} is not a group; "
            f"valid: {', '.join(GROUPS)} (or empty: the collective type's)"
        )
    if e.attention_window < 0:
        problems.append(
            f"{where}.einsum.attention_window must be >= 0 (0 = none), got {e.attention_window}"
        )
    if e.thread_blocks < 0:
        problems.append(
            f"{where}.einsum.thread_blocks must be >= 0 (0 = every core), got {e.thread_blocks}"
        )
    if not e.atomic_adds >= 0:
        problems.append(f"{where}.einsum.atomic_adds must be >= 0 (0 = none), got {e.atomic_adds}")
    if not 0.0 <= e.expert_share <= 1.0:
        problems.append(
            f"{where}.einsum.expert_share must be in (0, 1] (0 = every expert), "
            f"got {e.expert_share}"
        )
    if (e.dedup_experts or e.dedup_top_k) and not 1 <= e.dedup_top_k <= e.dedup_experts:
        problems.append(
            f"{where}.einsum.dedup_top_k must be in [1, dedup_experts] when either is set "
            f"(0 and 0 = a copy per routed expert), got {e.dedup_top_k} of {e.dedup_experts}"
        )
    if len(problems) > n0:
        return None
    kind = KernelKind[kind_name]
    flop = e.flop
    if flop == 0:
        outs = [d for o in operands if o.role == OperandRole.OUTPUT for d in o.dims]
        flop = (
            2.0 * math.prod(dims.values())
            if kind.uses_matrix_unit
            else float(math.prod(dims[d] for d in dict.fromkeys(outs)))
        )
    comm = setup_pb2.CommunicationType.Name(e.communication_type)
    return Kernel(
        name=k.name,
        kind=kind,
        dims=tuple(dims.items()),
        operands=tuple(operands),
        flop=float(flop),
        pass_=pass_of(k.name, k.fwd_bwd),
        kernel_class=e.kernel_class,
        math_precision=e.math_precision,
        shardable_dims=tuple(e.shardable_dims),
        unit=_unit(k, kind),
        thread_blocks=e.thread_blocks,
        strided=e.strided,
        atomic_adds=e.atomic_adds,
        torch_grouped=e.torch_grouped,
        launches=e.launches or 1,
        host_loop_ops=e.host_loop_ops,
        per_expert_launches=e.per_expert_launches,
        dedup_experts=e.dedup_experts,
        dedup_top_k=e.dedup_top_k,
        attention_window=e.attention_window,
        unsplit_kv=e.unsplit_kv,
        expert_share=e.expert_share or 1.0,
        fused_experts=e.fused_experts,
        **_comm(comm, e.communication_size, e.communication_group),
    )


def graph_from_proto(
    dg: setup_pb2.DataflowGraph,
    *,
    path: Path | str,
    name: str = "graph",
    word: float = 2.0,
    pin_sharding: bool = False,
    field: str = "dataflow_graph",
    collective_group: str = "",
) -> KernelGraph:
    """Read and validate an explicit graph; every problem is reported at once.
    `collective_group`: the group DFModel kernels' collectives run over ("" = each
    collective's default; "all" = every chip, DFModel's meaning for its non-LLM graphs)."""
    problems: list[str] = []
    pre = f"{path}: {field}"
    if not dg.kernels:
        problems.append(f"{pre}.kernels is empty; a graph needs at least one kernel")
    kernels, by_id, broken = _kernels(dg, pre, word, pin_sharding, collective_group, problems)
    all_edges = edges_from_proto(dg, by_id, broken, pre, problems)
    edges = [e for e, nxt in all_edges if not nxt]
    boundary = [e for e, nxt in all_edges if nxt]
    if problems:
        raise SetupError(problems)
    check_acyclic(kernels, edges, pre)
    return KernelGraph(name, tuple(kernels), tuple(edges), tuple(boundary))


def _kernels(
    dg: setup_pb2.DataflowGraph,
    pre: str,
    word: float,
    pin_sharding: bool,
    group: str,
    problems: list[str],
) -> tuple[list[Kernel], dict[int, Kernel], set[int]]:
    """The kernels read, in order; (kernels, id -> kernel, ids of kernels already reported,
    whose connections are then not checked)."""
    kernels: list[Kernel] = []
    by_id: dict[int, Kernel] = {}
    broken: set[int] = set()
    names: set[str] = set()
    for i, k in enumerate(dg.kernels):
        where = f"{pre}.kernels[{i}]"
        _check_identity(k, where, names, by_id, problems)
        variant = k.WhichOneof("kernel_variant")
        if variant is None:
            problems.append(
                f"{where} ({k.name}) has no kernel body; give one of {', '.join(VARIANTS)}"
            )
            continue
        kernel = _kernel(k, variant, where, word, pin_sharding, group, problems)
        if kernel is None:
            broken.add(k.id)
            continue
        kernels.append(kernel)
        names.add(k.name)
        if k.id >= 0 and k.id not in by_id:
            by_id[k.id] = kernel
    return kernels, by_id, broken


def _check_identity(
    k: setup_pb2.Kernel, where: str, names: set[str], by_id: dict[int, Kernel], problems: list[str]
) -> None:
    """A kernel's name and id unique among those read before it."""
    if not k.name:
        problems.append(f"{where}.name is empty; every kernel needs a unique name")
    elif k.name in names:
        problems.append(f"{where}.name {k.name!r} is used by another kernel; names must be unique")
    if k.id < 0:  # 0 is an id (DFModel's inputs leave one kernel's id out)
        problems.append(f"{where}.id must be a non-negative integer, got {k.id}")
    elif k.id in by_id:
        problems.append(
            f"{where}.id {k.id} ({k.name}) is used by {by_id[k.id].name!r}; ids must be unique"
        )


def _kernel(
    k: setup_pb2.Kernel,
    variant: str,
    where: str,
    word: float,
    pin_sharding: bool,
    group: str,
    problems: list[str],
) -> Kernel | None:
    """One kernel from its body (a DFModel variant or the einsum form) with what the input
    pins: its sharding (with `pin_sharding`, a DFModel variant's tiling dim), its
    configuration and its tile; None after a problem in its body."""
    if variant == "einsum":
        kernel = _einsum_kernel(k, word, where, problems)
    else:
        kernel = _dfmodel_kernel(k, variant, word, where, problems, group)
    if kernel is None:
        return None
    pin = k.sharding
    tiling = getattr(k, variant).tiling if variant != "einsum" else 0
    if not pin and pin_sharding and tiling in TILING_DIM:
        pin = TILING_DIM[tiling]
    wrong = sharding_problem(kernel, pin)
    if wrong:
        problems.append(f"{where}.sharding ({k.name}): {wrong}")
    wrong = tile_problem(kernel, k.tile.strip())
    if wrong:
        problems.append(f"{where}.tile ({k.name}): {wrong}")
    config = k.config if k.HasField("config") else -1
    if config < -1:
        problems.append(f"{where}.config must be -1 (searched) or >= 0, got {config}")
    return replace(
        kernel,
        pinned_sharding=pin,
        pinned_config=config,
        pinned_tile=k.tile.strip(),
        order_sharding="",  # the input's pin: no part of the order (Kernel.order_sharding)
        dfmodel_tiling=TILING_DIM.get(tiling, "") if variant != "einsum" else "",
        dfmodel_type=setup_pb2.KernelType.Name(k.type) if variant != "einsum" else "",
        dfmodel_extra=_extra(getattr(k, variant)) if variant != "einsum" else None,
    )
