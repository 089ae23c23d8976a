"""MLPerf-Server-style rate for the request-stream view: the highest Poisson arrival rate
whose p99 time to first token and p99 time per output token stay within the limits.

The arrival pattern is drawn once at 1 request/s (mapshard.analyses.stream.requests_of) and scaled:
at rate r request i arrives at t_i / r, so a higher rate compresses the same pattern and
the search compares like with like. The rate is bisected between the offline throughput
(requests/s with every request at t = 0, which no arrival rate can beat for long) and 1/4096
of it, over a fixed number of halvings: deterministic, and within 1/2^ITERATIONS of the
bracket. A stream that meets the limits at the offline throughput is reported there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from mapshard.analyses.stream_sim import EngineLimits, Request, StepCost, StreamStats, simulate
from schema.errors import InfeasibleError

ITERATIONS = 14
LOWEST_SHARE = 1 / 4096  # of the offline throughput: the bottom of the bracket


@dataclass(frozen=True)
class ServerResult:
    rate_per_s: float
    searched: bool  # the rate was searched (rate_per_s 0 in the setup)
    max_ttft_p99_s: float | None
    max_tpot_p99_s: float | None
    within_limits: bool
    stats: StreamStats
    simulations: int
    #: the searched rate is the offline throughput: the engine's capacity binds, not the limits
    at_capacity: bool = False

    def as_dict(self) -> dict:
        return {
            "rate_per_s": self.rate_per_s,
            "rate_searched": self.searched,
            "max_ttft_p99_s": self.max_ttft_p99_s,
            "max_tpot_p99_s": self.max_tpot_p99_s,
            "within_limits": self.within_limits,
            "simulations": self.simulations,
            "rate_at_capacity": self.at_capacity,
        }


def within(st: StreamStats, max_ttft_s: float | None, max_tpot_s: float | None) -> bool:
    """p99 TTFT and p99 TPOT (the last of PERCENTILES) within the limits (None: no limit)."""
    eps = 1 + 1e-12
    ok_ttft = max_ttft_s is None or st.ttft_s[-1] <= max_ttft_s * eps
    ok_tpot = max_tpot_s is None or not st.tpot_s or st.tpot_s[-1] <= max_tpot_s * eps
    return ok_ttft and ok_tpot


def at_rate(unit: Sequence[Request], rate_per_s: float) -> list[Request]:
    """The 1-request/s pattern at `rate_per_s`."""
    return [replace(r, arrival_s=r.arrival_s / rate_per_s) for r in unit]


def serve(
    unit: Sequence[Request],
    limits: EngineLimits,
    step_cost: StepCost,
    rate_per_s: float,
    max_ttft_s: float | None,
    max_tpot_s: float | None,
) -> ServerResult:
    """The stream at `rate_per_s` checked against the limits, or (rate 0) the highest rate
    within them; InfeasibleError when even the bottom of the bracket misses them."""
    if rate_per_s > 0:
        st = simulate(at_rate(unit, rate_per_s), limits, step_cost)
        ok = within(st, max_ttft_s, max_tpot_s)
        return ServerResult(rate_per_s, False, max_ttft_s, max_tpot_s, ok, st, 1)
    offline = simulate([replace(r, arrival_s=0.0) for r in unit], limits, step_cost)
    hi = offline.requests_per_s
    top = simulate(at_rate(unit, hi), limits, step_cost)
    if within(top, max_ttft_s, max_tpot_s):
        return ServerResult(hi, True, max_ttft_s, max_tpot_s, True, top, 2, at_capacity=True)
    lo = hi * LOWEST_SHARE
    best = simulate(at_rate(unit, lo), limits, step_cost)
    if not within(best, max_ttft_s, max_tpot_s):
        raise InfeasibleError(
            "latency limits",
            f"even at {lo:.3g} requests/s the p99 TTFT is {best.ttft_s[-1] * 1e3:.4g} ms and "
            f"the p99 TPOT {best.tpot_s[-1] * 1e3 if best.tpot_s else 0:.4g} ms",
            "raise max_ttft_p99_ms / max_tpot_p99_ms, lower max_batch or add chips",
        )
    for _ in range(ITERATIONS):
        mid = (lo + hi) / 2
        st = simulate(at_rate(unit, mid), limits, step_cost)
        if within(st, max_ttft_s, max_tpot_s):
            lo, best = mid, st
        else:
            hi = mid
    return ServerResult(lo, True, max_ttft_s, max_tpot_s, True, best, ITERATIONS + 3)
