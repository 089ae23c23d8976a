"""plan.txt: a valid setup with the chosen mapping filled in (DFModel style), so a user can
pin it, edit it and run it again."""

from __future__ import annotations

from google.protobuf import text_format

from generator.proto_write import graph_to_proto
from mapshard.scenario import Scenario, plan_workload, scenario_options
from schema import setup_pb2
from solver.plan import Plan


def plan_setup_texts(scenario: Scenario, plan: Plan) -> str:
    setup = setup_pb2.Setup()
    setup.CopyFrom(scenario.setup)
    phase = max(plan.phases, key=lambda p: p.latency_s * p.count * p.steps)
    chosen = {k.name: k for k in phase.kernels}
    header = [
        f"# MapShard plan for {plan.scenario}: phase '{phase.name}' "
        f"({len(phase.configs)} configurations).",
        "# Every kernel carries its chosen configuration, sharding and tile, and running",
        "# this file keeps them: delete a kernel's config or tile (or set",
        "# execution.pin_sharding: false) to have that choice searched again.",
    ]
    if not setup.HasField("dataflow_graph"):
        phases = plan_workload(scenario, plan).phases
        graph = next(p.graph for p in phases if p.name == phase.name)
        setup.ClearField("workload")
        setup.dataflow_graph.CopyFrom(graph_to_proto(graph))
        header.append(f"# Generated from the workload; the graph runs {phase.count} time(s).")
        setup.dataflow_graph.repeat = phase.count
    for kernel in setup.dataflow_graph.kernels:
        k = chosen.get(kernel.name)
        if k is None:
            continue
        kernel.config = k.config
        kernel.sharding = k.sharding
        kernel.tile = k.tile
    # the resolved execution semantics, written out: adding an execution block must not
    # change what the plan assumed (overlap defaults differ with and without one)
    ex = scenario_options(scenario)
    setup.execution.overlap = (
        setup_pb2.SERIAL_NETWORK
        if ex.serialize_network
        else setup_pb2.PERFECT
        if ex.overlap
        else setup_pb2.NO_OVERLAP
    )
    setup.execution.pin_sharding = True
    return "\n".join(header) + "\n" + text_format.MessageToString(setup)
