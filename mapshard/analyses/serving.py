"""Serving view for LLM inference: TTFT, TPOT and tokens/s versus batch (and input length)
in one run, and `objective: MAX_THROUGHPUT` under TTFT/TPOT limits.

Each point is the same scenario with `llm_inference.batch` / `input_len` set, generated and
solved through the pipeline (the outer search picks the parallelism at every point). At a
fixed batch and length the tokens of a step are fixed, so the least-latency plan is also the
most-throughput plan of that point; MAX_THROUGHPUT then picks, among the points within the
limits, the one with the most tokens/s (ties: the smaller batch, then the shorter input).
"""

from __future__ import annotations

from generator.requests import request_batch
from hardware.system import System
from mapshard import pipeline
from mapshard.fmt import fmt_time
from mapshard.scenario import Loaded, Scenario
from mapshard.views import Point, Serving
from schema import setup_pb2
from schema.errors import InfeasibleError, NoPlanError
from solver.plan import Plan


def _point_setup(setup: setup_pb2.Setup, batch: int, input_len: int) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    s.CopyFrom(setup)
    inf = s.workload.llm_inference
    inf.batch, inf.input_len = batch, input_len
    if inf.phase == setup_pb2.DECODE:  # the KV length of the step
        inf.context_len = input_len
    inf.ClearField("serving")
    return s


def _length(inf: setup_pb2.LlmInference) -> int:
    """The prompt length of a point; a DECODE step's KV length."""
    if inf.phase == setup_pb2.DECODE and inf.context_len:
        return int(inf.context_len)
    return int(inf.input_len)


def _within(p: Point, max_ttft_s: float | None, max_tpot_s: float | None) -> bool:
    eps = 1 + 1e-12
    ok_ttft = not max_ttft_s or p.ttft_s is None or p.ttft_s <= max_ttft_s * eps
    ok_tpot = not max_tpot_s or p.tpot_s is None or p.tpot_s <= max_tpot_s * eps
    return p.latency_s is not None and ok_ttft and ok_tpot


def _solve_point(
    scenario: Scenario, time_limit_s: float | None
) -> tuple[Point, Plan | InfeasibleError | NoPlanError]:
    """The point, and its plan or why it has none."""
    inf = scenario.setup.workload.llm_inference
    b, n = request_batch(inf), _length(inf)
    try:
        plan = pipeline.plan(scenario, time_limit_s)
    except InfeasibleError as exc:
        return Point(b, n, "infeasible", reason=str(exc.resource)), exc
    except NoPlanError as exc:
        return Point(b, n, "no_plan"), exc
    deg = {k.lower(): v for k, v in plan.parallelism.items()}
    par = " ".join(f"{k.upper()}{v}" for k, v in sorted(deg.items()) if v > 1) or "1 chip"
    point = Point(b, n, plan.stats.status, plan.latency_s, plan.ttft_s, plan.tpot_s,
                  plan.tokens_per_s, par)  # fmt: skip
    return point, plan


def serve(
    loaded: Loaded, system: System, time_limit_s: float | None = None
) -> tuple[Serving, Scenario, Plan]:
    """Solve every (batch, input_len) point; returns (Serving, Scenario, Plan) where the
    scenario and plan are the chosen point's (MAX_THROUGHPUT) or the setup's own batch
    (MIN_LATENCY). Raises InfeasibleError when MAX_THROUGHPUT finds no point within the
    limits."""
    inf = loaded.setup.workload.llm_inference
    sv = inf.serving
    batches = list(sv.batch) or [request_batch(inf)]
    lengths = list(sv.input_len) or [_length(inf)]
    max_ttft = sv.max_ttft_ms / 1e3 or None
    max_tpot = sv.max_tpot_ms / 1e3 or None
    points, solved = [], []
    failed: list[InfeasibleError | NoPlanError] = []
    for b in batches:
        for n in lengths:
            one = pipeline.load_message(_point_setup(loaded.setup, b, n), loaded.path)
            scenario = pipeline.assemble(one, system)
            point, plan = _solve_point(scenario, time_limit_s)
            point = Point(
                **(point.__dict__ | {"within_limits": _within(point, max_ttft, max_tpot)})
            )
            points.append(point)
            if not isinstance(plan, Plan):
                failed.append(plan)
                plan = None
            solved.append((scenario, plan))
    if not any(plan is not None for _, plan in solved):
        # no point has a plan: the first one's reason (DRAM, ...), not the latency limits
        raise failed[0]
    objective = setup_pb2.ServingObjective.Name(sv.objective)
    chosen = _choose(points) if objective == "MAX_THROUGHPUT" else None
    view = Serving(objective, max_ttft, max_tpot, tuple(points), chosen)
    if objective == "MAX_THROUGHPUT":
        if chosen is None:
            best = min((p.tpot_s or p.latency_s for p in points if p.latency_s), default=None)
            raise InfeasibleError(
                "serving limits",
                f"no batch meets {view.limits_text()}; the fastest point takes {fmt_time(best)}",
                "raise the limits or add smaller batches to serving.batch",
            )
        return view, *solved[chosen]
    own_key = (request_batch(inf), _length(inf))
    for point, (scenario, plan) in zip(points, solved):
        if (point.batch, point.input_len) == own_key and plan is not None:
            return view, scenario, plan
    # the setup's own point, its serving block removed as every point's is: its plan.txt
    # reruns that point (with the block, every batch would take this point's pins)
    one = pipeline.load_message(_point_setup(loaded.setup, *own_key), loaded.path)
    own = pipeline.assemble(one, system)
    return view, own, pipeline.plan(own, time_limit_s)


def _choose(points: list[Point]) -> int | None:
    """The point within the limits with the most tokens/s; ties: smaller batch, input."""
    ok = [i for i, p in enumerate(points) if p.within_limits and p.tokens_per_s]
    if not ok:
        return None
    return max(ok, key=lambda i: (points[i].tokens_per_s, -points[i].batch, -points[i].input_len))
