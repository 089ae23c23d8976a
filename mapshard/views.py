"""The analyses' views, as frozen records: the what-if table (sensitivity), the serving
table (TTFT / TPOT / tokens/s versus batch) and the request stream. The analyses in
mapshard/analyses/ fill them; the writers (mapshard/report/) and the API read them, so
neither side imports the other."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mapshard.analyses.stream_server import ServerResult
from mapshard.analyses.stream_sim import PERCENTILES, StreamStats
from mapshard.analyses.stream_steps import INTERPOLATION
from mapshard.fmt import fmt_bytes, fmt_pct, fmt_si, fmt_time
from schema import setup_pb2


@dataclass(frozen=True)
class Row:
    """One re-solve: `resource` scaled by `factor` -> `latency_s` (None when no plan)."""

    resource: str
    factor: float
    status: str  # optimal | time_limit | infeasible | no_plan
    latency_s: float | None
    gap: float | None
    reason: str = ""


@dataclass(frozen=True)
class Sensitivity:
    base_latency_s: float
    time_limit_s: float
    rows: tuple[Row, ...]
    base_status: str = "optimal"  # the plan the rows compare with
    skipped: str = ""  # why the table was not computed ("" = computed)

    def ratio(self, row: Row) -> float | None:
        """new latency / base latency: 0.5 = twice as fast (None when no plan)."""
        if row.latency_s is None or self.base_latency_s <= 0:
            return None
        return row.latency_s / self.base_latency_s

    def binding(self) -> str:
        """The binding resource in words, from the x2 rows: the one doubling helps most,
        then the others ("DRAM bandwidth binds: 2x gives 40% faster; 2x compute gives 3%")."""
        if self.skipped:
            return f"what-if not computed: {self.skipped}"
        doubled = [(self.ratio(r), r) for r in self.rows if r.factor == 2.0]
        doubled = [(s, r) for s, r in doubled if s is not None]
        if not doubled:
            return "no x2 re-solve found a plan"
        doubled.sort(key=lambda sr: (sr[0], sr[1].resource))
        best_s, best = doubled[0]
        if best_s > 1 / 1.005:
            return "no single resource binds: doubling any one of them gives under 0.5%"
        others = "; ".join(f"2x {r.resource} gives {_faster(s)}" for s, r in doubled[1:3])
        head = f"{best.resource} binds: {_faster(best_s)} with 2x {best.resource}"
        caveat = (
            f" (the plan itself stopped at {self.base_status.replace('_', ' ')}: changes "
            "compare best plans found, not proven optima)"
            if self.base_status != "optimal"
            else ""
        )
        return head + (f"; {others}" if others else "") + caveat

    def as_dict(self) -> dict:
        """summary.json's `sensitivity` key."""
        return {
            "base_latency_s": self.base_latency_s,
            "base_status": self.base_status,
            "resolve_time_limit_s": self.time_limit_s,
            "binding": self.binding(),
            "rows": [dataclasses.asdict(r) | {"latency_ratio": self.ratio(r)} for r in self.rows],
        }

    def table_rows(self) -> list[list[str]]:
        """Rows for people: resource, factor, new latency, change, solve status."""
        out = []
        for r in self.rows:
            s = self.ratio(r)
            status = {
                "optimal": "optimal",
                "time_limit": f"{_stop_words(r.reason)}: best found, within {fmt_pct(r.gap)} "
                "of optimal",
                "infeasible": f"infeasible: {r.reason}",
                "no_plan": f"no plan within {self.time_limit_s:.3g} s",
            }.get(r.status, r.status)
            change = "-" if s is None else _faster(s)
            out.append([r.resource, f"x{r.factor:g}", fmt_time(r.latency_s), change, status])
        return out


def _stop_words(stop: str) -> str:
    """A stopped re-solve's stop reason (SolveStats.stop_reason) in words."""
    return "time limit" if stop in ("", "time_limit") else f"work budget ({stop})"


def _faster(ratio: float) -> str:
    """A latency ratio in words: 0.714 -> "40% faster" (1/0.714 - 1), 1.8 -> "80% slower"
    (takes 80% longer)."""
    change = 1.0 / ratio - 1.0 if ratio < 1 else ratio - 1.0
    if change < 0.0005:
        return "no change"
    word = "faster" if ratio < 1 else "slower"
    return f"{change:.0%} {word}" if change >= 0.095 else f"{change:.1%} {word}"


@dataclass(frozen=True)
class Point:
    batch: int
    input_len: int
    status: str  # optimal | time_limit | infeasible | no_plan
    latency_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    parallelism: str = ""
    within_limits: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Serving:
    objective: str  # MIN_LATENCY | MAX_THROUGHPUT
    max_ttft_s: float | None
    max_tpot_s: float | None
    points: tuple[Point, ...]
    chosen: int | None  # index into points of the plan's point (MAX_THROUGHPUT)

    def as_dict(self) -> dict:
        """summary.json's `serving` key."""
        return {
            "objective": self.objective,
            "max_ttft_s": self.max_ttft_s,
            "max_tpot_s": self.max_tpot_s,
            "chosen": self.chosen,
            "points": [p.__dict__ for p in self.points],
        }

    def table_rows(self) -> list[list[str]]:
        rows = []
        for i, p in enumerate(self.points):
            mark = "<- plan" if i == self.chosen else ("" if p.within_limits else "over limit")
            if p.latency_s is None:
                mark = f"{p.status}: {p.reason}" if p.reason else p.status
            rows.append(
                [
                    str(p.batch),
                    str(p.input_len),
                    p.parallelism or "-",
                    fmt_time(p.ttft_s),
                    fmt_time(p.tpot_s),
                    fmt_si(p.tokens_per_s) if p.tokens_per_s else "-",
                    mark,
                ]
            )
        return rows

    def limits_text(self) -> str:
        parts = [
            f"{name} <= {fmt_time(v)}"
            for name, v in (("TTFT", self.max_ttft_s), ("TPOT", self.max_tpot_s))
            if v
        ]
        return " and ".join(parts) if parts else "no latency limits"


HEADER = ["batch", "input/KV", "parallelism", "TTFT", "TPOT", "tokens/s", ""]


@dataclass(frozen=True)
class StreamView:
    """The stream's settings, what the engine could hold, and the simulated result."""

    settings: dict
    kv_capacity_tokens: int
    kv_bytes_per_token_per_chip: float
    parallelism: str
    parallelism_fixed: bool
    points_solved: int
    step_points: list
    plan_step: str
    stats: StreamStats
    kernels_per_step: int = 0  # kernels of one forward pass (the decode step's plan)
    step_overhead_s: float = 0.0  # kernels_per_step x kernel_launch_us, every step
    server: ServerResult | None = None  # POISSON: the rate and the latency limits
    notes: tuple[str, ...] = ()
    # the setup the stream was run from (plan.txt writes it: the plan's scenario is a step's)
    setup: setup_pb2.Setup | None = dataclasses.field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict:
        """summary.json's `stream` key (times in seconds)."""
        s = self.stats
        pct = {f"p{q}": None for q in PERCENTILES}
        return {
            **self.settings,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "kv_bytes_per_token_per_chip": self.kv_bytes_per_token_per_chip,
            "parallelism": self.parallelism,
            "parallelism_fixed": self.parallelism_fixed,
            "output_tokens_per_s": s.output_tokens_per_s,
            "requests_per_s": s.requests_per_s,
            "output_tokens": s.output_tokens,
            "duration_s": s.duration_s,
            "steps": s.steps,
            "max_concurrency": s.max_concurrency,
            "ttft_s": dict(zip(pct, s.ttft_s)),
            "tpot_s": dict(zip(pct, s.tpot_s)) if s.tpot_s else pct,
            "latency_s": dict(zip(pct, s.latency_s)),
            "interpolation": INTERPOLATION,
            "kernels_per_step": self.kernels_per_step,
            "step_overhead_s": self.step_overhead_s,
            "step_points_solved": self.points_solved,
            "step_points": self.step_points,
            "plan_step": self.plan_step,
            "server": self.server.as_dict() if self.server else None,
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """The terminal summary's stream block."""
        s, st = self.settings, self.stats
        sv = self.server
        arrival = s["arrival"] + (f" {sv.rate_per_s:.4g}/s" if sv else "")
        pct = "/".join(f"p{q}" for q in PERCENTILES)
        return [
            f"{s['num_requests']} requests ({arrival}, seed {s['seed']}), input {s['input_len']},"
            f" output {s['output_len']} tokens; max_batch {s['max_batch']}, max_num_tokens "
            f"{s['max_num_tokens']}, chunked prefill {'on' if s['chunked_prefill'] else 'off'}",
            f"KV cache: {self.kv_capacity_tokens:,} tokens ({s['kv_memory_fraction']:g} of "
            f"the free DRAM, {fmt_bytes(self.kv_bytes_per_token_per_chip)}/token/chip); "
            f"parallelism {self.parallelism}"
            + ("" if self.parallelism_fixed else " (searched at every step point)"),
            f"throughput: {fmt_si(st.output_tokens_per_s)} output tokens/s, "
            f"{st.requests_per_s:.3g} requests/s over {fmt_time(st.duration_s)} "
            f"({st.steps} steps, at most {st.max_concurrency} sequences at once)",
            f"engine overhead: {self.kernels_per_step} kernels per step x "
            f"{s['kernel_launch_us']:g} us launch (less the chip's own per-kernel overhead) = "
            f"{fmt_time(self.step_overhead_s)} per step, on top of each solved step time",
            f"TTFT {pct}: " + " / ".join(fmt_time(x) for x in st.ttft_s),
            f"TPOT {pct}: " + (" / ".join(fmt_time(x) for x in st.tpot_s) or "- (one token each)"),
            f"latency {pct}: " + " / ".join(fmt_time(x) for x in st.latency_s),
            *([_server_line(sv)] if sv and (sv.max_ttft_p99_s or sv.max_tpot_p99_s) else []),
            f"{INTERPOLATION} ({self.points_solved} points solved); the plan shown is "
            f"{self.plan_step}",
            *self.notes,
        ]


def _server_line(sv: ServerResult) -> str:
    lims = " and ".join(
        f"p99 {name} <= {fmt_time(v)}"
        for name, v in (("TTFT", sv.max_ttft_p99_s), ("TPOT", sv.max_tpot_p99_s))
        if v
    )
    if sv.searched and sv.at_capacity:
        return (
            f"server: {sv.rate_per_s:.4g} requests/s, the offline throughput (every request at "
            f"t = 0), already meets {lims}: the limits do not bind, the engine's capacity does"
        )
    if sv.searched:
        return (
            f"server: the highest Poisson rate with {lims} is {sv.rate_per_s:.4g} requests/s "
            f"(bisected, {sv.simulations} simulated streams; the figures above are at it)"
        )
    return (
        f"server: {sv.rate_per_s:.4g} requests/s {'meets' if sv.within_limits else 'misses'} {lims}"
    )


@dataclass(frozen=True)
class Views:
    """The views a run computed beside its plan (None: not asked for)."""

    sensitivity: Sensitivity | None = None
    serving: Serving | None = None
    stream: StreamView | None = None
