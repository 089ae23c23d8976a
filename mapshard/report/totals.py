"""The few derived quantities every report shares (how many times a phase's graph runs per
step, its busy time, the parallel degrees), so the tables, the trace, the energy and the
HTML agree to the last digit."""

from __future__ import annotations

from solver.plan import ConfigPlan, KernelPlan, PhasePlan, Plan

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


def kernel_time_s(kernel: KernelPlan) -> float:
    """A kernel's own roofline time: the slowest of its three resources."""
    return max(kernel.compute_s, kernel.memory_s, kernel.network_s)
