"""What one pipeline stage runs and holds: its share of the layer graphs and, on the first
and last stages, the graphs outside the layers (embedding first, LM head and loss last).

Why a module: the step assembly (assemble.training_times), the memory check and the DRAM
split all ask which graphs share a stage; one answer keeps them in step.
"""

from __future__ import annotations

import math

from generator.graph import OperandRole, Phase, Workload


def layer_phases(workload: Workload) -> list[Phase]:
    return [p for p in workload.phases if p.role == "layer"]


def head_phases(workload: Workload) -> list[Phase]:
    return [p for p in workload.phases if p.role != "layer"]


def model_layers(workload: Workload) -> int:
    """The model's decoder layers (its layer phases may split them by kind: dense and MoE
    layers, full and sliding-window attention), else the largest layer phase's count."""
    if workload.model is not None and workload.model.num_layers > 0:
        return workload.model.num_layers
    return max((p.count for p in layer_phases(workload)), default=1)


def instances_per_stage(phase: Phase, pp: int, layers: int = 0) -> float:
    """Graph instances of a phase one pipeline stage holds: its share of the layers, or the
    whole of a head phase (the stage that has it holds all of it). `layers`: the model's
    (`model_layers`) when its layer phases split them by kind: the busiest stage holds
    ceil(layers / PP) of them, each kind in its share (interleaved kinds: GPT-OSS's
    alternating windows), not ceil(count / PP) of every kind, which would overfill it."""
    if phase.role != "layer":
        return phase.count
    if layers > phase.count:
        return math.ceil(layers / pp) * phase.count / layers
    return math.ceil(phase.count / pp)


def stage_layers(workload: Workload, phase: Phase, pp: int) -> float:
    """`instances_per_stage` of a layer phase of `workload`."""
    return instances_per_stage(phase, pp, model_layers(workload))


def stage_work_s(workload: Workload, phase_latency: dict[str, float], pp: int) -> float:
    """One micro-batch's work on the busiest pipeline stage: its share of the layers beside
    the larger edge (`edge_stage_s`); with `edges_in_pipeline_split` the edges take a layer's
    place each, u = ceil((layers + 2) / PP) places per stage (u - 1 layers and an edge on
    the first and last, u layers between), the layers at their mean time."""
    layers = layer_phases(workload)
    stack = sum(stage_layers(workload, p, pp) * phase_latency[p.name] for p in layers)
    edge = edge_stage_s(workload, phase_latency, pp)
    count = sum(p.count for p in layers)
    if pp <= 1 or not workload.edges_in_pipeline_split or count == 0:
        return stack + edge
    mean = sum(p.count * phase_latency[p.name] for p in layers) / count
    places = math.ceil((count + 2) / pp)
    middle = places * mean if pp > 2 else 0.0  # a stage between the first and the last
    return max(middle, (places - 1) * mean + edge)


def edge_stage_s(workload: Workload, phase_latency: dict[str, float], pp: int) -> float:
    """Time of the graphs outside the layers on the busiest stage, per micro-batch: the
    embedding ("embed" phases) runs on the first stage, the LM head and loss on the last,
    so with PP a stage runs the larger of the two; without, the one stage runs both."""
    edges = head_phases(workload)
    first = sum(p.count * phase_latency[p.name] for p in edges if p.role == "embed")
    last = sum(p.count * phase_latency[p.name] for p in edges if p.role != "embed")
    return max(first, last) if pp > 1 else first + last


def weight_group(phase: Phase, pp: int = 1) -> tuple[str, str]:
    """Phases that run the same weights (prefill and decode of one layer stack, every
    decode step) share a group; the stored weights of a group are the largest of its
    phases'. `prefill_head` / `decode_head` -> (head, head), `decode_moe` -> (layer, moe).
    With PP the embedding (first stage) and the LM head (last stage) are one group too: no
    stage holds both, so the busiest holds the larger."""
    role = "head" if phase.role == "embed" and pp > 1 else phase.role
    return role, phase.name.partition("_")[2]


def boundary_bytes(workload: Workload, phase: Phase) -> float:
    """Activation bytes crossing a pipeline-stage boundary for one graph instance: the
    layer input (full recompute keeps only it, solver.search.activations)."""
    if workload.model and workload.model.hidden_size:
        # a graph without a tokens dim (DFModel's) is one sequence of seq_len tokens
        tokens = _tokens(phase) or workload.seq_len or 1
        return tokens * workload.model.hidden_size * workload.activation_bytes_per_element
    first = phase.graph.kernels[0]
    return sum(first.operand_bytes(o) for o in first.inputs if o.role == OperandRole.INPUT)


def _tokens(phase: Phase) -> int:
    for k in phase.graph.kernels:
        sizes = k.dim_sizes
        if "tokens" in sizes:
            return sizes["tokens"]
    return 0


def splits_batch(workload: Workload, data_ranks: int) -> bool:
    """A training step's global batch is a whole number of micro-batches on each of
    `data_ranks` (DP x EP), as Megatron-LM asserts: a layout that would pad the last one runs
    sequences the step does not count."""
    if workload.kind != "training" or workload.global_batch <= 0:
        return True
    per_rank, left = divmod(workload.global_batch, data_ranks)
    return left == 0 and per_rank % max(workload.micro_batch, 1) == 0


def micro_batches(workload: Workload, dp: int) -> int:
    """Micro-batches per step of each of `dp` data ranks (DP x EP: Choice.data_ranks)."""
    return max(1, math.ceil(workload.global_batch / (max(workload.micro_batch, 1) * dp)))
