"""What `mapshard run` prints: headline numbers, where the time goes, and DFModel's
statistics lines verbatim (scripts written for DFModel grep for them)."""

from __future__ import annotations

import sys

from mapshard.fmt import fmt_bytes, fmt_pct, fmt_si, fmt_time
from mapshard.report.energy import money_text, step_energy
from mapshard.report.summary import parallelism_text, step_components, training_text
from mapshard.report.totals import (
    busy_total_s,
    config_total_s,
    parallel_degrees,
    phase_instances,
    phase_total_s,
)
from mapshard.views import HEADER, Sensitivity, Serving, Views
from solver.api import Term, describe_model_differences
from solver.plan import Plan

MAX_CONFIG_ROWS = 12  # per phase


def _t(seconds: float) -> str:
    return fmt_time(seconds) if seconds else "-"


def _bold(text: str, color: bool) -> str:
    return f"\033[1m{text}\033[0m" if color else text


STOP_TEXT = {
    "time_limit": "at the time limit",
    "path_cap": "on the fusion search's cap of priced segmentations (solver max_paths)",
    "memory_split": "on the cap of solves tracing each graph's latency-vs-DRAM frontier "
    "(the DRAM split among the graphs is not proven optimal)",
    "unexplained": "a layout skipped: its graph search found no mapping that no resource "
    "explains (a search defect; please report the setup)",
    "split_over_capacity": "a layout skipped: its DRAM split chose plans over the chip's "
    "capacity (a search defect; please report the setup)",
}


def headline_lines(plan: Plan) -> list[str]:
    """The numbers a reader wants first, one per line."""
    st = plan.stats
    chips = f"{plan.num_chips} chip" + ("s" if plan.num_chips != 1 else "")
    lines = [f"Scenario {plan.scenario} ({plan.workload_kind}, {chips})"]
    gap = "-" if st.gap is None else fmt_pct(st.gap)
    lines.append(
        f"Solver: {st.status}, gap {gap}, {fmt_time(st.solve_time_s)}; outer choices "
        f"{st.choices_solved} solved, {st.choices_pruned} pruned, "
        f"{st.choices_infeasible} infeasible of {st.choices_total}"
    )
    if st.status == "time_limit":
        lines.append(f"Search stopped: {STOP_TEXT.get(st.stop_reason, st.stop_reason)}")
    if st.search_space != "all":
        lines.append(f"Fusion search restricted to {st.search_space}: optimal only within it")
    if plan.ttft_s is not None or plan.tpot_s is not None:
        lines.append(
            f"Request latency {fmt_time(plan.latency_s)}: TTFT {fmt_time(plan.ttft_s)}"
            f", TPOT {fmt_time(plan.tpot_s)}, "
            f"{fmt_si(plan.tokens_per_s)} {_token_kind(plan)} tokens/s"
        )
    elif plan.iteration_time_s is not None:
        lines.append(f"Iteration time {fmt_time(plan.iteration_time_s)}")
    else:
        lines.append(f"Latency {fmt_time(plan.latency_s)}")
    if plan.tokens_per_s is not None and plan.ttft_s is None and plan.tpot_s is None:
        lines.append(f"Throughput {fmt_si(plan.tokens_per_s)} tokens/s")
    placed = ", ".join(f"{k}: {v}" for k, v in sorted(plan.placement.items()))
    lines.append(
        "Parallelism "
        + parallelism_text(plan)
        + (f"  ({placed})" if placed else "")
        + (f"; {plan.micro_batches} micro-batches" if plan.micro_batches > 1 else "")
    )
    if plan.training:
        lines.append(f"Training {training_text(plan)}")
    if plan.chip_calibration is not None:
        lines.append(f"Chip efficiency {plan.chip_calibration.describe()}")
    lines.append(
        f"FLOPS utilization {fmt_pct(plan.flops_utilization)} of "
        f"{fmt_si(plan.peak_flops_per_chip, 'FLOP/s')} per chip; workload "
        f"{fmt_si(plan.workload_flop, 'FLOP')} per step"
    )
    m = plan.memory
    cap = f" of {fmt_bytes(m.capacity)} ({fmt_pct(m.total / m.capacity)})" if m.capacity else ""
    parts = [
        (n, v)
        for n, v in (
            ("weights", m.weights),
            ("gradients", m.gradients),
            ("optimizer", m.optimizer),
            ("activations", m.activations),
            ("KV", m.kv_cache),
        )
        if v > 0
    ]
    lines.append(
        f"Memory per chip {fmt_bytes(m.total)}{cap}"
        + (": " + ", ".join(f"{n} {fmt_bytes(v)}" for n, v in parts) if parts else "")
    )
    power = fmt_si(plan.system_power_W, "W") if plan.system_power_W > 0 else "not modelled"
    lines.append(
        f"System cost {money_text(plan.system_cost)}, power {power}, "
        f"energy per step {step_energy(plan).text()}"
    )
    return lines


def _token_kind(plan: Plan) -> str:
    """Prefill alone counts prompt tokens; decode and whole requests generated ones."""
    return "input" if plan.tpot_s is None else "output"


def _config_label(c) -> str:
    """`config 3 attention`, or `config 3 q_proj+2` for several kernels."""
    first = c.kernels[0] if c.kernels else ""
    more = f"+{len(c.kernels) - 1}" if len(c.kernels) > 1 else ""
    return f"  config {c.index} {first}{more}"


def config_table(plan: Plan) -> list[str]:
    """Phases and their configurations: time per step, binding resource, share."""
    busy = busy_total_s(plan) or 1.0
    head = (
        f"{'phase / configuration':<24}{'kernels':>8}{'inst.':>7}{'one':>10}"
        f"{'total':>10}  {'bound':<8}{'compute':>9}{'memory':>9}{'network':>9}"
        f"{'% busy':>8}"
    )
    lines = [head, "-" * len(head)]
    for p in plan.phases:
        n = phase_instances(plan, p)
        total = phase_total_s(plan, p)
        lines.append(
            f"{p.name[:24]:<24}{len(p.kernels):>8}{n:>7g}{fmt_time(p.latency_s):>10}"
            f"{fmt_time(total):>10}  {'':<8}{'':>27}{100 * total / busy:>7.1f}%"
        )
        configs = sorted(p.configs, key=lambda c: -c.latency_s)[:MAX_CONFIG_ROWS]
        for c in sorted(configs, key=lambda c: c.index):
            t = config_total_s(plan, p, c)
            lines.append(
                f"{_config_label(c):<24.24}{len(c.kernels):>8}{'':>7}"
                f"{fmt_time(c.latency_s):>10}{fmt_time(t):>10}  {c.bound:<8}"
                f"{_t(c.compute_s * n):>9}{_t(c.memory_s * n):>9}"
                f"{_t(c.network_s * n):>9}{100 * t / busy:>7.1f}%"
            )
        if len(p.configs) > MAX_CONFIG_ROWS:
            lines.append(f"  ... {len(p.configs) - MAX_CONFIG_ROWS} shorter configurations")
    parts = step_components(plan)
    if parts:
        lines.append("Step time: " + ", ".join(f"{k} {fmt_time(v)}" for k, v in parts))
    return lines


def difference_lines(plan: Plan) -> list[str]:
    """The native-vs-DFModel terms (Plan.model_differences), one sentence each."""
    lines = describe_model_differences(tuple(Term(*row) for row in plan.model_differences))
    labels = {"system_cost": ("System Cost", "$"), "system_power_W": ("System Power", "W")}
    for name, a, b in plan.cost_differences:
        label, unit = labels.get(name, (name, ""))
        lines.append(
            f"{label} (DFModel's per-topology link/switch counts, no switch at <= 4 chips): "
            f"{a:,.6g} {unit} here, {b:,.6g} {unit} in DFModel ({a - b:+,.6g} {unit})"
        )
    return lines


def dfmodel_lines(plan: Plan) -> list[str]:
    """DFModel's statistics, printed as DFModel prints them (`print(label, value)`); a cost
    or power the library does not know says so instead of printing 0."""
    deg = parallel_degrees(plan)
    cost, power = float(plan.system_cost), float(plan.system_power_W)
    return [
        f"System Cost {cost!r}" if cost > 0 else "System Cost not priced",
        f"System Power {power!r}" if power > 0 else "System Power not modelled",
        f"Workload FLOP {float(plan.workload_flop)!r}",
        f"System FLOPS Utilization {float(plan.flops_utilization)!r}",
        f"Optimizer Runtime (s) {float(plan.stats.solve_time_s)!r}",
        f"TP {deg['tp']}",
        f"PP {deg['pp']}",
        f"DP {deg['dp']}",
    ]


def sensitivity_lines(sensitivity: Sensitivity) -> list[str]:
    """The what-if table: resource, scale, re-solved latency, change, re-solve status."""
    rows = [["resource", "scale", "latency", "change", "re-solve"]]
    rows += sensitivity.table_rows()
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        + "  "
        + r[4]
        for r in rows
    ]
    return [lines[0], "-" * len(lines[0]), *lines[1:], sensitivity.binding()]


def serving_lines(serving: Serving) -> list[str]:
    """TTFT / TPOT / tokens/s per batch and input length, the plan's row marked."""
    rows = [HEADER, *serving.table_rows()]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) + "  " + r[6] for r in rows]
    head = f"objective {serving.objective}, {serving.limits_text()}"
    return [head, lines[0], "-" * len(lines[0]), *lines[1:]]


def format_summary(
    plan: Plan,
    views: Views | None = None,
    color: bool | None = None,
) -> str:
    """The terminal summary; bold headings only when `color` (default: stdout is a TTY);
    each view the run computed (serving, stream, what-if) adds its block."""
    views = views or Views()
    sensitivity, serving, stream = views.sensitivity, views.serving, views.stream
    if color is None:
        color = sys.stdout.isatty()
    lines = [_bold("MapShard plan", color)]
    lines += headline_lines(plan)
    lines += ["", _bold("Where the time goes (per step)", color)]
    lines += config_table(plan)
    if serving is not None:
        lines += ["", _bold("Serving: latency and throughput versus batch", color)]
        lines += serving_lines(serving)
    if stream is not None:
        lines += ["", _bold("Request stream: in-flight batching", color)]
        lines += stream.lines()
    if sensitivity is not None:
        lines += ["", _bold("What if (each resource scaled, re-solved)", color)]
        lines += sensitivity_lines(sensitivity)
    if plan.warnings:
        lines += ["", _bold("Warnings", color)] + [f"- {w}" for w in plan.warnings]
    if plan.model_differences or plan.cost_differences:
        title = "Native model vs DFModel's equations (this plan; times per step)"
        lines += ["", _bold(title, color)]
        lines += [f"- {line}" for line in difference_lines(plan)]
    lines += [""] + dfmodel_lines(plan)
    return "\n".join(lines) + "\n"
