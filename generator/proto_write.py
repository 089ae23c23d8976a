"""KernelGraph -> DataflowGraph proto (einsum kernels): a generated graph written as a setup
that `generator.proto_graph.graph_from_proto` reads back identically (plan.txt, export)."""

from __future__ import annotations

from generator.builder import DEFAULT_GROUP
from generator.graph import Communication, Kernel, KernelGraph, Pass
from generator.proto_graph import ROLE_PB, pass_of
from schema import setup_pb2


def graph_to_proto(graph: KernelGraph, repeat: int | None = None) -> setup_pb2.DataflowGraph:
    """Write any KernelGraph as einsum kernels (ids 1..n in declaration order); reading it
    back with `graph_from_proto` gives an identical KernelGraph."""
    dg = setup_pb2.DataflowGraph()
    ids = {}
    for i, k in enumerate(graph.kernels, start=1):
        ids[k.name] = i
        bwd = k.pass_ in (Pass.BWD, Pass.WGRAD, Pass.OPTIMIZER)
        pk = dg.kernels.add(
            name=k.name,
            id=i,
            fwd_bwd=setup_pb2.BWD if bwd else setup_pb2.FWD,
            type=setup_pb2.SYSTOLIC if _runs_on_matrix(k) else setup_pb2.SIMD,
            sharding=k.pinned_sharding,
            tile=k.pinned_tile,
        )
        assert pass_of(k.name, pk.fwd_bwd) == k.pass_, f"{k.name}: name does not carry {k.pass_}"
        assert k.flop != 0, f"{k.name}: FLOP 0 would read back as the derived default"
        if k.pinned_config >= 0:
            pk.config = k.pinned_config
        e = pk.einsum
        e.kind = k.kind.value
        e.flop = k.flop
        e.kernel_class = k.kernel_class
        e.shardable_dims.extend(k.shardable_dims)
        e.math_precision = k.math_precision
        e.thread_blocks = k.thread_blocks
        e.strided = k.strided
        e.atomic_adds = k.atomic_adds
        e.torch_grouped = k.torch_grouped
        e.launches = k.launches if k.launches != 1 else 0
        e.host_loop_ops = k.host_loop_ops
        e.per_expert_launches = k.per_expert_launches
        e.dedup_experts, e.dedup_top_k = k.dedup_experts, k.dedup_top_k
        e.attention_window = k.attention_window
        e.unsplit_kv = k.unsplit_kv
        e.expert_share = k.expert_share if k.expert_share < 1.0 else 0.0
        e.fused_experts = k.fused_experts
        for d, size in k.dims:
            e.dims.add(name=d, size=size)
        for o in k.operands:
            e.operands.add(
                name=o.name,
                role=ROLE_PB[o.role],
                dims=list(o.dims),
                bytes_per_element=o.bytes_per_element,
            )
        if k.communication != Communication.NONE:
            e.communication_type = setup_pb2.CommunicationType.Value(k.communication.value)
            e.communication_size = k.communication_bytes
            if k.communication_group != DEFAULT_GROUP.get(k.communication, ""):
                e.communication_group = k.communication_group
    tagged = [(e, False) for e in graph.edges] + [(e, True) for e in graph.boundary]
    for j, (edge, nxt) in enumerate(tagged, start=1):
        first = graph.kernel(edge.src).outputs[0].name
        assert edge.src_operand in ("", first), f"{edge.src}: edges leave its first output"
        c = dg.connections.add(
            startIdx=ids[edge.src], endIdx=ids[edge.dst], id=j, end_operand=edge.dst_operand
        )
        if nxt:
            c.next_instance = True
    if repeat is not None:
        dg.repeat = repeat
    return dg


def _runs_on_matrix(k: Kernel) -> bool:
    return k.unit == "matrix" or (k.unit != "vector" and k.kind.uses_matrix_unit)
