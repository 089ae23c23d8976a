"""Where MapShard's native model and DFModel's equations differ, term by term, on one plan.

For a DFModel input solved with the native model, each term is what the native plan
charges per step and what DFModel's equations (solver/dfmodel/model.py) charge for the
same thing on the same plan:
  optimizer step      native: optimizer_s              DFModel: none
  DP all-reduce       native: after the pipeline        DFModel: ALL_REDUCE_PERIODIC kernels
                                                        inside configurations (none here)
  weights from DRAM   native: each configuration's memory time with its kernels' weight
                      bytes per chip (weight / TP when sharded) read from DRAM, times the
                      instances per step; DFModel reads no weight, only each kernel's
                      memory_size (none when the graph sets none), so the term is the
                      latency those configurations lose without them, against what they
                      lose without the memory_size bytes in DFModel
  pipeline bubble     native: its schedule's bubble     DFModel: compute x (PP-1) /
                                                        (micro-batches x c'), c' =
                                                        layers per stage - 1 (>= 2) else 1
  pipeline transfers  native: pp_transfer_s             DFModel: layers x 2 hidden seq word
                                                        / B_PP (training)
Terms that agree (0 difference) are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from generator.graph import Workload
from hardware.system import System
from schema.errors import SetupError
from solver.cost.latency import config_latency
from solver.dfmodel.model import system_cost_power
from solver.plan import KernelPlan, Plan
from solver.search.stages import stage_layers

WEIGHTS = "weights read from DRAM (DFModel reads none without memory_size)"
# ... on a graph whose kernels give memory_size: DFModel reads those bytes instead
WEIGHTS_AS_MEMORY_SIZE = "weights read from DRAM (DFModel: the kernels' memory_size instead)"


@dataclass(frozen=True)
class Term:
    """One difference: seconds per step in each model (native - dfmodel = delta)."""

    name: str
    native_s: float
    dfmodel_s: float

    @property
    def delta_s(self) -> float:
        return self.native_s - self.dfmodel_s


def compare(plan: Plan, workload: Workload, system: System, overlap: bool) -> tuple[Term, ...]:
    """The terms where the native plan and DFModel's equations differ, largest first."""
    deg = plan.parallelism
    pp, tp = deg.get("pp", 1), deg.get("tp", 1)
    terms = [
        Term("optimizer step (not in DFModel)", plan.optimizer_s, 0.0),
        Term(
            "DP gradient all-reduce after the step (DFModel: inside the configurations)",
            plan.dp_allreduce_s,
            0.0,
        ),
    ]
    sizes = memory_sizes(workload)
    native_s, dfmodel_s = _weight_time(plan, workload, tp, pp, overlap, sizes)
    terms.append(Term(WEIGHTS_AS_MEMORY_SIZE if sizes else WEIGHTS, native_s, dfmodel_s))
    if workload.kind == "training" and pp > 1:
        compute = plan.time_breakdown.get("pipeline_compute", 0.0)
        layers = workload.model.num_layers if workload.model else workload.phases[0].count
        lps = math.ceil(layers / pp)
        tail = lps - 1 if lps >= 2 else 1
        bubble = compute * (pp - 1) / (max(plan.micro_batches, 1) * tail)
        terms.append(Term("pipeline bubble", plan.pipeline_bubble_s, bubble))
        terms.append(Term("pipeline transfers", plan.pp_transfer_s, _p2p(workload, plan, system)))
    kept = [t for t in terms if abs(t.delta_s) > 1e-12]
    return tuple(sorted(kept, key=lambda t: (-abs(t.delta_s), t.name)))


def compare_cost(plan: Plan, system: System) -> tuple[tuple[str, float, float], ...]:
    """(name, native, DFModel) for System Cost ($) and System Power (W) where they differ:
    DFModel's per-variant link and switch counts, no switch at <= 4 chips, no link on one
    chip. Empty when the topology is not one of DFModel's variants."""
    degrees = [lv.degree for lv in system.network]
    try:
        cost, power = system_cost_power(system, degrees)
    except SetupError:
        return ()
    rows = (("system_cost", plan.system_cost, cost), ("system_power_W", plan.system_power_W, power))
    return tuple(r for r in rows if abs(r[1] - r[2]) > 1e-9 * max(abs(r[1]), 1.0))


def _instances(plan: Plan, workload: Workload, pp: int) -> dict[str, float]:
    """Instances of each phase per step on one chip (the native step's count; a graph's batch
    items: one data-parallel replica's share, the plan's PhasePlan.steps)."""
    steps = {ph.name: ph.steps for ph in plan.phases}
    out = {}
    for p in workload.phases:
        if workload.kind == "training":
            out[p.name] = stage_layers(workload, p, pp) * max(plan.micro_batches, 1)
        else:
            out[p.name] = p.count * steps.get(p.name, p.steps)
    return out


def memory_sizes(workload: Workload) -> dict[str, float]:
    """Kernel name -> the DRAM bytes DFModel charges it explicitly (its memory_size), for
    the kernels that give one."""
    out = {}
    for p in workload.phases:
        for k in p.graph.kernels:
            extra = k.dfmodel_extra
            if extra is not None and extra.memory_size_bytes > 0:
                out[k.name] = extra.memory_size_bytes
    return out


def _weight_time(
    plan: Plan,
    workload: Workload,
    tp: int,
    pp: int,
    overlap: bool,
    sizes: dict[str, float],
) -> tuple[float, float]:
    """Seconds per step the native plan spends because weights come from DRAM, and what the
    same configurations spend in DFModel on their kernels' memory_size bytes (`sizes`)."""
    bw = plan_dram_Bps(plan)
    if bw <= 0:
        return 0.0, 0.0
    repeat = _instances(plan, workload, pp)
    total = explicit = 0.0
    for ph in plan.phases:
        by_config: dict[int, list[KernelPlan]] = {}  # once per phase (per config: n^2)
        for k in ph.kernels:
            by_config.setdefault(k.config, []).append(k)
        for c in ph.configs:
            members = by_config.get(c.index, [])
            weights = sum(
                min(k.dram_bytes, k.weight_bytes / (tp if k.sharding != "none" else 1))
                for k in members
            )
            memory = max(c.memory_s - weights / bw, 0.0)
            # the plan's own rule (its overheads are not kept per configuration: 0 here)
            serial, hidden = plan.overlap == "serial_network", plan.network_hidden_share
            without = config_latency(c.compute_s, memory, c.network_s, 0.0, overlap, serial, hidden)
            total += (c.latency_s - without) * repeat.get(ph.name, 1)
            named = sum(sizes.get(k.name, 0.0) for k in members) / bw
            if named > 0:
                charged = config_latency(
                    c.compute_s, memory + named, c.network_s, 0.0, overlap, serial, hidden
                )
                explicit += (charged - without) * repeat.get(ph.name, 1)
    return total, explicit


def plan_dram_Bps(plan: Plan) -> float:
    """The DRAM bandwidth the plan's kernels were priced with (bytes / memory seconds)."""
    for k in plan.kernels():
        if k.memory_s > 0:
            return k.dram_bytes / k.memory_s
    return 0.0


def _p2p(workload: Workload, plan: Plan, system: System) -> float:
    """DFModel's p2p_latency: layers x 2 hidden seq word / B_PP, B_PP the link bandwidth
    of the (first) level the plan's PP spans."""
    if not any(k.pass_.name != "FWD" for p in workload.phases for k in p.graph.kernels):
        return 0.0  # DFModel's Intermediate is 0 without backward kernels
    hidden = workload.model.hidden_size if workload.model else 0
    layers = workload.model.num_layers if workload.model else 0
    moved = 2 * hidden * workload.seq_len * _word(workload)
    first = plan.placement.get("pp", "").split("x")[0].split(":")[0]
    level = next((lv for lv in system.network if lv.name == first), None)
    if level is None or level.link_bandwidth_Bps <= 0:
        return 0.0
    return layers * moved / level.link_bandwidth_Bps


def _word(workload: Workload) -> float:
    for p in workload.phases:
        for k in p.graph.kernels:
            for o in k.operands:
                if o.role.name == "OUTPUT":
                    return round(o.bytes_per_element)
    return 2.0


def describe(terms: tuple[Term, ...]) -> list[str]:
    """One line per term: what it is, native vs DFModel, the difference."""
    out = []
    for t in terms:
        out.append(
            f"{t.name}: {_fmt(t.native_s)} here, {_fmt(t.dfmodel_s)} in DFModel "
            f"({'+' if t.delta_s >= 0 else '-'}{_fmt(abs(t.delta_s))})"
        )
    return out


def _fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"
