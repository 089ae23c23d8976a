"""Pinned mappings applied to the generated graphs (setup.proto Execution.pin, KernelPin):
each pin names a phase and a kernel, and sets that kernel's pinned configuration, sharding
and tile, exactly the fields a dataflow_graph kernel's own config/sharding/tile set
(generator.proto_graph), so the solver honours both alike. Applied after generation, by
name, so a pin survives regeneration and never changes the workload itself (phases, KV
cache, step composition). Here too, for both: configuration numbers that no kernel can hold
(an empty configuration) closed up (`close_config_gaps`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from generator.graph import Kernel, KernelGraph, KernelKind, Workload
from schema import setup_pb2
from schema.errors import SetupError
from schema.pins import REDUCE_SCATTER, split_dim
from schema.tiles import ATTENTION, STREAM, TILE_FAMILIES, parse_tile

REPLICATED = "none"
_LISTED = 12  # names listed in a message before "..."


def apply_pins(
    workload: Workload, pins: Sequence[setup_pb2.KernelPin], path: Path | str
) -> Workload:
    """`workload` with every pin applied to its graphs (and its searched-knob variants'),
    configuration gaps closed up; SetupError naming execution.pin[i] for a pin that names
    no phase or kernel, or a sharding or tile the kernel cannot take."""
    problems: list[str] = []
    by_phase = _kernels_by_phase(workload)
    fixed = _fixed_shardings(workload)
    wanted: dict[str, dict[str, setup_pb2.KernelPin]] = {}
    for i, pin in enumerate(pins):
        where = f"{path}: execution.pin[{i}]"
        phase, name = pin.phase.strip(), pin.kernel.strip()
        kernels = by_phase.get(phase)
        if kernels is None:
            valid = _names(by_phase)
            problems.append(f"{where}.phase {phase!r} is not a phase of this workload; {valid}")
            continue
        if name not in kernels:
            valid = _names(kernels)
            problems.append(f"{where}.kernel {name!r} is not a kernel of phase {phase}; {valid}")
            continue
        kernel = kernels[name]
        wrong = sharding_problem(kernel, pin.sharding.strip())
        wrong = wrong or _fixed_problem(fixed.get((phase, name)), pin.sharding.strip())
        if wrong:
            problems.append(f"{where}.sharding (phase {phase}, kernel {name}): {wrong}")
        wrong = tile_problem(kernel, pin.tile.strip())
        if wrong:
            problems.append(f"{where}.tile (phase {phase}, kernel {name}): {wrong}")
        wanted.setdefault(phase, {})[name] = pin
    if problems:
        raise SetupError(problems)
    return _pinned(workload, wanted)


def _fixed_shardings(workload: Workload) -> dict[tuple[str, str], set[str]]:
    """(phase, kernel) -> the shardings the generator fixed it to (an MoE layout's expert
    block, a vector kernel a framework runs whole), one per variant of the searched knobs;
    absent when some variant leaves the kernel's sharding to the search."""
    fixed: dict[tuple[str, str], set[str]] = {}
    free: set[tuple[str, str]] = set()
    for w in (workload, *workload.variants):
        for phase in w.phases:
            for k in phase.graph.kernels:
                key = (phase.name, k.name)
                if k.pinned_sharding:
                    fixed.setdefault(key, set()).add(k.pinned_sharding)
                else:
                    free.add(key)
    return {key: values for key, values in fixed.items() if key not in free}


def _fixed_problem(fixed: set[str] | None, sharding: str) -> str:
    """What is wrong with pinning `sharding` where the generator fixed the kernel's (a pin
    elsewhere prices a layout the model's rules do not run: a dispatch's all-to-all halved
    beat the proven optimum by 0.5%, found by fuzzing)."""
    # "none" too: where the fixed split is no choice (TP 1), the kernel runs whole
    if not fixed or not sharding or sharding in fixed or sharding == REPLICATED:
        return ""
    valid = ", ".join(sorted({REPLICATED, *fixed}))
    return f"{sharding!r}: the workload's rules fix this kernel's sharding; valid: {valid}"


def _kernels_by_phase(workload: Workload) -> dict[str, dict[str, Kernel]]:
    """phase -> kernel name -> kernel, over the workload and the variants of its searched
    knobs (a recompute mode adds kernels): a pin may name a kernel of any of them."""
    out: dict[str, dict[str, Kernel]] = {}
    for w in (workload, *workload.variants):
        for phase in w.phases:
            kernels = out.setdefault(phase.name, {})
            for k in phase.graph.kernels:
                kernels.setdefault(k.name, k)
    return out


def _pinned(workload: Workload, wanted: dict[str, dict[str, setup_pb2.KernelPin]]) -> Workload:
    phases = tuple(
        replace(p, graph=close_config_gaps(_pin_graph(p.graph, wanted.get(p.name, {}))))
        for p in workload.phases
    )
    variants = tuple(_pinned(v, wanted) for v in workload.variants)
    return replace(workload, phases=phases, variants=variants)


def _pin_graph(graph: KernelGraph, pins: dict[str, setup_pb2.KernelPin]) -> KernelGraph:
    if not pins:
        return graph
    return replace(graph, kernels=tuple(_pin_kernel(k, pins.get(k.name)) for k in graph.kernels))


def _pin_kernel(kernel: Kernel, pin: setup_pb2.KernelPin | None) -> Kernel:
    """The kernel with the pin's fields set (a field the pin leaves out keeps its value)."""
    if pin is None:
        return kernel
    sharding = pin.sharding.strip()
    before = kernel.pinned_sharding if kernel.order_sharding is None else kernel.order_sharding
    return replace(
        kernel,
        pinned_config=pin.config if pin.HasField("config") else kernel.pinned_config,
        pinned_sharding=sharding or kernel.pinned_sharding,
        pinned_tile=pin.tile.strip() or kernel.pinned_tile,
        order_sharding=before if sharding else kernel.order_sharding,
    )


def close_config_gaps(graph: KernelGraph) -> KernelGraph:
    """Pinned configuration numbers order the configurations; a number below the largest
    that no kernel can hold (no kernel pinned to it, and no free kernel that can run
    between the pinned configurations around it) would be an empty configuration, which no
    plan has: the numbers are renumbered without it. Every kernel pinned: 0, 1, 2, ... in
    their order; a free kernel may still fill a number between two pinned ones."""
    pins = {k.name: k.pinned_config for k in graph.kernels}
    used = {c for c in pins.values() if c >= 0}
    if not used or all(c in used for c in range(max(used))):
        return graph
    kept = used | _fillable(graph, pins, used)
    rank = {c: i for i, c in enumerate(sorted(kept))}
    kernels = tuple(
        replace(k, pinned_config=rank[k.pinned_config]) if k.pinned_config >= 0 else k
        for k in graph.kernels
    )
    return replace(graph, kernels=kernels)


def _fillable(graph: KernelGraph, pins: dict[str, int], used: set[int]) -> set[int]:
    """The unused numbers below the largest pinned one that free kernels can hold, one
    kernel each: a free kernel can hold g when every pinned kernel before it (an ancestor)
    has a number below g and every one after it (a descendant) above. Each kernel's
    numbers are an interval, so filling the gaps in order with the eligible kernel whose
    interval ends first finds a largest set (interval scheduling)."""
    preds: dict[str, list[str]] = {k.name: [] for k in graph.kernels}
    succs: dict[str, list[str]] = {k.name: [] for k in graph.kernels}
    for e in graph.edges:
        preds[e.dst].append(e.src)
        succs[e.src].append(e.dst)
    order = graph.topological_order()
    after: dict[str, int] = {}  # the largest pinned number before a kernel (-1: none)
    for n in order:
        after[n] = max((max(after[p], pins[p]) for p in preds[n]), default=-1)
    none = max(used) + 1
    before: dict[str, int] = {}  # the smallest pinned number after it (`none`: none)
    for n in reversed(order):
        later = (min(before[s], pins[s] if pins[s] >= 0 else none) for s in succs[n])
        before[n] = min(later, default=none)
    free = sorted((after[n], before[n]) for n in order if pins[n] < 0)
    filled: set[int] = set()
    ends: list[int] = []  # heap of the interval ends of the kernels eligible so far
    i = 0
    for gap in (g for g in range(max(used)) if g not in used):
        while i < len(free) and free[i][0] < gap:
            heapq.heappush(ends, free[i][1])
            i += 1
        while ends and ends[0] <= gap:
            heapq.heappop(ends)
        if ends:
            heapq.heappop(ends)
            filled.add(gap)
    return filled


def sharding_problem(kernel: Kernel, sharding: str) -> str:
    """What is wrong with pinning `sharding` on `kernel` ("" = nothing): the solver's words
    (solver.cost.menus.sharding_choices) are "none", a shardable loop dim, and "<dim>+rs"
    for a shardable dim the output does not carry (a reduction dim)."""
    if not sharding or sharding == REPLICATED:
        return ""
    allowed = kernel.shardable_dims or tuple(d for d, _ in kernel.dims)
    reduced = tuple(d for d in allowed if d in kernel.reduction_dims)
    dim = split_dim(sharding)
    valid = ", ".join(
        [REPLICATED, *allowed, *(d + REDUCE_SCATTER for d in reduced)]
    )  # every word the menus can write for this kernel
    if dim not in allowed:
        return f"{sharding!r} is not a loop dim this kernel splits; valid: {valid}"
    if sharding.endswith(REDUCE_SCATTER) and dim not in reduced:
        return (
            f"{sharding!r} reduce-scatters over {dim}, which is not a reduction dim of this "
            f"kernel; valid: {valid}"
        )
    return ""


def tile_kind(kernel: Kernel) -> str:
    """Which tiles a kernel takes (solver.cost.tilings.tilings): a two-input matrix kernel a
    GEMM family's, a fused attention kernel "attn" (or "stream"), the rest "stream"."""
    if kernel.is_matrix:  # a bias is epilogue work
        return "gemm"
    return ATTENTION if kernel.kind == KernelKind.ATTENTION else STREAM


def tile_problem(kernel: Kernel, tile: str) -> str:
    """What is wrong with pinning `tile` on `kernel` ("" = nothing; the syntax is
    schema.validation_pins')."""
    pin = parse_tile(tile) if tile else None
    if pin is None:
        return ""
    kind = tile_kind(kernel)
    if kind == "gemm" and pin.family not in TILE_FAMILIES:
        families = ", ".join(f"'{f}:Tm=..,Tn=..'" for f in TILE_FAMILIES)
        return f"{tile!r} is not a GEMM tile and this kernel is a GEMM; give {families}"
    if kind == ATTENTION and pin.family not in (ATTENTION, STREAM):
        return f"{tile!r} is a GEMM tile on a fused attention kernel; give 'attn:Br=..,Bc=..'"
    if kind == STREAM and pin.family != STREAM:
        return f"{tile!r} is not a tile of this {kernel.kind.value} kernel; give 'stream'"
    return ""


def _names(names: dict[str, object] | Sequence[str]) -> str:
    listed = list(names)
    more = f", ... ({len(listed)})" if len(listed) > _LISTED else ""
    shown = ", ".join(listed[:_LISTED]) + more
    return f"valid: {shown}" if listed else "this workload has none"
