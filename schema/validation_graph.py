"""Validation of an explicit dataflow graph (kernels, ids, connections, einsum kernels),
split from schema.validation so each module keeps one owner."""

from __future__ import annotations

from schema import setup_pb2
from schema.problems import NONE, Problems, Said
from schema.tiles import TILE_SYNTAX, parse_tile

EINSUM_KINDS = tuple(
    "GEMM BATCHED_GEMM ELEMENTWISE NORM SOFTMAX ATTENTION EMBEDDING KV_READ KV_WRITE ROUTER "
    "COLLECTIVE".split()
)


def check_graph(g: setup_pb2.DataflowGraph, num_config: int, p: Problems) -> None:
    """Kernels complete, ids and names unique; connections name existing kernels."""
    if not len(g.kernels):
        valid = "give at least one kernels { name id gemm_input1_weight {...} }"
        p.add("dataflow_graph.kernels", "is empty", Said("0 kernels"), valid)
    if g.HasField("repeat") and g.repeat < 1:
        p.add("dataflow_graph.repeat", "must be >= 1", g.repeat, "give the graph's repeat count")
    ids: dict[int, str] = {}
    names: dict[str, str] = {}
    kernels: dict[int, setup_pb2.Kernel] = {}
    for i, k in enumerate(g.kernels):
        kp = f"dataflow_graph.kernels[{i}]"
        if k.id < 0:  # DFModel's own inputs leave one kernel's id out: id 0
            p.add(f"{kp}.id", "must be a non-negative integer", k.id, "give a unique id >= 0")
        elif k.id in ids:
            p.add(f"{kp}.id", f"repeats the id of {ids[k.id]}", k.id, "kernel ids must be unique")
        else:
            ids[k.id], kernels[k.id] = kp, k
        if k.name and k.name in names:
            valid = "kernel names must be unique"
            p.add(f"{kp}.name", f"repeats the name of {names[k.name]}", k.name, valid)
        names.setdefault(k.name, kp)
        if k.config < -1:
            valid = "give -1 (searched) or a configuration index >= 0"
            p.add(f"{kp}.config", "is not a configuration", k.config, valid)
        elif 0 < num_config <= k.config:
            valid = f"give -1 (searched) or 0..{num_config - 1}"
            p.add(f"{kp}.config", f"is beyond execution.num_config ({num_config})", k.config, valid)
        if k.tile and parse_tile(k.tile) is None:
            p.add(f"{kp}.tile", "is not a tile", k.tile, f"give {TILE_SYNTAX}")
        _check_kernel(k, kp, p)
    known = f"kernel ids: {_id_list(ids)}"
    for j, c in enumerate(g.connections):
        cp = f"dataflow_graph.connections[{j}]"
        for end in ("startIdx", "endIdx"):
            if getattr(c, end) not in ids:
                p.add(f"{cp}.{end}", "names no kernel", getattr(c, end), known)
        if c.startIdx == c.endIdx and c.startIdx in ids:
            valid = "connect a producer to a different consumer"
            p.add(f"{cp}.endIdx", "connects a kernel to itself (a cycle)", c.endIdx, valid)
        consumer = kernels.get(c.endIdx)
        if c.end_operand and consumer is not None and consumer.HasField("einsum"):
            operands = [o.name for o in consumer.einsum.operands]
            if c.end_operand not in operands:
                wrong = f"is not an operand of kernel {c.endIdx}"
                p.add(f"{cp}.end_operand", wrong, c.end_operand, f"valid: {', '.join(operands)}")


def _id_list(ids: dict[int, str]) -> str:
    if not ids:
        return "none (no kernel has a valid id)"
    order = sorted(ids)
    if len(order) > 3 and order == list(range(order[0], order[-1] + 1)):
        return f"{order[0]}..{order[-1]}"
    return ", ".join(map(str, order[:12])) + (f", ... ({len(order)})" if len(order) > 12 else "")


def _check_kernel(k: setup_pb2.Kernel, kp: str, p: Problems) -> None:
    variant = k.WhichOneof("kernel_variant")
    if variant is None:
        names = ", ".join(f.name for f in k.DESCRIPTOR.oneofs_by_name["kernel_variant"].fields)
        p.add(kp, "has no kernel variant", NONE, f"give one of {names}")
    elif variant.startswith("gemm"):
        p.positive(getattr(k, variant), f"{kp}.{variant}", "M K N")
    elif variant.startswith("elementwise"):
        p.positive(getattr(k, variant), f"{kp}.{variant}", "M N")
    else:
        _check_einsum(k.einsum, f"{kp}.einsum", p)


def _check_einsum(e: setup_pb2.EinsumKernel, ep: str, p: Problems) -> None:
    """Loop dims named once with sizes >= 1; operands index only those dims."""
    kind = e.kind.strip().upper()  # any case, as generator.build reads it
    if kind not in EINSUM_KINDS:
        p.add(f"{ep}.kind", "is not a kernel kind", e.kind, f"valid: {', '.join(EINSUM_KINDS)}")
    if not len(e.dims):
        p.add(
            f"{ep}.dims", "is empty", Said("0 dims"), 'give loop dims: dims { name: "M" size: 64 }'
        )
    dims: set[str] = set()
    for i, d in enumerate(e.dims):
        if not d.name or d.name in dims:
            p.add(f"{ep}.dims[{i}].name", "is empty or repeated", d.name, "give unique names")
        dims.add(d.name)
        if d.size < 1:
            p.add(f"{ep}.dims[{i}].size", "must be >= 1", d.size, "give a positive loop size")
    valid = "valid: " + (", ".join(sorted(dims)) or "none")
    for i, o in enumerate(e.operands):
        for j, d in enumerate(o.dims):
            if d not in dims:
                p.add(f"{ep}.operands[{i}].dims[{j}]", "is not a loop dim", d, valid)
    writes = any(o.role == setup_pb2.OUTPUT for o in e.operands)
    if len(e.operands) and not writes and kind not in ("KV_WRITE", "COLLECTIVE"):
        p.add(f"{ep}.operands", "has no OUTPUT operand", NONE, "give one operand role: OUTPUT")
    for i, d in enumerate(e.shardable_dims):
        if d not in dims:
            p.add(f"{ep}.shardable_dims[{i}]", "is not a loop dim", d, valid)


# --------------------------------------------------------------------------------------
# Workload generator requests
# --------------------------------------------------------------------------------------
