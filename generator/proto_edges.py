"""DataflowGraph connections -> Edges, for generator.proto_graph: which operand of its
consumer each connection feeds, the shared axes, and the check that the graph is acyclic.

Connections: startIdx/endIdx are kernel ids. The consumer operand is `end_operand` if given,
else the first unfilled INPUT operand whose bytes equal the producer's output bytes, else the
first unfilled INPUT operand. Edge.dim_map comes from `generator.builder.infer_dim_map`;
tensor_bytes = the producer's output bytes (or the consumer operand's, if smaller: a slice).
A `zero_out` connection (DFModel's newer schema; its generator sets it on the KV-cache ->
attention edges of a decode layer, whose cache bytes the cache kernels' memory_size charges)
carries no data: it takes its consumer operand but makes no Edge, so neither cost model
moves a byte on it (DFModel prices it 0 bytes); the consumer reads that operand as a graph
input (the native model: from DRAM, where a KV cache lives).
"""

from __future__ import annotations

import math

from generator.builder import infer_dim_map
from generator.graph import Edge, Kernel, OperandRole
from schema import setup_pb2
from schema.errors import SetupError


def edges_from_proto(
    dg: setup_pb2.DataflowGraph,
    by_id: dict[int, Kernel],
    broken: set[int],
    pre: str,
    problems: list[str],
) -> list[tuple[Edge, bool]]:
    """(edge, whether it crosses into the next instance) per connection."""
    edges: list[tuple[Edge, bool]] = []
    filled: dict[str, list[str]] = {}
    for i, c in enumerate(dg.connections):
        where = f"{pre}.connections[{i}]"
        src, dst = by_id.get(c.startIdx), by_id.get(c.endIdx)
        if c.startIdx in broken or c.endIdx in broken:
            continue
        for label, idx, kern in (("startIdx", c.startIdx, src), ("endIdx", c.endIdx, dst)):
            if kern is None:
                problems.append(
                    f"{where}.{label} {idx} names no kernel; kernel ids are {_ids(by_id)}"
                )
        if src is None or dst is None:
            continue
        if c.startIdx == c.endIdx:
            problems.append(f"{where} connects kernel {src.name!r} to itself")
            continue
        if not src.outputs:
            problems.append(f"{where}: kernel {src.name!r} has no OUTPUT operand to send")
            continue
        out = src.outputs[0]
        out_bytes = src.operand_bytes(out)
        taken = filled.setdefault(dst.name, [])
        inputs = [o for o in dst.operands if o.role == OperandRole.INPUT]
        if c.end_operand:
            op = next(
                (
                    o
                    for o in dst.operands
                    if o.name == c.end_operand and o.role != OperandRole.OUTPUT
                ),
                None,
            )
            if op is None:
                valid = ", ".join(o.name for o in dst.inputs)
                problems.append(
                    f"{where}.end_operand {c.end_operand!r} is not an input of "
                    f"{dst.name!r}; its inputs are {valid}"
                )
                continue
        else:
            free = [o for o in inputs if o.name not in taken]
            same = [o for o in free if math.isclose(dst.operand_bytes(o), out_bytes, rel_tol=1e-9)]
            op = (same or free or [None])[0]
        if c.next_instance and op is not None:
            pass  # feeds the next instance: does not take one of this instance's inputs
        elif len(taken) + 1 > len(dst.inputs) or op is None:
            problems.append(
                f"{where}: kernel {dst.name!r} gets more incoming connections "
                f"than it has inputs ({len(dst.inputs)}: "
                f"{', '.join(o.name for o in dst.inputs)})"
            )
            continue
        if not c.next_instance:
            taken.append(op.name)
        sizes = src.dim_sizes
        dsizes = dst.dim_sizes
        dim_map = infer_dim_map(
            [(d, sizes[d]) for d in out.dims], [(d, dsizes[d]) for d in op.dims]
        )
        tensor_bytes = min(out_bytes, dst.operand_bytes(op))
        if c.zero_out:  # DFModel: the edge carries no data (it still takes its operand)
            continue
        edges.append(
            (Edge(src.name, dst.name, op.name, "", dim_map, tensor_bytes), c.next_instance)
        )
    return edges


def _ids(by_id: dict[int, Kernel]) -> str:
    ids = sorted(by_id)
    if len(ids) > 8:
        return f"{ids[0]}..{ids[-1]} ({len(ids)} kernels)"
    return ", ".join(map(str, ids)) or "(none)"


def check_acyclic(kernels: list[Kernel], edges: list[Edge], pre: str) -> None:
    """A dataflow graph must be acyclic within one instance (edges into the next instance
    are not in `edges`); SetupError naming one cycle otherwise."""
    succ: dict[str, list[str]] = {k.name: [] for k in kernels}
    for e in edges:
        succ[e.src].append(e.dst)
    cycle = _find_cycle([k.name for k in kernels], succ)
    if cycle:
        raise SetupError(
            f"{pre}.connections form a cycle: {' -> '.join(cycle)}; a dataflow "
            "graph must be acyclic"
        )


def _find_cycle(names: list[str], succ: dict[str, list[str]]) -> list[str]:
    """One cycle (its kernels, first repeated at the end) or []; an iterative depth-first
    search, so a dependency chain of any length fits in the stack."""
    color: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in names:
        if root in color:
            continue
        path = [root]
        todo = [iter(succ[root])]
        color[root] = 1
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                todo.pop()
            elif color.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in color:
                color[nxt] = 1
                path.append(nxt)
                todo.append(iter(succ[nxt]))
    return []
