"""`mapshard explain`: why each kernel costs what it costs. For every kernel the resource
that binds and by how much it exceeds the next one, and the outer choice that came second.
Only what the plan records is shown."""

from __future__ import annotations

from mapshard.fmt import fmt_pct, fmt_time
from mapshard.report.tables import ordered_kernels
from mapshard.report.totals import phase_instances, phase_total_s
from solver.plan import KernelPlan, Plan


def binding(kernel: KernelPlan) -> tuple[str, float, str, float]:
    """(binding resource, its time, the next resource, its time)."""
    times = sorted(
        (("compute", kernel.compute_s), ("memory", kernel.memory_s), ("network", kernel.network_s)),
        key=lambda x: -x[1],
    )
    return times[0][0], times[0][1], times[1][0], times[1][1]


def kernel_line(k: KernelPlan) -> str:
    res, t, nxt, t2 = binding(k)
    if t <= 0:
        why = "takes no time"
    elif t2 > 0:
        ratio = t / t2
        times = f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.2g}x"
        why = f"{res}-bound {fmt_time(t)} ({times} its {nxt} time {fmt_time(t2)})"
    else:
        why = f"{res}-bound {fmt_time(t)} (no {nxt} time)"
    line = f"    {k.name}: {why}; sharding {k.sharding}, tile {k.tile or '-'}"
    if k.collective:
        line += f", {k.collective}"
    return line


def _degrees(parallelism: dict[str, int]) -> dict[str, int]:
    return {k.lower(): int(v) for k, v in parallelism.items() if int(v) > 1}


def _par_text(parallelism: dict[str, int]) -> str:
    deg = _degrees(parallelism)
    return " ".join(f"{k}={v}" for k, v in sorted(deg.items())) or "no parallelism"


MAX_INFEASIBLE_LINES = 10


def choice_lines(plan: Plan) -> list[str]:
    """The chosen outer choice against the best other solved one, and what was ruled out."""
    chosen = _degrees(plan.parallelism)
    lines = [f"Outer choice: {_par_text(plan.parallelism)}, latency {fmt_time(plan.latency_s)}"]
    solved = sorted(
        (c for c in plan.choices if c.status == "solved" and c.latency_s is not None),
        key=lambda c: c.latency_s or 0.0,
    )
    same = [c for c in solved if _degrees(c.parallelism) == chosen]
    others = [c for c in solved if c is not (same[0] if same else None)]
    if others:
        c = others[0]
        lat = c.latency_s or 0.0
        worse = fmt_pct(lat / plan.latency_s - 1) if plan.latency_s else "-"
        lines.append(
            f"  runner-up: {_par_text(c.parallelism)} ({c.placement}) {fmt_time(lat)}, "
            f"{worse} slower"
        )
    pruned = [c for c in plan.choices if c.status == "pruned"]
    if pruned:
        lines.append(f"  pruned {len(pruned)}: roofline bound above the best plan found")
    unsolved = [c for c in plan.choices if c.status == "not_solved"]
    if unsolved:
        lines.append(f"  not solved {len(unsolved)}: {unsolved[0].reason} (bounds in the gap)")
    infeasible = [c for c in plan.choices if c.status == "infeasible"]
    for c in infeasible[:MAX_INFEASIBLE_LINES]:
        reason = c.reason or "no reason recorded"
        lines.append(f"  infeasible {_par_text(c.parallelism)} ({c.placement}): {reason}")
    if len(infeasible) > MAX_INFEASIBLE_LINES:
        lines.append(f"  ... {len(infeasible) - MAX_INFEASIBLE_LINES} more infeasible choices")
    return lines


def format_explain(plan: Plan) -> str:
    """Per phase and configuration, each kernel's binding resource."""
    lines = [f"Why the plan for {plan.scenario} is what it is", ""]
    lines += choice_lines(plan)
    for p in plan.phases:
        lines += [
            "",
            f"Phase {p.name} ({p.role}): one instance {fmt_time(p.latency_s)} "
            f"(roofline bound {fmt_time(p.lower_bound_s)}), "
            f"x{phase_instances(plan, p):g} instances = "
            f"{fmt_time(phase_total_s(plan, p))} busy, all stages together",
        ]
        kernels = ordered_kernels(p)
        for c in sorted(p.configs, key=lambda c: c.index):
            lines.append(
                f"  config {c.index}: {c.bound}-bound {fmt_time(c.latency_s)} "
                f"(compute {fmt_time(c.compute_s)}, memory {fmt_time(c.memory_s)}, "
                f"network {fmt_time(c.network_s)}; SRAM "
                f"{c.sram_bytes / 2**20:.3g} MiB)"
            )
            lines += [kernel_line(k) for k in kernels if k.config == c.index]
    if plan.warnings:
        lines += ["", "Warnings:"] + [f"  {w}" for w in plan.warnings]
    return "\n".join(lines) + "\n"
