"""Activation bytes per chip, each tensor at the share of it the plan's shardings leave on a
chip (issue 33).

Why: the time model moves every tensor at the share its producer's sharding leaves on a
chip (solver.cost.layouts.output_layout), so the memory check holds the same tensors at the
same shares (DESIGN.md, "time and memory agree"). Dividing every activation by TP
under-counts a plan that keeps tensors whole (norms and residual adds without sequence
parallelism run whole on every chip of the TP group), and a graph's largest transient
tensors, the loss's FP32 logits and their gradient, were not counted at all.

Two quantities per graph instance (one micro-batch through one layer, or the LM head):
- kept: what a training layer keeps for its backward pass (Korthikanti et al. 2022): the
  layer input and every forward tensor a backward or recompute kernel reads, each distinct
  tensor once, plus the dropout keep masks; nothing of a recomputed kernel; under full
  recompute the layer input only. A graph whose backward reads are not wired (DFModel,
  proto): every forward output of a kernel not recomputed.
- peak: the most bytes live at once while the graph's kernels run in their graph order (a
  topological order: forward, then backward). A tensor lives from its producer to its last
  reader; one nothing in the graph reads leaves it and lives to the end; an input from
  outside the graph lives from its first reader to its last (inputs of one shape and type
  are one tensor: the layer input read by its norm and by the residual add). A kernel the
  generator marks in place (Kernel.in_place: the FP32 loss overwrites its logits copy with
  exp, then the softmax, then the gradient, generator/ops_loss.py) writes its output over
  that input when it is its last reader; every other output takes a buffer of its own.
  Weight gradients and weights are the gradients' and weights' terms, KV-cache operands
  the KV cache's.

Layouts: the plan's shardings (kernel name -> sharding, per phase), or none given: each
tensor at the least share any sharding of its producer (of its reader, for an input from
outside the graph) leaves it, a floor no plan goes below (the pre-solve memory check and
the DRAM left to weights, solver.search.dram_split).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from generator.graph import Kernel, Operand, OperandRole, Pass, Phase, Workload
from solver.cost.layouts import output_layout
from solver.cost.menus import sharding_choices
from solver.cost.problem import REPLICATED, MappingProblem
from solver.search.stages import boundary_bytes

# kernel name -> sharding, one phase's plan
Shardings = Mapping[str, str]
# Output operand of the dropout kernels (generator/ops.py, ops_attention.py): the keep mask
# the backward pass reads through the kernel's gradient rule, without a graph edge.
MASK_OPERAND = "mask"
_NOT_ACTIVATIONS = (Pass.WGRAD, Pass.OPTIMIZER)  # their outputs: gradients, weights


@dataclass(frozen=True)
class PhaseActivations:
    """One graph instance's activations per chip: what a training layer keeps for its
    backward (`kept`), the most live at once (`peak`), and the share of the KV cache its
    kernels leave on a chip (`kv_share`; 0: no kernel touches the cache)."""

    kept: float
    peak: float
    kv_share: float = 0.0


def shardings_of(problem: MappingProblem, choice: Sequence[int]) -> dict[str, str]:
    """The sharding of every kernel a solution chose (kernel name -> sharding)."""
    return {
        menu.name: menu.options[o].sharding
        for menu, o in zip(problem.kernels, choice, strict=False)
        if o >= 0
    }


def _share(kernel: Kernel, dim: str, dims: tuple[str, ...], tp: int) -> float:
    """Per-chip share of an operand split along `dim` over `tp` chips (ceil of the dim)."""
    if tp <= 1 or not dim or dim not in dims:
        return 1.0
    size = kernel.dim_sizes[dim]
    return math.ceil(size / tp) / size


class Layout:
    """The share of each tensor one phase's plan leaves on a chip (module docstring)."""

    def __init__(self, tp: int, shardings: Shardings | None = None):
        self.tp = tp
        self.shardings = shardings

    def _choices(self, kernel: Kernel) -> list[str]:
        if self.shardings is not None and kernel.name in self.shardings:
            return [self.shardings[kernel.name]]
        return sharding_choices(kernel, self.tp)

    def output(self, kernel: Kernel, op: Operand) -> float:
        """Share of output `op` the producer's sharding leaves (its output layout)."""
        return min(
            _share(kernel, output_layout(kernel, s, self.tp), op.dims, self.tp)
            for s in self._choices(kernel)
        )

    def read(self, kernel: Kernel, op: Operand) -> float:
        """Share of input `op` the reader's sharding reads (the dim it splits)."""
        return min(
            _share(
                kernel, "" if s.split("+")[0] == REPLICATED else s.split("+")[0], op.dims, self.tp
            )
            for s in self._choices(kernel)
        )


# floors by (phase identity, TP, what else they read): the outer search asks for the floor
# of every candidate, thousands per solve, over a few hundred graphs (held, so their ids
# cannot be reused while kept, as solver.cost.memo.per_phases)
_FLOORS: dict[tuple, tuple[Phase, PhaseActivations]] = {}
_FLOORS_SIZE = 2048


def phase_activations(workload: Workload, phase: Phase, layout: Layout) -> PhaseActivations:
    """`kept`, `peak` and `kv_share` of one instance of the phase's graph."""
    if layout.shardings is not None:
        return _phase_activations(workload, phase, layout)
    key = (id(phase), layout.tp, workload.recompute, workload.backward_reads_wired)
    key += (boundary_bytes(workload, phase),)
    hit = _FLOORS.get(key)
    if hit is not None and hit[0] is phase:
        return hit[1]
    if len(_FLOORS) >= _FLOORS_SIZE:
        _FLOORS.clear()
    value = _phase_activations(workload, phase, layout)
    _FLOORS[key] = (phase, value)
    return value


def _phase_activations(workload: Workload, phase: Phase, layout: Layout) -> PhaseActivations:
    kv = [
        layout.read(k, o)
        for k in phase.graph.kernels
        for o in k.operands
        if o.role == OperandRole.KV_CACHE
    ]
    return PhaseActivations(
        kept_bytes(workload, phase, layout), peak_bytes(phase, layout), max(kv, default=0.0)
    )


def _input_share(phase: Phase, layout: Layout) -> float:
    """Share of the layer input on a chip: the layout the previous instance's last forward
    kernel leaves its output in (the boundary edge), else what the first kernel reads."""
    kernels = {k.name: k for k in phase.graph.kernels}
    for e in phase.graph.boundary:
        src = kernels[e.src]
        if src.pass_ == Pass.FWD:
            return layout.output(src, _source(src, e.src_operand))
    first = phase.graph.kernels[0]
    inputs = [o for o in first.operands if o.role == OperandRole.INPUT]
    return layout.read(first, inputs[0]) if inputs else 1.0


def _source(kernel: Kernel, name: str) -> Operand:
    """The output operand an edge carries ("" = the kernel's first output)."""
    return kernel.operand(name) if name else kernel.outputs[0]


def kept_bytes(workload: Workload, phase: Phase, layout: Layout) -> float:
    """Activations one layer instance keeps for its backward pass, per chip (module
    docstring): the tensors a later pass reads, each at its producer's share."""
    inputs = boundary_bytes(workload, phase) * _input_share(phase, layout)
    if workload.recompute == "full":
        return inputs
    kernels = {k.name: k for k in phase.graph.kernels}
    if not workload.backward_reads_wired:
        recomputed = {
            k.name.removesuffix("_recompute")
            for k in phase.graph.kernels
            if k.pass_ == Pass.RECOMPUTE
        }
        return sum(
            k.operand_bytes(o) * layout.output(k, o)
            for k in phase.graph.kernels
            if k.pass_ == Pass.FWD and k.name not in recomputed
            for o in k.outputs
        )
    kept = {
        n for n, k in kernels.items() if k.pass_ == Pass.FWD and f"{n}_recompute" not in kernels
    }
    read: dict[str, set[float]] = {n: set() for n in kept}
    for e in phase.graph.edges:
        if e.src in kept and kernels[e.dst].pass_ != Pass.FWD:
            src = kernels[e.src]
            op = _source(src, e.src_operand)
            whole = e.tensor_bytes or src.operand_bytes(op)
            read[e.src].add(whole * layout.output(src, op))
    saved = inputs
    for n in kept:
        k = kernels[n]
        outs = sum(k.operand_bytes(o) * layout.output(k, o) for o in k.outputs)
        masks = sum(
            k.operand_bytes(o) * layout.output(k, o) for o in k.outputs if o.name == MASK_OPERAND
        )
        saved += min(sum(read[n]) + masks, outs)
    return saved


@dataclass
class _Tensor:
    """One tensor of a graph instance: the kernels that write it first and read it last
    (indices in graph order), its bytes per chip, bytes per element and elements."""

    first: int
    last: int
    size: float
    per_element: float
    elements: int


def peak_bytes(phase: Phase, layout: Layout) -> float:
    """The most activation bytes live at once while one instance of the graph runs, per
    chip (module docstring)."""
    kernels = phase.graph.kernels
    at = {k.name: i for i, k in enumerate(kernels)}
    tensors: dict[tuple, _Tensor] = {}
    for i, k in enumerate(kernels):
        if k.pass_ not in _NOT_ACTIVATIONS:
            for o in k.outputs:
                size = k.operand_bytes(o) * layout.output(k, o)
                elements = k.operand_elements(o)
                tensors[k.name, o.name] = _Tensor(i, -1, size, o.bytes_per_element, elements)
    reads: dict[tuple[str, str], tuple] = {}  # (kernel, input operand) -> the tensor it reads
    for e in phase.graph.edges:
        key = (e.src, _source(kernels[at[e.src]], e.src_operand).name)
        if key in tensors:
            tensors[key].last = max(tensors[key].last, at[e.dst])
            reads[e.dst, e.dst_operand] = key
    for i, k in enumerate(kernels):
        for o in k.operands:
            if o.role != OperandRole.INPUT or (k.name, o.name) in reads:
                continue  # an input from outside the graph: one tensor per shape and type
            key = ("", o.dims, o.bytes_per_element, k.operand_elements(o))
            size = k.operand_bytes(o) * layout.read(k, o)
            if key in tensors:
                tensors[key].last, tensors[key].size = i, max(tensors[key].size, size)
            else:
                tensors[key] = _Tensor(i, i, size, o.bytes_per_element, k.operand_elements(o))
            reads[k.name, o.name] = key
    delta = [0.0] * (len(kernels) + 1)
    for t in tensors.values():
        t.last = len(kernels) - 1 if t.last < 0 else t.last  # unread here: it leaves
        delta[t.first] += t.size
        delta[t.last + 1] -= t.size
    floor = layout.shardings is None
    peak = running = 0.0
    for i, k in enumerate(kernels):
        running += delta[i]
        peak = max(peak, running - _in_place(k, i, tensors, reads, floor))
    return peak


def _in_place(
    kernel: Kernel,
    i: int,
    tensors: dict[tuple, _Tensor],
    reads: dict[tuple[str, str], tuple],
    floor: bool,
) -> float:
    """Bytes kernel i saves by writing its output over the input it names (Kernel.in_place)
    when it is that input's last reader and its output fits the input's buffer on a chip.
    At the floor (each tensor at its own least share) the pair counts as its larger share,
    never more than in any layout."""
    key = reads.get((kernel.name, kernel.in_place)) if kernel.in_place else None
    outputs = kernel.outputs
    if key is None or tensors[key].last != i or not outputs:
        return 0.0
    out = tensors.get((kernel.name, outputs[0].name))
    if out is None:
        return 0.0
    buffer = tensors[key].size
    if floor:
        return min(out.size, buffer)
    return out.size if out.size <= buffer else 0.0
