"""What `mapshard run` prints: headline numbers, where the time goes, and DFModel's
statistics lines verbatim (scripts written for DFModel grep for them)."""

from __future__ import annotations

import math
import sys

from mapshard.analyses.stream_sim import PERCENTILES
from mapshard.fmt import fmt_bytes, fmt_money, fmt_pct, fmt_si, fmt_time, sig
from mapshard.report.energy import money_text, step_energy, step_word
from mapshard.report.summary import parallelism_text, training_text
from mapshard.report.totals import (
    config_step_s,
    parallel_degrees,
    phase_instances,
    phase_step_s,
    row_split,
    step_terms,
)
from mapshard.views import HEADER, Sensitivity, Serving, StreamView, Views
from solver import api as solver_api
from solver.plan import Plan

MAX_CONFIG_ROWS = 12  # per phase


def _t(seconds: float) -> str:
    return fmt_time(seconds) if seconds else "-"


def _bold(text: str, color: bool) -> str:
    return f"\033[1m{text}\033[0m" if color else text


STOP_TEXT = {
    "time_limit": "at the time limit",
    "path_cap": "on the fusion search's cap of priced segmentations (solver max_paths)",
    "price_cap": "on the fusion search's budget of segment prices (solver max_priced)",
    "node_limit": "on a MILP's node budget (solver node_limit)",
    "candidate_cap": "on the outer search's candidate budget (solver max_candidates)",
    "tile_menus": "short of a proof over every tile: the bound's rounds of cutting sampled "
    "tile groups ran out (solver tile_refinements)",
    "tile_bound": "short of a proof over every tile: a round of cutting sampled tile groups "
    "left the bound where it was (a larger solver tile_menu_size samples more)",
    "memory_split": "on the cap of solves tracing each graph's latency-vs-DRAM frontier "
    "(the DRAM split among the graphs is not proven optimal)",
    "step_bound": "short of a proof of the step around the graphs: each graph search proved "
    "its plan, but the terms priced outside them (optimizer update, gradient syncs at the "
    "plan's storage) are bounded below their price",
    "unexplained": "a layout skipped: its graph search found no mapping that no resource "
    "explains (a search defect; please report the setup)",
    "split_over_capacity": "a layout skipped: its DRAM split chose plans over the chip's "
    "capacity (a search defect; please report the setup)",
}


def headline_lines(plan: Plan, stream: StreamView | None = None) -> list[str]:
    """The numbers a reader wants first, one per line: for a request stream, the stream's
    throughput and median latencies, the plan's engine step after them."""
    st = plan.stats
    chips = f"{plan.num_chips} chip" + ("s" if plan.num_chips != 1 else "")
    lines = [f"Scenario {plan.scenario} ({plan.workload_label or plan.workload_kind}, {chips})"]
    gap = "-" if st.gap is None else fmt_pct(st.gap)
    lines.append(
        f"Solver: {st.status}, gap {gap}, {fmt_time(st.solve_time_s)}; outer choices "
        f"{st.choices_solved} solved, {st.choices_pruned} pruned, "
        f"{st.choices_infeasible} infeasible"
        + (f", {st.choices_not_solved} not solved" if st.choices_not_solved else "")
        + f" of {st.choices_total}"
    )
    if st.status == "time_limit":
        lines.append(f"Search stopped: {STOP_TEXT.get(st.stop_reason, st.stop_reason)}")
    if st.search_space != "all":
        lines.append(f"Fusion search restricted to {st.search_space}: optimal only within it")
    if stream is not None:
        lines += stream_headline_lines(stream)
    if stream is not None and plan.tpot_s is not None:
        lines.append(
            f"Plan shown: one engine step of {fmt_time(plan.latency_s)} "
            f"({fmt_si(plan.tokens_per_s)} tokens/s within that step)"
        )
    elif plan.ttft_s is not None or plan.tpot_s is not None:
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
        f"energy per {step_word(plan)} {step_energy(plan).text()}"
    )
    return lines


def stream_headline_lines(stream: StreamView) -> list[str]:
    st = stream.stats
    median = PERCENTILES.index(50)
    tpot = fmt_time(st.tpot_s[median]) if st.tpot_s else "-"
    return [
        f"Request stream: {fmt_si(st.output_tokens_per_s)} output tokens/s, "
        f"{sig(st.requests_per_s)} requests/s; p50 TTFT {fmt_time(st.ttft_s[median])}, "
        f"TPOT {tpot}, latency {fmt_time(st.latency_s[median])}"
    ]


def _token_kind(plan: Plan) -> str:
    """Prefill alone counts prompt tokens; decode and whole requests generated ones."""
    return "input" if plan.tpot_s is None else "output"


def _config_label(c) -> str:
    """`config 3 attention`, or `config 3 q_proj+2` for several kernels."""
    first = c.kernels[0] if c.kernels else ""
    more = f"+{len(c.kernels) - 1}" if len(c.kernels) > 1 else ""
    return f"  config {c.index} {first}{more}"


def _step_word(plan: Plan) -> str:
    return step_word(plan)


def config_table(plan: Plan) -> list[str]:
    """Phases and their configurations, then the step's own terms (bubble, exposed
    communication, optimizer): wall time per step, adding up to the step time."""
    step = plan.latency_s or 1.0
    word = _step_word(plan)
    head = (
        f"{'phase / configuration':<24}{'kernels':>8}{'inst.':>7}{'one':>10}"
        f"{'per ' + word:>12}  {'bound':<9}{'overhead':>9}{'compute':>9}{'memory':>9}"
        f"{'network':>9}"
        f"{'% ' + word:>11}"
    )
    lines = [head, "-" * len(head)]

    def plain(label: str, seconds: float) -> str:
        share = 100 * seconds / step
        return f"{label[:24]:<24}{'':>25}{fmt_time(seconds):>12}  {'':<45}{share:>10.1f}%"

    per_phase = phase_step_s(plan)
    for p in plan.phases:
        n = phase_instances(plan, p)
        phase_s = per_phase[p.name]
        lines.append(
            f"{p.name[:24]:<24}{len(p.kernels):>8}{n:>7g}{fmt_time(p.latency_s):>10}"
            f"{fmt_time(phase_s):>12}  {'':<45}{100 * phase_s / step:>10.1f}%"
        )
        configs = sorted(p.configs, key=lambda c: -c.latency_s)[:MAX_CONFIG_ROWS]
        for c in sorted(configs, key=lambda c: c.index):
            t = config_step_s(plan, p, c, phase_s)
            per = t / c.latency_s if c.latency_s > 0 else 0.0  # instances on the critical path
            parts = "".join(f"{_t(x * per):>9}" for x in row_split(plan, c))
            lines.append(
                f"{_config_label(c):<24.24}{len(c.kernels):>8}{'':>7}"
                f"{fmt_time(c.latency_s):>10}{fmt_time(t):>12}  {c.bound:<9}"
                f"{parts}{100 * t / step:>10.1f}%"
            )
        if len(p.configs) > MAX_CONFIG_ROWS:
            lines.append(f"  ... {len(p.configs) - MAX_CONFIG_ROWS} shorter configurations")
    lines += [plain(name.replace("_", " "), v) for name, v in step_terms(plan)]
    lines.append(plain(f"{word} time", plan.latency_s))
    return lines


def difference_lines(plan: Plan) -> list[str]:
    """The native-vs-DFModel terms (Plan.model_differences), one sentence each."""
    terms = tuple(solver_api.Term(*row) for row in plan.model_differences)
    lines = solver_api.describe_model_differences(terms)
    labels = {"system_cost": ("System Cost", fmt_money), "system_power_W": ("System Power", _watts)}
    for name, a, b in plan.cost_differences:
        label, show = labels.get(name, (name, sig))
        diff = show(abs(a - b))
        lines.append(
            f"{label} (DFModel's per-topology link/switch counts, no switch at <= 4 chips): "
            f"{show(a)} here, {show(b)} in DFModel ({'-' if a < b else '+'}{diff})"
        )
    return lines


def _watts(x: float) -> str:
    return fmt_si(x, "W")


def _dfmodel_value(x: float) -> str:
    """A DFModel statistic in its print form (a plain number `float()` reads), rounded to six
    significant digits, never in exponent form: summary.json has every digit."""
    if x == 0 or not math.isfinite(x):
        return repr(float(x))
    exp = math.floor(math.log10(abs(x)))
    if exp >= 6:
        return f"{round(x, 5 - exp):.0f}"
    text = f"{x:.{5 - exp}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def dfmodel_lines(plan: Plan) -> list[str]:
    """DFModel's statistics, as DFModel prints them (`print(label, value)`, so its users'
    scripts find them), at six significant digits; a cost or power the library does not
    know says so instead of printing 0."""
    deg = parallel_degrees(plan)
    cost, power = float(plan.system_cost), float(plan.system_power_W)
    return [
        f"System Cost {_dfmodel_value(cost)}" if cost > 0 else "System Cost not priced",
        f"System Power {_dfmodel_value(power)}" if power > 0 else "System Power not modelled",
        f"Workload FLOP {_dfmodel_value(plan.workload_flop)}",
        f"System FLOPS Utilization {_dfmodel_value(plan.flops_utilization)}",
        f"Optimizer Runtime (s) {_dfmodel_value(plan.stats.solve_time_s)}",
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
    lines += headline_lines(plan, stream)
    lines += ["", _bold(f"Where the time goes (per {_step_word(plan)}, adding up to it)", color)]
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
