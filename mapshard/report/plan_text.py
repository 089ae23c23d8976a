"""plan.txt: the setup the plan was made for, with the mapping MapShard chose pinned, so that
`mapshard run plan.txt` reproduces the plan and deleting a pin has that choice searched again.

The workload stays the user's (a generated LLM workload keeps its phases, KV cache and step
composition); what the search chose is written as the setup fields that pin it:
- the parallel layout: execution.placement (solver.search.placement_pin);
- the training knobs the outer search chose: workload.llm_training micro_batch, recompute,
  zero_stage, virtual_pipeline;
- per kernel its configuration (fused search only: kernel by kernel each kernel is its own),
  sharding and tile: a dataflow_graph's kernels' own fields, else one execution.pin per
  kernel (generator.pins applies them to the generated graphs by name).
A pinned plan solves one layout with one option per kernel, so it re-runs fast."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mapshard.scenario import Scenario, scenario_options
from mapshard.views import Views
from schema import setup_pb2
from schema.pins import parse_placement, placement_text
from schema.text_out import message_text
from solver.plan import Plan

RECOMPUTE = {
    "none": setup_pb2.RECOMPUTE_NONE,
    "selective": setup_pb2.RECOMPUTE_SELECTIVE,
    "full": setup_pb2.RECOMPUTE_FULL,
}
# the llm_training fields of the knobs the outer search may choose (Plan.training)
KNOBS = (
    "micro_batch",
    "recompute",
    "zero_stage",
    "virtual_pipeline",
    "expert_parallel",
    "expert_tensor_parallel",
)
WIDTH = 88  # header lines, before "# "
OVERLAP = {
    "perfect": setup_pb2.PERFECT,
    "serial_network": setup_pb2.SERIAL_NETWORK,
    "none": setup_pb2.NO_OVERLAP,
}


def plan_setup_texts(scenario: Scenario, plan: Plan, views: Views | None = None) -> str:
    """plan.txt's text: a header saying what is pinned and how to unpin it, then the setup.
    A request stream's plan is one of its engine steps: its plan.txt is the stream's setup
    with the layout pinned when the stream fixed it (`_stream_text`)."""
    stream = views.stream if views is not None else None
    if stream is not None and stream.setup is not None:
        return _stream_text(scenario, plan, stream.setup, stream.parallelism_fixed)
    original = scenario.setup
    setup = _copied(original, scenario)
    fused = scenario_options(scenario).dataflow
    if setup.HasField("dataflow_graph"):
        _pin_graph_kernels(setup.dataflow_graph, plan, fused)
    else:
        _pin_kernels(setup.execution, plan, fused)
    knobs = _pin_training(setup, plan)
    placed = _pin_placement(setup.execution, scenario, plan)
    _keep_overlap(setup, original, scenario)
    header = _header(scenario, plan, views, fused, knobs, placed)
    return _commented(header) + "\n" + message_text(setup)


def _stream_text(scenario: Scenario, plan: Plan, original: setup_pb2.Setup, fixed: bool) -> str:
    """A stream solves one plan per engine step shape: no per-kernel pin fits them all, so
    its plan.txt is the stream's setup with the layout the stream fixed; every step is
    searched again as in the run (the same input gives the same plans)."""
    setup = _copied(original, scenario)
    placed = fixed and _pin_placement(setup.execution, scenario, plan)
    _keep_overlap(setup, original, scenario)
    pinned = (
        " with the parallel layout the stream fixed pinned (execution.placement: delete it "
        "to search it again)"
        if placed
        else ""
    )
    intro = (
        "A request stream solves one plan per engine step shape, so no kernel pin fits it: "
        f"this is the stream's setup{pinned}. `mapshard run plan.txt` solves its steps again, "
        "to the same plans and the same stream; the plan shown is one engine step's."
    )
    header = [f"MapShard plan for {scenario.name or 'this setup'}: {_layout(plan)}."]
    header += textwrap.wrap(intro, WIDTH)
    return _commented(header) + "\n" + message_text(setup)


def _copied(original: setup_pb2.Setup, scenario: Scenario) -> setup_pb2.Setup:
    """A copy of `original` named as the scenario, its relative file names made absolute."""
    setup = setup_pb2.Setup()
    setup.CopyFrom(original)
    if scenario.name:  # the result folder is not the scenario's: keep its name
        setup.name = scenario.name
    _absolute_paths(setup, scenario.path)
    return setup


def _keep_overlap(setup: setup_pb2.Setup, original: setup_pb2.Setup, scenario: Scenario) -> None:
    """An execution block added by the pins must not change the overlap the plan assumed
    (without a block the default is the chip's or PERFECT, with one NO_OVERLAP)."""
    if setup.HasField("execution") and not original.HasField("execution"):
        setup.execution.overlap = OVERLAP[scenario_options(scenario).overlap_name]


def _commented(lines: list[str]) -> str:
    return "\n".join(f"# {line}" if line else "#" for line in lines)


def _pin_graph_kernels(graph: setup_pb2.DataflowGraph, plan: Plan, fused: bool) -> None:
    """Each kernel's own config (fused search only), sharding and tile fields."""
    chosen = {k.name: k for p in plan.phases for k in p.kernels}
    for kernel in graph.kernels:
        k = chosen.get(kernel.name)
        if k is None:
            continue
        if fused:
            kernel.config = k.config
        kernel.sharding = k.sharding
        kernel.tile = k.tile


def _pin_kernels(execution: setup_pb2.Execution, plan: Plan, fused: bool) -> None:
    """One execution.pin per kernel of every phase, in the plan's order."""
    execution.ClearField("pin")
    for phase in plan.phases:
        for k in phase.kernels:
            pin = execution.pin.add(phase=k.phase, kernel=k.name, sharding=k.sharding)
            if fused:
                pin.config = k.config
            if k.tile:
                pin.tile = k.tile


def _pin_training(setup: setup_pb2.Setup, plan: Plan) -> list[str]:
    """The training knobs the plan runs, as the llm_training fields that pin them; returns
    the names of those the outer search chose."""
    t = plan.training
    if not t or setup.workload.WhichOneof("kind") != "llm_training":
        return []
    train = setup.workload.llm_training
    for knob in KNOBS:
        if knob in t:
            value = t[knob]
            setattr(train, knob, RECOMPUTE[str(value)] if knob == "recompute" else int(value))
    return [str(k) for k in t.get("searched", ())]  # type: ignore[attr-defined]


def _pin_placement(execution: setup_pb2.Execution, scenario: Scenario, plan: Plan) -> bool:
    """execution.placement = the plan's layout (on more than one chip, with levels a
    placement can name); False when not written."""
    levels = [lv.name for lv in scenario.system.network]
    if plan.num_chips <= 1 or len(set(levels)) != len(levels):
        return False
    words = ", ".join(f"{name.upper()}={span}" for name, span in plan.placement.items())
    placement = parse_placement(words)
    if placement is None:  # a group no setup pins (DFModel's FFT copies: "FFT=x:8")
        return False
    execution.placement = placement_text(placement)
    return True


def _absolute_paths(setup: setup_pb2.Setup, path: Path) -> None:
    """Files the setup names relative to its own folder (a model's config.json, a chip
    table) named absolutely: plan.txt lives in the result folder."""
    folder = Path(path).parent
    kind = setup.workload.WhichOneof("kind") if setup.HasField("workload") else None
    if kind in ("llm_training", "llm_inference"):
        model = getattr(setup.workload, kind).model
        ref = model.hf_model
        if ref and not Path(ref).expanduser().is_absolute() and (folder / ref).exists():
            model.hf_model = str((folder / ref).resolve())
    table = setup.system.chip_table
    if table and not Path(table).is_absolute() and (folder / table).exists():
        setup.system.chip_table = str((folder / table).resolve())


def _header(
    scenario: Scenario,
    plan: Plan,
    views: Views | None,
    fused: bool,
    knobs: list[str],
    placed: bool,
) -> list[str]:
    """What plan.txt pins and how to unpin each choice, true for the file below it."""
    kernels = sum(len(p.kernels) for p in plan.phases)
    fields = "config, sharding or tile" if fused else "sharding or tile"
    title = (
        f"MapShard plan for {scenario.name or 'this setup'}: {_layout(plan)}, "
        f"{len(plan.phases)} phase(s), "
        f"{kernels} kernels."
    )
    intro = "`mapshard run plan.txt` reproduces this plan: the workload is the one you gave,"
    if views is not None and views.serving is not None:
        intro = (
            "This is the setup of the serving view's chosen point (the serving block "
            "removed): `mapshard run plan.txt` reproduces that point's plan;"
        )
    intro += (
        " and the mapping MapShard chose is pinned by the fields below. To have a choice "
        "searched again, delete what pins it:"
    )
    lines = [title, *textwrap.wrap(intro, WIDTH)]
    if placed:
        lines.append("- execution.placement: the parallel layout (degrees and topology levels);")
    if knobs:
        knob = f"- workload.llm_training {', '.join(knobs)}: the knob(s) the search chose;"
        lines += textwrap.wrap(knob, WIDTH, subsequent_indent="  ")
    if scenario.setup.HasField("dataflow_graph"):
        lines.append(f"- a kernel's {fields} field in dataflow_graph: that choice of that kernel.")
    else:
        lines.append("- a whole execution.pin { ... }: every choice of that kernel; one of its")
        lines.append(f"  lines ({fields}): that choice only.")
    if placed or knobs:
        lines.append("Kernel pins suit this layout and these knobs: to search those afresh, delete")
        lines.append("the kernel pins too.")
    if not fused:
        lines.append("Kernel by kernel, each kernel runs as its own configuration: none is pinned.")
    lines.append("")
    return lines


def _layout(plan: Plan) -> str:
    deg = {k: v for k, v in sorted(plan.parallelism.items()) if v > 1}
    return " ".join(f"{k.upper()}{v}" for k, v in deg.items()) or "one chip"
