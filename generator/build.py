"""Setup -> Workload: the one entry point of the generators.

(a) `dataflow_graph` given: the explicit graph (kind "graph", one phase "graph" x repeat);
    with `execution.llm` it is a DFModel LLM training layer: phase "layer" x
    num_layer / num_layer_in_graph (kind "training").
(b) no graph, no workload, `execution.llm` set: DFModel's GPT layer graph generated from the
    llm block (41 kernels), then as (a).
(c) `workload`: the generator for its kind.

Each generator family is named in FAMILIES and imported when a setup first asks for it
(`importlib.import_module`), not with this module: a run builds one family, and importing
all of them up front (LLM training and inference, DLRM, HPL, FFT, GEMM, DFModel's GPT layer,
the dataflow_graph reader) made every run's start-up pay for the ones it never builds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from generator.graph import Kernel, ModelInfo, OperandRole, Pass, Phase, Workload
from generator.models import load_model
from generator.pins import apply_pins
from generator.precision import default_dtype, resolve_precision
from schema import setup_pb2
from schema.errors import SetupError
from schema.lazy import load

#: generator -> (module, function) that builds it, imported on first use: the workload
#: kinds (setup.workload), DFModel's GPT layer from execution.llm and the dataflow_graph
#: reader
FAMILIES: dict[str, tuple[str, str]] = {
    "llm_training": ("generator.llm_training", "training_workload"),
    "llm_inference": ("generator.llm_inference", "inference_workload"),
    "dlrm": ("generator.dlrm", "dlrm_workload"),
    "hpl": ("generator.hpl", "hpl_workload"),
    "fft": ("generator.fft", "fft_workload"),
    "gemm": ("generator.gemm", "gemm_workload"),
    "attention": ("generator.attention", "attention_workload"),
    "dfmodel_gpt": ("generator.dfmodel_gpt", "dfmodel_gpt_from_llm"),
    "dataflow_graph": ("generator.proto_graph", "graph_from_proto"),
}


def family(name: str) -> Callable[..., Any]:
    """The function that builds generator `name` (FAMILIES), its module imported now."""
    return load(FAMILIES[name])


def build_workload(setup: setup_pb2.Setup, setup_path: Path, num_chips: int) -> Workload:
    """`num_chips`: the resolved system's chip count (a preset or a topology may set it; the
    setup's own `system.num_chip` may be 0 or absent), for generators whose graph covers
    the whole machine (DLRM's global batch). The generator never reads `system`."""
    setup_path = Path(setup_path)
    workload = _build(setup, setup_path, num_chips)
    check_loop_sizes(workload, setup_path)
    # the mapping pinned by name (plan.txt), on the graphs as generated
    return apply_pins(workload, setup.execution.pin, setup_path)


# The data-movement frontier counts a matrix kernel's elements in 64-bit integers (M*K times
# a pass count of at most N, batch dims apart): M*K*N must stay below 2^62. That is 9.2e18
# FLOP for one batch slice, about three hours of one H100: only a typo gets there. Other
# kernels (attention, elementwise) are priced in floats, whatever their loop nest.
MAX_LOOP_POINTS = 2**62


def check_loop_sizes(workload: Workload, setup_path: Path) -> None:
    """A matrix kernel whose tilings the cost model cannot count exactly is refused up front."""
    for phase in workload.phases:
        for kernel in phase.graph.kernels:
            points = _matrix_points(kernel)
            if points >= MAX_LOOP_POINTS:
                dims = " x ".join(f"{d}={size}" for d, size in kernel.dims)
                raise SetupError(
                    f"{setup_path}: kernel {kernel.name} ({dims}) has {points:.3g} "
                    f"M x K x N points, beyond the {MAX_LOOP_POINTS:.3g} the cost model "
                    "counts exactly; check the sizes (one such kernel is over 9.2e18 FLOP)"
                )


def _matrix_points(kernel: Kernel) -> int:
    """M*K*N of a two-input matrix kernel (its dims less those all three operands share),
    0 for any other kernel."""
    if not kernel.is_matrix:
        return 0
    ins, outs = kernel.matrix_operands
    shared = set(ins[0].dims) & set(ins[1].dims) & set(outs[0].dims)
    points = 1
    for dim, size in kernel.dims:
        if dim not in shared:
            points *= int(size)
    return points


def _build(setup: setup_pb2.Setup, setup_path: Path, num_chips: int) -> Workload:
    has_graph = setup.HasField("dataflow_graph")
    has_workload = setup.HasField("workload") and setup.workload.WhichOneof("kind") is not None
    has_llm = setup.execution.HasField("llm")
    word = setup.execution.word or 2.0
    if has_graph and has_workload:
        raise SetupError(f"{setup_path}: give either `dataflow_graph` or `workload`, not both")
    if has_graph or (has_llm and not has_workload):
        if has_graph:
            dg = setup.dataflow_graph
        else:
            _check_llm(setup.execution.llm, setup_path)
            dg = family("dfmodel_gpt")(setup.execution.llm, word)
        return _graph_workload(setup, setup_path, dg, word)
    if not has_workload:
        if setup.HasField("workload"):
            raise SetupError(
                f"{setup_path}: workload has no kind; give one of llm_training, "
                "llm_inference, dlrm, hpl, fft, gemm"
            )
        raise SetupError(
            f"{setup_path}: nothing to map; give `workload {{ ... }}` (a "
            "generator request) or `dataflow_graph {{ ... }}`"
        )
    return _generated(setup, setup_path, num_chips)


def _check_llm(llm: setup_pb2.Llm, path: Path) -> None:
    bad = [
        f"{path}: execution.llm.{f} must be > 0, got {getattr(llm, f)}"
        for f in ("hidden_dim", "head_dim", "num_head", "seq_len")
        if getattr(llm, f) <= 0
    ]
    if bad:
        raise SetupError(bad)


def _graph_workload(
    setup: setup_pb2.Setup, path: Path, dg: setup_pb2.DataflowGraph, word: float
) -> Workload:
    ex = setup.execution
    if not ex.HasField("llm"):
        # DFModel's DLRM/HPL/FFT/... graphs: every kernel's collective spans all chips
        group = "all" if ex.WhichOneof("workload_variant") else ""
        graph = family("dataflow_graph")(
            dg,
            path=path,
            name="graph",
            word=word,
            pin_sharding=ex.pin_sharding,
            collective_group=group,
        )
        if dg.HasField("repeat") and dg.repeat <= 0:
            raise SetupError(f"{path}: dataflow_graph.repeat must be > 0, got {dg.repeat}")
        count = dg.repeat if dg.HasField("repeat") else 1
        # DFModel's DLRM graph is one batch item: its step runs it global_batch_size times
        batch = ex.dlrm.global_batch_size if ex.HasField("dlrm") else 0
        notes = (
            (
                f"DFModel DLRM graph: one graph instance per batch item; the step runs it "
                f"execution.dlrm.global_batch_size = {batch} times",
            )
            if batch > 1
            else ()
        )
        return Workload(
            kind="graph",
            phases=(Phase("graph", graph, count=count, steps=max(batch, 1)),),
            activation_bytes_per_element=word,
            weight_bytes_per_param=word,
            notes=notes,
        )
    llm = ex.llm
    per_graph = max(1, llm.num_layer_in_graph)
    if llm.num_layer < 0 or llm.num_layer % per_graph:
        raise SetupError(
            f"{path}: execution.llm.num_layer ({llm.num_layer}) must be a "
            f"multiple of num_layer_in_graph ({per_graph})"
        )
    read = family("dataflow_graph")
    graph = read(dg, path=path, name="layer", word=word, pin_sharding=ex.pin_sharding)
    count = max(1, llm.num_layer // per_graph)
    params = sum(k.weight_params for k in graph.kernels if k.pass_ == Pass.FWD)
    has_weights = any(o.role == OperandRole.WEIGHT for k in graph.kernels for o in k.operands)
    model = (
        ModelInfo(
            name=setup.name or "dfmodel_llm",
            num_params=params * count,
            num_active_params=params * count,
            num_layers=llm.num_layer or count,
            hidden_size=llm.hidden_dim,
            num_heads=llm.num_head,
            num_kv_heads=llm.num_head,
            head_dim=llm.head_dim,
            vocab_size=llm.vocab_size,
            params_per_layer=params // per_graph,
        )
        if has_weights
        else None
    )
    micro = llm.micro_batch_size or 1
    forward_only = all(k.pass_ in (Pass.FWD, Pass.RECOMPUTE) for k in graph.kernels)
    notes = [
        "DFModel LLM graph: one graph instance is one sequence through "
        f"{per_graph} layer(s); a micro-batch of {micro} sequence(s) runs it {micro} time(s)",
    ]
    if forward_only:
        notes.append(
            "forward-only graph (no BWD kernel): a pipelined forward pass of the global "
            "batch, with no gradient reduction and no optimizer step"
        )
    return Workload(
        kind="training",
        phases=(Phase("layer", graph, count=count),),
        model=model,
        global_batch=llm.global_batch_size or 1,
        micro_batch=micro,
        seq_len=llm.seq_len,
        weight_bytes_per_param=word,
        activation_bytes_per_element=word,
        instances_per_micro_batch=micro,
        forward_only=forward_only,
        notes=tuple(notes),
    )


def _generated(setup: setup_pb2.Setup, path: Path, num_chips: int) -> Workload:
    wl = setup.workload
    kind = wl.WhichOneof("kind")
    if kind == "llm_training":
        cfg = load_model(wl.llm_training.model, path, "workload.llm_training.model")
        prec = resolve_precision(wl.precision)
        return family(kind)(wl.llm_training, cfg, prec, path, max(1, num_chips))
    if kind == "llm_inference":
        cfg = load_model(wl.llm_inference.model, path, "workload.llm_inference.model")
        prec = resolve_precision(wl.precision)
        return family(kind)(wl.llm_inference, cfg, prec, path, max(1, num_chips))
    if kind == "dlrm":
        return family(kind)(wl.dlrm, resolve_precision(wl.precision), max(1, num_chips), path)
    if kind == "hpl":
        return family(kind)(
            wl.hpl, resolve_precision(wl.precision, default_dtype(setup)), path, num_chips
        )
    if kind == "fft":
        return family(kind)(wl.fft, resolve_precision(wl.precision, default_dtype(setup)), path)
    if kind == "attention":
        return family(kind)(wl.attention, resolve_precision(wl.precision), path)
    assert kind == "gemm", kind
    return family(kind)(wl.gemm, resolve_precision(wl.precision), path)
