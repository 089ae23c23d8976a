"""`mapshard explain`: why the plan is what it is. Every outer candidate the search tried
(parallel degrees, placement, training knobs) with its latency, memory per chip, throughput
per chip and why it lost; then, for every kernel, the resource that binds and by how much it
exceeds the next one. Only what the plan records is shown."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mapshard.fmt import fmt_bytes, fmt_pct, fmt_si, fmt_time
from mapshard.report.tables import ordered_kernels
from mapshard.report.totals import phase_instances, phase_total_s
from solver.plan import ChoiceResult, KernelPlan, Plan


def binding(kernel: KernelPlan) -> tuple[str, float, str, float]:
    """(binding resource, its time, the next resource, its time): the binding one is the
    kernel's bound label (the largest part of its latency, solver.plan.latency_split, as
    the tables show it), each time that resource's alone, launch overhead and the
    launch-rate floor counted as overhead."""
    alone = {
        "overhead": kernel.overhead_s + kernel.floor_s,
        "compute": max(kernel.compute_s - kernel.overhead_s - kernel.floor_s, 0.0),
        "memory": kernel.memory_s,
        "network": kernel.network_s,
    }
    res = kernel.bound if kernel.bound in alone else max(alone, key=lambda r: alone[r])
    nxt = max((r for r in alone if r != res), key=lambda r: alone[r])
    return res, alone[res], nxt, alone[nxt]


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


def _same_layout(choice: dict[str, int], chosen: dict[str, int]) -> bool:
    """A candidate's degrees against the plan's: an inference plan's EP is its experts
    split over the TP chips (no degree of its own), which its candidates do not list."""
    if "ep" not in choice:
        chosen = {k: v for k, v in chosen.items() if k != "ep"}
    return choice == chosen


def _par_text(parallelism: dict[str, int]) -> str:
    deg = _degrees(parallelism)
    return " ".join(f"{k}={v}" for k, v in sorted(deg.items())) or "no parallelism"


@dataclass(frozen=True)
class ChoiceRow:
    """One outer candidate as `explain` and report.html's "Outer choices" table show it."""

    choice: str  # "tp=2 pp=4" and the training knobs it pinned
    placement: str
    status: str  # "chosen" or the ledger's label (solved, pruned, infeasible, not_solved)
    latency_s: float | None
    bound_s: float  # its roofline lower bound
    memory_per_chip_bytes: float | None  # the plan's (solved) or the floor (others)
    # throughput_unit(plan) per chip: at its latency, or for a candidate pruned or not
    # solved the most its bound allows
    throughput_per_chip: float | None
    bounded: bool  # not solved: memory is a floor (>=), throughput a ceiling (<=)
    why: str  # why it lost ("" for the chosen one)


def throughput_unit(plan: Plan) -> str:
    """What throughput per chip counts: generated (or prompt) tokens where the plan has a
    token rate, else whole steps (iterations, requests, graph runs)."""
    return "tokens/s" if plan.tokens_per_s else "steps/s"


def _per_chip(plan: Plan, latency_s: float | None) -> float | None:
    """Throughput per chip at `latency_s` per step: every candidate runs the same step (the
    same tokens) on all the system's chips, so tokens per step = the plan's tokens/s x its
    step time, and per chip = tokens per step / latency / chips."""
    if not latency_s or latency_s <= 0 or plan.num_chips <= 0:
        return None
    per_step = plan.tokens_per_s * plan.latency_s if plan.tokens_per_s else 1.0
    return per_step / latency_s / plan.num_chips


def _why(plan: Plan, c: ChoiceResult, chosen: bool) -> str:
    """Why a candidate lost, in the terms of what is known about it."""
    best, capacity = plan.latency_s, plan.memory.capacity
    mem = c.memory_per_chip_bytes
    if chosen:
        return ""
    if c.status == "solved" and c.latency_s is not None:
        if best <= 0 or c.latency_s <= best * (1 + 1e-9):
            return "as fast as the chosen one (the search keeps the first found)"
        return f"slower by {fmt_pct(c.latency_s / best - 1)}"
    if c.status == "infeasible":
        if mem is not None and capacity > 0 and mem > capacity:
            return (
                f"out of memory by {fmt_bytes(mem - capacity)} at least: needs >= "
                f"{fmt_bytes(mem)} per chip, DRAM holds {fmt_bytes(capacity)}"
            )
        return f"infeasible: {c.reason or 'no reason recorded'}"
    too_big = (
        f"; nor would it fit (>= {fmt_bytes(mem)} per chip, DRAM {fmt_bytes(capacity)})"
        if mem is not None and capacity > 0 and mem > capacity
        else ""
    )
    if c.status == "pruned":
        what = "its graphs' proven bound" if c.reason == "graph bound" else "its roofline bound"
        return (
            f"cannot win: {what} {fmt_time(c.lower_bound_s)} >= the chosen {fmt_time(best)}"
            + too_big
        )
    if c.status == "not_solved":
        return (
            f"not solved ({c.reason}); its bound {fmt_time(c.lower_bound_s)} is in the gap"
            + too_big
        )
    return c.reason or c.status


def choice_rows(plan: Plan) -> list[ChoiceRow]:
    """Every outer candidate the search tried, in the search's order, the chosen one
    marked: latency, memory per chip, throughput per chip and why it lost."""
    chosen_deg = _degrees(plan.parallelism)
    chosen_at = next(
        (
            i
            for i, c in enumerate(plan.choices)
            if c.status == "solved"
            and _same_layout(_degrees(c.parallelism), chosen_deg)
            and c.latency_s is not None
            and abs(c.latency_s - plan.latency_s) <= 1e-9 * max(plan.latency_s, 1e-30)
        ),
        None,
    )
    rows = []
    for i, c in enumerate(plan.choices):
        chosen = i == chosen_at
        rows.append(
            ChoiceRow(
                choice=_par_text(c.parallelism) + (f"; {c.knobs}" if c.knobs else ""),
                placement=c.placement,
                status="chosen" if chosen else c.status,
                latency_s=c.latency_s,
                bound_s=c.lower_bound_s,
                memory_per_chip_bytes=c.memory_per_chip_bytes,
                throughput_per_chip=None
                if c.status == "infeasible"
                else _per_chip(plan, c.latency_s if c.status == "solved" else c.lower_bound_s),
                bounded=c.status != "solved",
                why=_why(plan, c, chosen),
            )
        )
    return rows


def memory_text(row: ChoiceRow) -> str:
    """Memory per chip in GiB; a floor (the least any mapping of the candidate needs) is
    marked >=."""
    if row.memory_per_chip_bytes is None:
        return "-"
    return (">= " if row.bounded else "") + fmt_bytes(row.memory_per_chip_bytes)


def throughput_text(row: ChoiceRow) -> str:
    """Throughput per chip; a ceiling (from a bound, not solved) is marked <=."""
    if row.throughput_per_chip is None:
        return "-"
    return ("<= " if row.bounded else "") + fmt_si(row.throughput_per_chip)


CHOICE_STATUSES = ("chosen", "solved", "pruned", "infeasible", "not_solved")


def _latency_text(row: ChoiceRow) -> str:
    """The latency, or for a candidate pruned or not solved the least its bound allows."""
    if row.latency_s is not None:
        return fmt_time(row.latency_s)
    return "-" if row.status == "infeasible" else f">= {fmt_time(row.bound_s)}"


def choice_lines(plan: Plan) -> list[str]:
    """Every outer candidate as an aligned table: the chosen one marked '*'."""
    rows = choice_rows(plan)
    counts = Counter(r.status for r in rows)
    told = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in CHOICE_STATUSES if counts[s])
    lines = [f"Outer choice: {_par_text(plan.parallelism)}, latency {fmt_time(plan.latency_s)}"]
    if not rows:
        return lines
    lines += [
        f"  {len(rows)} candidates ({told}) on {plan.num_chips} chips of "
        f"{fmt_bytes(plan.memory.capacity)} DRAM each.",
        "  Not solved: latency >= its bound, memory >= its floor (every weight split over "
        "TP x PP), throughput <= what its bound allows.",
    ]
    header = ("", "choice", "placement", "latency", "memory/chip",
              f"{throughput_unit(plan)}/chip", "why it lost")  # fmt: skip
    cells = [
        (
            "*" if r.status == "chosen" else "",
            r.choice,
            r.placement,
            _latency_text(r),
            memory_text(r),
            throughput_text(r),
            "chosen" if r.status == "chosen" else r.why,
        )
        for r in rows
    ]
    widths = [max(len(str(x[i])) for x in (header, *cells)) for i in range(len(header) - 1)]
    for cell in (header, *cells):
        lead = "  ".join(str(v).ljust(w) for v, w in zip(cell[:-1], widths))
        lines.append(f"  {lead}  {cell[-1]}".rstrip())
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
                f"(overhead {fmt_time(c.overhead_s + c.floor_s)}, compute "
                f"{fmt_time(max(c.compute_s - c.overhead_s - c.floor_s, 0.0))}, "
                f"memory {fmt_time(c.memory_s)}, "
                f"network {fmt_time(c.network_s)}; SRAM {fmt_bytes(c.sram_bytes)})"
            )
            lines += [kernel_line(k) for k in kernels if k.config == c.index]
    if plan.warnings:
        lines += ["", "Warnings:"] + [f"  {w}" for w in plan.warnings]
    return "\n".join(lines) + "\n"
