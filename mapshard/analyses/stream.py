"""Request-stream view (llm_inference.stream): in-flight batching of a stream of requests on
the plan's parallelism, priced by solved engine-step costs.

1. Draw the requests from the seed (lengths, then arrival times; numpy's PCG64).
2. Solve the largest prompt step (the anchor): it fixes the parallelism (the outer search
   runs once; its placement is pinned on the topology levels for every later point) and
   gives the per-chip weights, activations and KV bytes per token; the KV cache gets
   kv_memory_fraction of the DRAM left.
3. Solve the step grid (mapshard/analyses/stream_steps.py), add the engine's host cost per step
   (the kernels of one forward pass x kernel_launch_us, see `step_overhead`), and simulate
   the stream on it (mapshard/analyses/stream_sim.py).
4. The plan written with the view is one steady-state step: decode of the most sequences
   that ran at once, at their mean KV length.
The whole machine is one engine, TP x PP (a step is one chunked-prefill batch, which DP
replicas cannot split: DP pinned by tags or a placement is bad input, `_check_no_dp`);
max_batch is capped at max_num_tokens, since every decoding sequence takes one token of a
step.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from hardware.system import System
from mapshard import pipeline
from mapshard.analyses import stream_server
from mapshard.analyses.stream_sim import EngineLimits, Request, simulate
from mapshard.analyses.stream_steps import StepShape, build_table, point_setup, prefill_points
from mapshard.compat import tagged_degrees
from mapshard.scenario import Loaded, Scenario
from mapshard.views import StreamView
from schema import setup_pb2
from schema.errors import InfeasibleError, SetupError
from schema.pins import parse_placement, placement_degrees
from schema.validation_stream import (
    DEFAULT_KERNEL_LAUNCH_US,
    DEFAULT_KV_FRACTION,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_NUM_TOKENS,
)
from solver.plan import Plan


def host_launch_beyond_chip_s(settings: dict, system: System) -> float:
    """Seconds per kernel the engine's host adds to a step beyond the per-kernel overhead
    the chip file already charges inside every solved kernel: a kernel's launch-to-launch
    time is kernel_launch_us in all, so the chip's overhead is part of it, not added to it
    (GB200 charges 0 per kernel, so its fit rows see the whole 10.4 us; H100 charges 4.5)."""
    chip_us = system.chip.efficiency.kernel_overhead_s * 1e6
    return max(settings["kernel_launch_us"] - chip_us, 0.0) * 1e-6


def _mix(mix: setup_pb2.LengthMix, given: bool, default: int, n: int, rng) -> np.ndarray:  # noqa: ANN001
    if not given or mix.tokens:
        return np.full(n, mix.tokens if given else default, dtype=np.int64)
    if mix.values:
        return np.asarray(mix.values, dtype=np.int64)[rng.integers(0, len(mix.values), n)]
    return rng.integers(mix.min, mix.max + 1, n)


def _mix_text(mix: setup_pb2.LengthMix, given: bool, default: int) -> str:
    if not given or mix.tokens:
        return str(mix.tokens if given else default)
    if mix.values:
        return "one of " + ",".join(str(v) for v in mix.values)
    return f"uniform {mix.min}..{mix.max}"


def requests_of(inf: setup_pb2.LlmInference, rate_per_s: float = 0.0) -> list[Request]:
    """The stream's requests: input lengths, output lengths, then arrivals, all drawn in
    that order from numpy's default generator seeded with `seed`. POISSON arrivals are
    one pattern scaled to `rate_per_s` (default: the setup's rate; 1 request/s when that is
    0, i.e. searched)."""
    s = inf.stream
    rng = np.random.default_rng(s.seed)
    n = int(s.num_requests)
    ins = _mix(s.input_len, s.HasField("input_len"), inf.input_len, n, rng)
    outs = _mix(s.output_len, s.HasField("output_len"), inf.output_len, n, rng)
    arrivals = np.zeros(n)
    if s.arrival == setup_pb2.POISSON:  # the 1-request/s pattern, scaled to the rate
        gaps = rng.standard_exponential(n)
        arrivals = np.concatenate(([0.0], np.cumsum(gaps[:-1]))) / (
            rate_per_s or s.rate_per_s or 1.0
        )
    return [Request(float(a), int(i), int(o)) for a, i, o in zip(arrivals, ins, outs)]


def settings_of(inf: setup_pb2.LlmInference) -> dict:
    s = inf.stream
    return {
        "num_requests": int(s.num_requests),
        "arrival": setup_pb2.Arrival.Name(s.arrival),
        "rate_per_s": float(s.rate_per_s),
        "seed": int(s.seed),
        "input_len": _mix_text(s.input_len, s.HasField("input_len"), inf.input_len),
        "output_len": _mix_text(s.output_len, s.HasField("output_len"), inf.output_len),
        "max_batch": int(s.max_batch or DEFAULT_MAX_BATCH),
        "max_num_tokens": int(s.max_num_tokens or DEFAULT_MAX_NUM_TOKENS),
        "chunked_prefill": bool(s.chunked_prefill),
        "kv_memory_fraction": float(s.kv_memory_fraction or DEFAULT_KV_FRACTION),
        "kernel_launch_us": float(
            s.kernel_launch_us if s.HasField("kernel_launch_us") else DEFAULT_KERNEL_LAUNCH_US
        ),
    }


def pin_parallelism(system: System, plan: Plan) -> System | None:
    """The system with the plan's placement as level tags (every later point then solves
    with these degrees), or None when the placement does not map whole levels."""
    if system.num_chips == 1 or all(len(lv.parallelism) == 1 for lv in system.network):
        return system  # one parallelism per level: the tags fix the layout
    # untagged levels, or a level of several tags (EP and PP on one): the anchor's layout
    tags: dict[str, list[tuple[str, int]]] = {}
    for par, span in plan.placement.items():
        for name, deg in re.findall(r"(.+?):(\d+)x?", span):
            tags.setdefault(name, []).append((par.upper(), int(deg)))
    network = []
    for lv in system.network:
        got = tags.get(lv.name, [])
        if len(got) != 1 or got[0][1] != lv.degree:
            return None
        network.append(replace(lv, parallelism=(got[0][0],)))
    return replace(system, network=tuple(network))


def engine_layout(setup: setup_pb2.Setup, system: System) -> tuple[setup_pb2.Setup, tuple]:
    """The setup every step is solved from, and what it changed: on several chips a
    serving engine keeps one weight layout for every step, so the searched TP split (which
    may replicate weights to split a long prompt's tokens, step by step) becomes the
    engine's model-dims split."""
    inf = setup.workload.llm_inference
    if system.num_chips == 1 or inf.tensor_parallel_split == setup_pb2.MODEL_DIMS_SPLIT:
        return setup, ()
    out = setup_pb2.Setup()
    out.CopyFrom(setup)
    out.workload.llm_inference.tensor_parallel_split = setup_pb2.MODEL_DIMS_SPLIT
    note = (
        "every step uses tensor_parallel_split MODEL_DIMS_SPLIT: an engine keeps one weight "
        "layout for the whole stream (the searched split may re-shard weights per step)"
    )
    return out, (note,)


def _parallelism(plan: Plan) -> str:
    deg = {k.lower(): v for k, v in plan.parallelism.items()}
    return " ".join(f"{k.upper()}{v}" for k, v in sorted(deg.items()) if v > 1) or "1 chip"


def _check_no_dp(loaded: Loaded, system: System) -> None:
    """A stream runs on one engine whose steps each hold one chunked-prefill batch, which DP
    replicas cannot split: DP pinned by topology tags or execution.placement is bad input
    (left to the search, the layout is TP x PP)."""
    placement = parse_placement(loaded.setup.execution.placement)
    dp = (placement_degrees(placement) if placement else tagged_degrees(system)).get("DP", 1)
    if dp > 1:
        where = "execution.placement" if placement else "system topology parallelism"
        raise SetupError(
            f"{loaded.path}: {where}: DP {dp} with workload.llm_inference.stream: a request "
            "stream runs as one engine whose steps DP replicas cannot split; give those "
            "chips to TP or PP, or leave the parallelism to the search"
        )


def run_stream(
    loaded: Loaded, system: System, time_limit_s: float | None = None
) -> tuple[StreamView, Scenario, Plan]:
    """Solve the steps, simulate the stream; returns (StreamView, Scenario, Plan) where the
    scenario and plan are the steady-state decode step's."""
    inf = loaded.setup.workload.llm_inference
    _check_no_dp(loaded, system)
    settings = settings_of(inf)
    reqs = requests_of(inf, 1.0)  # POISSON: the pattern at 1 request/s (scaled when served)
    budget, frac = settings["max_num_tokens"], settings["kv_memory_fraction"]
    prompt = max(1, round(float(np.mean([r.input_len for r in reqs]))))
    memo: dict[StepShape, tuple] = {}
    sys_now = [system]
    base, notes = engine_layout(loaded.setup, system)

    def solve(shape: StepShape):  # noqa: ANN202
        if shape not in memo:
            one = pipeline.load_message(point_setup(base, shape), loaded.path)
            scenario = pipeline.assemble(one, sys_now[0])
            memo[shape] = (scenario, pipeline.plan(scenario, time_limit_s))
        return memo[shape]

    anchor = StepShape(0, 0, prefill_points(budget, prompt)[-1], prompt)
    first = solve(anchor)[1]
    pinned = pin_parallelism(system, first)
    sys_now[0] = pinned or system
    capacity, kv_per_token = kv_capacity(first, anchor, frac, reqs)
    smallest = min(r.input_len + r.output_len for r in reqs)
    most = max(1, min(settings["max_batch"], budget, capacity // smallest, len(reqs)))
    contexts = (
        min(r.input_len for r in reqs) + 1,
        max(r.input_len + r.output_len - 1 for r in reqs),
    )
    contexts = (contexts[0], max(contexts))
    table, solved = build_table(lambda s: solve(s)[1], most, budget, prompt, contexts, capacity)
    kernels = kernels_per_step(solve(StepShape(1, contexts[0], 0, prompt))[1])
    table = replace(table, overhead_s=kernels * host_launch_beyond_chip_s(settings, system))
    limits = EngineLimits(
        min(settings["max_batch"], budget), budget, settings["chunked_prefill"], capacity
    )
    server = None
    if settings["arrival"] == "POISSON":  # the rate given or searched under the limits
        server = stream_server.serve(
            reqs, limits, table, settings["rate_per_s"], *_limits_s(inf.stream)
        )
        stats = server.stats
    else:
        stats = simulate(reqs, limits, table)
    steady = StepShape(stats.max_concurrency, round(float(np.mean(contexts))), 0, prompt)
    steady = replace(steady, context=min(steady.context, capacity // steady.decode))
    scenario, plan = solve(steady)
    view = StreamView(
        settings=settings,
        kv_capacity_tokens=capacity,
        kv_bytes_per_token_per_chip=kv_per_token,
        parallelism=_parallelism(first),
        parallelism_fixed=pinned is not None,
        points_solved=solved,
        step_points=table.rows(),
        plan_step=f"one decode step of {steady.decode} sequences at KV length {steady.context}",
        stats=stats,
        kernels_per_step=kernels,
        step_overhead_s=table.overhead_s,
        server=server,
        notes=notes,
        setup=loaded.setup,
    )
    return view, scenario, plan


def kernels_per_step(plan: Plan) -> int:
    """Kernels one chip launches in a step: each phase's kernels times its instances
    (layers). One count serves every step: an engine runs prompt and decode tokens of a
    step in one forward pass."""
    return sum(ph.count * len(ph.kernels) for ph in plan.phases)


def kv_capacity(
    plan: Plan, anchor: StepShape, fraction: float, reqs: list[Request]
) -> tuple[int, float]:
    """(KV-cache tokens the engine holds, KV bytes per token per chip), from the anchor
    step's plan: `fraction` of each chip's DRAM left after weights and the largest step's
    activations, over the plan's own KV bytes per token (its sharding, its KV precision).
    InfeasibleError when the longest request does not fit."""
    assert plan.memory.kv_cache > 0, "an LLM step keeps a KV cache"
    kv_per_token = plan.memory.kv_cache / max(anchor.prompt_len, anchor.prefill)
    free = plan.memory.capacity - plan.memory.weights - plan.memory.activations
    capacity = int(max(0.0, free) * fraction / kv_per_token)
    largest = max(r.input_len + r.output_len for r in reqs)
    if capacity < largest:
        raise InfeasibleError(
            "KV cache",
            f"the KV cache holds {capacity} tokens per engine ({fraction:g} of the DRAM left "
            f"after weights and activations) but a request needs {largest}",
            "add chips, lower the lengths or raise kv_memory_fraction",
        )
    return capacity, kv_per_token


def _limits_s(s: setup_pb2.Stream) -> tuple[float | None, float | None]:
    """(p99 TTFT limit, p99 TPOT limit) in seconds; None = no limit."""
    return (s.max_ttft_p99_ms / 1e3 or None, s.max_tpot_p99_ms / 1e3 or None)
