"""The few derived quantities every report shares (how many times a phase's graph runs per
step, its busy time, the parallel degrees), so the tables, the trace, the energy and the
HTML agree to the last digit."""

from __future__ import annotations

from solver.plan import ConfigPlan, KernelPlan, PhasePlan, Plan, latency_split, plan_rule

PARALLELISMS = ("tp", "pp", "dp", "ep", "cp")


def phase_instances(plan: Plan, phase: PhasePlan) -> float:
    """Graph instances of a phase per step: layers x sequential steps x micro-batches.

    Each instance takes `phase.latency_s` on the chips that run it; instances on different
    pipeline stages run on different chips, so this counts busy time, not wall time.
    """
    return float(phase.count * phase.steps * max(1, plan.micro_batches))


def phase_total_s(plan: Plan, phase: PhasePlan) -> float:
    """Busy time of a phase per step, summed over pipeline stages."""
    return phase.latency_s * phase_instances(plan, phase)


def config_total_s(plan: Plan, phase: PhasePlan, config: ConfigPlan) -> float:
    return config.latency_s * phase_instances(plan, phase)


def busy_total_s(plan: Plan) -> float:
    return sum(phase_total_s(plan, p) for p in plan.phases)


def parallel_degrees(plan: Plan) -> dict[str, int]:
    """tp, pp, dp, ep, cp, each present (1 when the plan does not use it)."""
    degrees = {k.lower(): int(v) for k, v in plan.parallelism.items()}
    return {k: degrees.get(k, 1) for k in PARALLELISMS} | {
        k: v for k, v in degrees.items() if k not in PARALLELISMS
    }


def row_split(plan: Plan, row: KernelPlan | ConfigPlan) -> tuple[float, float, float, float]:
    """(overhead, compute, memory, network): the seconds each adds to the row's latency
    under the plan's overlap rule; they sum to it, and the largest is the row's bound."""
    overlap, serial = plan_rule(plan.overlap)
    return latency_split(
        row.compute_s,
        row.memory_s,
        row.network_s,
        row.overhead_s,
        overlap,
        serial,
        plan.network_hidden_share,
        row.floor_s,
    )


def row_time_s(plan: Plan, row: KernelPlan | ConfigPlan) -> float:
    """A kernel's (or configuration's) latency alone under the plan's overlap rule."""
    return sum(row_split(plan, row))


# The step, as the solver splits it: plan.time_breakdown adds up to the step time (training:
# the pipeline's compute plus its bubble, exposed collectives, optimizer...; inference: one
# entry per phase group, "decode" holding the decode and decode_head graphs). Graph time is
# the entries that are the graphs' own (a phase group's name, "pipeline_compute", "step");
# the rest are step terms outside any graph.
GRAPH_TIME_KEYS = ("pipeline_compute", "step")


def _owner(entry: str, phase: str) -> bool:
    return phase == entry or phase.startswith(entry + "_")


def _is_graph_entry(plan: Plan, entry: str) -> bool:
    return entry in GRAPH_TIME_KEYS or any(_owner(entry, p.name) for p in plan.phases)


def step_terms(plan: Plan) -> list[tuple[str, float]]:
    """The step's time outside its graphs (bubble, exposed communication, optimizer, ...),
    by name, in the solver's order; with the graphs' share they add up to the step."""
    if plan.time_breakdown:
        return [
            (k, v)
            for k, v in sorted(plan.time_breakdown.items())
            if v != 0 and not _is_graph_entry(plan, k)
        ]
    terms = (("pipeline_bubble", plan.pipeline_bubble_s), ("dp_allreduce", plan.dp_allreduce_s),
             ("optimizer", plan.optimizer_s), ("pp_transfer", plan.pp_transfer_s))  # fmt: skip
    return [(k, v) for k, v in terms if v > 0]


def phase_step_s(plan: Plan) -> dict[str, float]:
    """Each phase's share of the step's wall time: the time_breakdown entry of its group
    (the longest entry name that is the phase's or its prefix), split among the group's
    phases by busy time; phases of no named group share the rest of the step the same way
    (a pipeline's stages run at once, so busy time summed over stages is not wall time)."""
    entries = [k for k in plan.time_breakdown if k not in GRAPH_TIME_KEYS]
    groups: dict[str | None, list[PhasePlan]] = {}
    for p in plan.phases:
        named = [k for k in entries if _owner(k, p.name)]
        groups.setdefault(max(named, key=len) if named else None, []).append(p)
    named_s = sum(plan.time_breakdown[k] for k in groups if k is not None)
    rest_s = plan.latency_s - sum(v for _, v in step_terms(plan)) - named_s
    out: dict[str, float] = {}
    for key, phases in groups.items():
        value = plan.time_breakdown[key] if key is not None else max(rest_s, 0.0)
        busy = sum(phase_total_s(plan, p) for p in phases)
        for p in phases:
            out[p.name] = value * phase_total_s(plan, p) / busy if busy > 0 else 0.0
    return out


def config_step_s(plan: Plan, phase: PhasePlan, config: ConfigPlan, phase_s: float) -> float:
    """A configuration's share of its phase's per-step time `phase_s`, by busy time."""
    total = phase_total_s(plan, phase)
    return phase_s * config_total_s(plan, phase, config) / total if total > 0 else 0.0
