"""dse_final.txt: DFModel's record of the chosen mapping, for DFModel users' scripts.

DFModel writes its input back with the mapping filled in (`dse_final.txt`, protobuf text of
its `DSE` message): per kernel its topological number, configuration, `sharding` and the
per-chip shard sizes `shard_outer_M` / `shard_K` / `shard_N`; per connection its
`tensor_size`, `shard_tensor_size`, `buffer_depth` and `startName` / `endName`. This file
has the same shape, with MapShard's chosen mapping, for a setup whose graph uses DFModel's
kernel variants; scripts that parse DFModel's file with DFModel's schema read it too (the
MapShard-only fields are left out).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from mapshard.scenario import Scenario, execution_options
from schema import setup_pb2
from schema.dfmodel_spelling import DFMODEL_VARIANTS
from schema.text_out import message_text
from solver import api as solver_api
from solver.plan import KernelPlan, Plan

FILE_NAME = "dse_final.txt"
DSE_FILE, SHARDED_FILE = "dse.txt", "dse_sharded.txt"
SHARDING = {
    "outer": setup_pb2.OUTER_SHARDING,
    "M": setup_pb2.M_SHARDING,
    "K": setup_pb2.K_SHARDING,
    "N": setup_pb2.N_SHARDING,
}
# the top-level blocks of DFModel's DSE message; the rest is MapShard's own
DSE_FIELDS = ("dataflow_graph", "system", "cost", "execution", "gurobi")
MAPSHARD_ONLY = (
    "pin_sharding",
    "pipeline_schedule",
    "serialize_network",
    "tp_comm_overlap",
    "placement",
    "pin",
)
WHOLE = re.compile(r"^(\s*(?:word|time): -?\d+)\.0$", re.M)


def dfmodel_files(scenario: Scenario, plan: Plan) -> dict[str, str]:
    """DFModel's files of its three stages for a DFModel graph (none for another setup):
    dse.txt (its input as DFModel reads it), dse_sharded.txt (stage 1's sharding) and
    dse_final.txt (stage 2's configurations and shard sizes)."""
    final = dse_final_text(scenario, plan)
    if final is None:
        return {}
    return {
        DSE_FILE: dse_text(scenario),
        SHARDED_FILE: dse_sharded_text(scenario, plan),
        FILE_NAME: final,
    }


def _is_dfmodel_graph(setup: setup_pb2.Setup) -> bool:
    kernels = setup.dataflow_graph.kernels
    return any(k.WhichOneof("kernel_variant") in DFMODEL_VARIANTS for k in kernels)


def _dse(scenario: Scenario) -> setup_pb2.Setup:
    """The setup's DFModel blocks (its `DSE` message), MapShard's own fields left out."""
    setup = scenario.setup
    out = setup_pb2.Setup()
    for name in DSE_FIELDS:
        if setup.HasField(name):
            getattr(out, name).CopyFrom(getattr(setup, name))
    out.execution.perfect_overlap = execution_options(setup).overlap
    for name in MAPSHARD_ONLY:
        out.execution.ClearField(name)
    for kernel in out.dataflow_graph.kernels:
        kernel.ClearField("sharding")  # MapShard's pin fields: DFModel's are in the variant
        kernel.ClearField("tile")
    return out


def _text(out: setup_pb2.Setup, header: str) -> str:
    # DFModel's schema has word and gurobi.time as integers: "2", not MapShard's "2.0"
    return header + WHOLE.sub(r"\1", message_text(out))


def dse_text(scenario: Scenario) -> str:
    """dse.txt: the input as DFModel's stage 1 reads it; on a PMU chip every connection a
    LANE input until stage 2 labels the stage inputs (dse_final.txt), as in DFModel's own
    dse.txt and dse_sharded.txt (DAMSim/DLRM/2x4 @ d818f8b)."""
    header = f"# {scenario.setup.name or 'setup'} as DFModel's dse.txt (its input)\n"
    return _text(_dse_input(scenario), header)


def _dse_input(scenario: Scenario) -> setup_pb2.Setup:
    """dse.txt's message (built once, never printed and parsed back: a 20,000-kernel graph
    spends seconds in the text parser)."""
    out = _dse(scenario)
    if execution_options(scenario.setup).dfmodel.pmu > 0:
        for c in out.dataflow_graph.connections:
            c.lane_stage_type = setup_pb2.LANE
    return out


def _planned_kernels(
    out: setup_pb2.Setup, plan: Plan, level: dict[int, int]
) -> Iterator[tuple[setup_pb2.Kernel, str, KernelPlan]]:
    """Each DFModel-variant kernel of `out` the plan maps, with its variant and its plan,
    its topological number set (the stage-1 and stage-2 files both record it)."""
    chosen = {k.name: k for p in plan.phases for k in p.kernels}
    for kernel in out.dataflow_graph.kernels:
        variant = kernel.WhichOneof("kernel_variant")
        k = chosen.get(kernel.name)
        if variant in DFMODEL_VARIANTS and k is not None:
            kernel.topological_number = level[kernel.id]
            yield kernel, variant, k


def dse_sharded_text(scenario: Scenario, plan: Plan) -> str:
    """dse_sharded.txt: dse.txt with stage 1's results as the plan carries them: per kernel
    its topological number and sharding (NO_SHARDING on DFModel's non-LLM branches, and
    where TP is 1), a K-sharded kernel without its own collective an ALL_REDUCE of its
    output; per connection the tensor size (its producer's output), buffer depth and the
    kernels' names. Configurations and shard sizes are stage 2's (dse_final.txt)."""
    out = _dse_input(scenario)
    tp = max(plan.parallelism.get("tp", 1), 1)
    options = execution_options(scenario.setup)
    llm = scenario.setup.execution.HasField("llm") and not options.fft_copies
    level = topological_numbers(out.dataflow_graph)
    for kernel, variant, k in _planned_kernels(out, plan, level):
        body = getattr(kernel, variant)
        dim = k.sharding.split("+")[0] if llm and tp > 1 else ""
        body.sharding = SHARDING.get(dim, setup_pb2.NO_SHARDING)
        if dim == "K" and not body.communication_type:
            body.communication_type = setup_pb2.ALL_REDUCE
            body.communication_size = body.output_tensor_size
    by_id = {k.id: k for k in out.dataflow_graph.kernels}
    for c in out.dataflow_graph.connections:
        src, dst = by_id.get(c.startIdx), by_id.get(c.endIdx)
        if src is None or dst is None or src.WhichOneof("kernel_variant") not in DFMODEL_VARIANTS:
            continue
        c.tensor_size = getattr(src, src.WhichOneof("kernel_variant")).output_tensor_size
        c.startName, c.endName = src.name, dst.name
        later = max(level.values()) + 1 if c.next_instance else 0
        c.buffer_depth = later + level[dst.id] - level[src.id] + 1
    header = (
        f"# MapShard's stage-1 sharding for {plan.scenario}, in DFModel's dse_sharded.txt shape\n"
    )
    return _text(out, header)


def dse_final_text(scenario: Scenario, plan: Plan) -> str | None:
    """The dse_final.txt text of `plan`, or None when the setup is not a DFModel graph."""
    setup = scenario.setup
    if not _is_dfmodel_graph(setup):
        return None
    out = _dse(scenario)
    tp = max(plan.parallelism.get("tp", 1), 1)
    options = execution_options(setup)
    # DFModel's FFT branch splits N over a copy's chips yet records NO_SHARDING; its HPL
    # branch splits M and K over the process grid, NO_SHARDING too
    fft_chips = scenario.system.num_chips // options.fft_copies if options.fft_copies else 0
    hpl = options.dfmodel.branch == "hpl" and plan.cost_model == "dfmodel"
    grid = hpl_grid(scenario, options) if hpl else None
    level = topological_numbers(out.dataflow_graph)
    split: dict[int, bool] = {}
    for kernel, variant, k in _planned_kernels(out, plan, level):
        kernel.config = k.config
        dim = k.sharding.split("+")[0]
        split[kernel.id] = dim in SHARDING and tp > 1
        if fft_chips:
            _shard_sizes(getattr(kernel, variant), "N", fft_chips)
            getattr(kernel, variant).sharding = setup_pb2.NO_SHARDING
            continue
        if grid:
            _grid_sizes(getattr(kernel, variant), grid)
            continue
        _shard_sizes(getattr(kernel, variant), dim if split[kernel.id] else "", tp)
    by_id = {k.id: k for k in out.dataflow_graph.kernels}
    stage = stage_edges(out.dataflow_graph) if options.dfmodel.pmu > 0 else None
    for c in out.dataflow_graph.connections:
        src, dst = by_id.get(c.startIdx), by_id.get(c.endIdx)
        if src is None or dst is None or src.WhichOneof("kernel_variant") not in DFMODEL_VARIANTS:
            continue
        size = getattr(src, src.WhichOneof("kernel_variant")).output_tensor_size
        c.tensor_size = size
        c.shard_tensor_size = size / tp if split.get(src.id) else size
        if fft_chips or grid:  # DFModel's: the producer's shard_M x shard_N x word
            body = getattr(src, src.WhichOneof("kernel_variant"))
            c.shard_tensor_size = body.shard_outer_M * body.shard_N * options.word_bytes
        if stage is not None:  # a PMU chip: DFModel labels each edge a lane or stage input
            c.lane_stage_type = (
                setup_pb2.STAGE if (c.startIdx, c.endIdx) in stage else setup_pb2.LANE
            )
        c.startName, c.endName = src.name, dst.name
        # a next-instance connection waits for the next instance's rounds (numbered on)
        later = max(level.values()) + 1 if c.next_instance else 0
        c.buffer_depth = later + level[dst.id] - level[src.id] + 1
    header = f"# MapShard's chosen mapping for {plan.scenario}, in DFModel's dse_final.txt shape\n"
    return _text(out, header)


def topological_numbers(graph: setup_pb2.DataflowGraph) -> dict[int, int]:
    """Kernel id -> its round in a layer-by-layer topological sort (kernels with no
    unsorted producer take the next number together), as DFModel numbers them; a
    next_instance connection (MapShard's, to the next repeat) orders nothing."""
    ids = [k.id for k in graph.kernels]
    indegree = dict.fromkeys(ids, 0)
    succ: dict[int, list[int]] = {i: [] for i in ids}
    for c in graph.connections:
        if c.next_instance:  # feeds the next instance: no order within this one
            continue
        if c.startIdx in succ and c.endIdx in indegree:
            succ[c.startIdx].append(c.endIdx)
            indegree[c.endIdx] += 1
    level: dict[int, int] = {}
    ready, rnd = [i for i in ids if indegree[i] == 0], 0
    while ready:  # round by round, each kernel touched once (a long chain: not n^2)
        following = []
        for i in ready:
            level[i] = rnd
            for j in succ[i]:
                indegree[j] -= 1
                if indegree[j] == 0:
                    following.append(j)
        ready, rnd = following, rnd + 1
    if len(level) < len(ids):  # a cycle: validation refuses it before any plan exists
        raise ValueError("the dataflow graph has a cycle")
    return level


def hpl_grid(scenario: Scenario, options) -> tuple[int, int] | None:
    """DFModel's HPL process grid (X, Y) of the topology (solver/dfmodel/branches)."""
    per_copy = scenario.system.num_chips // max(options.dfmodel.num_copy, 1)
    return solver_api.hpl_grid(scenario.system, per_copy)


def _grid_sizes(body, grid: tuple[int, int]) -> None:
    """shard_outer_M = ceil(outer M / X), shard_K = ceil(K / Y), shard_N = N."""
    outer = body.outer if body.HasField("outer") else 1
    body.sharding = setup_pb2.NO_SHARDING
    body.shard_outer_M = math.ceil(outer * body.M / grid[0])
    body.shard_N = body.N
    if hasattr(body, "K"):
        body.shard_K = math.ceil(body.K / grid[1])


def stage_edges(graph: setup_pb2.DataflowGraph) -> set[tuple[int, int]]:
    """(startIdx, endIdx) of the connections DFModel labels STAGE: a weight GEMM's first
    input, a two-input GEMM's second, in the order of the connections (the rule of
    solver/dfmodel/pmu.stage_inputs); every other one is LANE."""
    variant = {k.id: k.WhichOneof("kernel_variant") for k in graph.kernels}
    seen: dict[int, int] = {}
    out = set()
    for c in graph.connections:
        nth = seen.get(c.endIdx, 0)
        seen[c.endIdx] = nth + 1
        v = variant.get(c.endIdx)
        if (v == "gemm_input1_weight" and nth == 0) or (v == "gemm_input1_input2" and nth == 1):
            out.add((c.startIdx, c.endIdx))
    return out


def _shard_sizes(body, dim: str, tp: int) -> None:
    """shard_outer_M (outer x M), shard_K, shard_N: the loop sizes one chip holds."""
    outer = body.outer if body.HasField("outer") else 1
    sizes = {"outer": outer, "M": body.M, "N": body.N}
    if hasattr(body, "K"):
        sizes["K"] = body.K
    if dim:
        sizes[dim] = math.ceil(sizes[dim] / tp)
    body.sharding = SHARDING.get(dim, setup_pb2.NO_SHARDING)
    body.shard_outer_M = sizes["outer"] * sizes["M"]
    body.shard_N = sizes["N"]
    if "K" in sizes:
        body.shard_K = sizes["K"]
