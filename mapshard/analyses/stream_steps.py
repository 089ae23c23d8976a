"""Engine-step costs for the request-stream view, solved by the pipeline and interpolated.

A step of in-flight batching runs D decode tokens (mean KV length C) and P prompt tokens.
Its time is the product's own plan of that step, solved at a grid of points:
- P = 0: phase DECODE, batch D, context_len C;
- P > 0: phase CHUNKED_PREFILL (the mixed step the generator models) with decode_batch D
  at context_len C and a prompt part of P tokens of prompts of the stream's mean prompt
  length L: P <= L is the last P-token chunk of an L-token prompt (it attends to all L
  tokens, L - P of them from the KV cache); P > L is n = P / L whole prompts of L tokens
  (prefill_sequences n, P rounded to n L).
Grid: D in {0, 1, 2, 4, ...} up to the most sequences that can run, C at the shortest and
the longest KV length a decoding sequence can have (the longest clipped so the step's KV
fits the KV capacity), P in {0, budget, budget/2, budget/4, ...} down to 32 tokens.
Between points the time is linear in C at each (D, P) point, then bilinear in (D, P)
(clamped at the ends of the grid). Every point is solved once (the parallelism fixed).
The solved step time is a staircase in the token count (GEMM tiles and waves), which no
interpolation follows exactly: on Llama-3.1-8B / H100 (the gallery stream scenario), 40
random off-grid steps were within 2.8% on average, at most 26% (small prompt chunks of few
decode sequences, where one more tile row costs a third more).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from schema import setup_pb2
from solver.plan import Plan

INTERPOLATION = (
    "step time solved at a grid of (decode sequences D, their mean KV length C, prompt "
    "tokens P) and interpolated: linear in C, then bilinear in (D, P); a prompt-only step "
    "below the smallest solved P is priced at that P (its weight reads do not shrink)"
)
MIN_PREFILL_POINT = 32  # tokens: the smallest prompt part solved besides P = 0
PREFILL_STEP = 2  # each prompt-token point is the next one's half


@dataclass(frozen=True)
class StepShape:
    """One solved step: decode sequences, their KV length and the prompt part's shape."""

    decode: int
    context: int
    prefill: int  # prompt tokens
    prompt_len: int  # the prompts' length (the KV length the prompt part attends to)


def prefill_points(budget: int, prompt_len: int) -> list[int]:
    """P values: the budget, then each half of the last, down to MIN_PREFILL_POINT; above
    the prompt length each is a whole number of prompts (rounded down, at least one)."""
    points, p = set(), budget
    while True:
        points.add(p if p <= prompt_len else (p // prompt_len) * prompt_len)
        if p // PREFILL_STEP < MIN_PREFILL_POINT:
            break
        p //= PREFILL_STEP
    return [0, *sorted(points)]


def decode_points(most: int) -> list[int]:
    """D values: 0, 1, 2, 4, ... and `most` itself."""
    points, d = {0, most}, 1
    while d < most:
        points.add(d)
        d *= 2
    return sorted(points)


def point_setup(setup: setup_pb2.Setup, shape: StepShape) -> setup_pb2.Setup:
    """The setup of one engine step (the stream block removed)."""
    s = setup_pb2.Setup()
    s.CopyFrom(setup)
    inf = s.workload.llm_inference
    inf.ClearField("stream")
    inf.ClearField("serving")
    inf.prefill_tokens_per_pass = 0
    inf.request_overhead_us = 0.0  # a step, not a generate call
    if shape.prefill == 0:
        inf.phase, inf.batch = setup_pb2.DECODE, shape.decode
        inf.input_len = inf.context_len = shape.context
        return s
    inf.phase, inf.batch = setup_pb2.CHUNKED_PREFILL, 1
    inf.chunk_size = shape.prefill
    inf.decode_batch = shape.decode
    inf.context_len = shape.context if shape.decode else 0
    inf.input_len = shape.prompt_len
    inf.prefill_sequences = max(1, shape.prefill // shape.prompt_len)
    return s


@dataclass(frozen=True)
class StepTable:
    """Solved step times: times[(D, P)] = ((C_lo, t_lo), (C_hi, t_hi)); every non-empty
    step also pays `overhead_s`, the engine's host time per step (kernel launches), which
    the solved GPU times do not hold."""

    decode: tuple[int, ...]
    prefill: tuple[int, ...]
    times: dict[tuple[int, int], tuple[tuple[float, float], tuple[float, float]]]
    overhead_s: float = 0.0

    def __call__(self, d: int, c: float, p: int) -> float:
        """Interpolated step time plus the per-step overhead (seconds); zero for an empty
        step."""
        if d == 0 and p == 0:
            return 0.0
        if d == 0 and len(self.prefill) > 1:  # not toward the empty step's 0 s
            p = max(p, self.prefill[1])
        d0, d1, wd = _bracket(self.decode, d)
        p0, p1, wp = _bracket(self.prefill, p)
        at = self._at
        low = at(d0, p0, c) * (1 - wd) + at(d1, p0, c) * wd
        high = at(d0, p1, c) * (1 - wd) + at(d1, p1, c) * wd
        return low * (1 - wp) + high * wp + self.overhead_s

    def _at(self, d: int, p: int, c: float) -> float:
        (c0, t0), (c1, t1) = self.times[(d, p)]
        if c1 == c0:
            return t0
        return t0 + (t1 - t0) * (c - c0) / (c1 - c0)

    def rows(self) -> list[dict]:
        """The solved points, for summary.json."""
        return [
            {"decode": d, "prefill": p, "context": c, "step_s": t}
            for (d, p), pair in sorted(self.times.items())
            for c, t in pair
        ]


def _bracket(grid: tuple[int, ...], x: float) -> tuple[int, int, float]:
    """The grid points around x and x's weight on the upper one (clamped at the ends)."""
    if x <= grid[0]:
        return grid[0], grid[0], 0.0
    if x >= grid[-1]:
        return grid[-1], grid[-1], 0.0
    i = bisect_right(grid, x)
    lo, hi = grid[i - 1], grid[i]
    return lo, hi, (x - lo) / (hi - lo)


def build_table(
    solve: Callable[[StepShape], Plan],
    most: int,
    budget: int,
    prompt_len: int,
    context: tuple[int, int],
    kv_capacity_tokens: int,
) -> tuple[StepTable, int]:
    """Solve the grid (see the module docstring); returns the table and the points solved.
    `context`: the shortest and longest KV length of a decoding sequence."""
    ds, ps = decode_points(most), prefill_points(budget, prompt_len)
    times: dict = {}
    for d in ds:
        for p in ps:
            if d == 0 and p == 0:
                times[(d, p)] = ((0.0, 0.0), (0.0, 0.0))
                continue
            prompt = max(prompt_len, p) if p else 0
            room = max(1, (kv_capacity_tokens - prompt) // max(d, 1))
            c_lo = min(context[0], room)
            c_hi = max(c_lo, min(context[1], room)) if d else c_lo
            pair = []
            for c in (c_lo, c_hi) if c_hi != c_lo else (c_lo,):
                shape = StepShape(d, c if d else 0, p, prompt_len)
                pair.append((float(c), solve(shape).latency_s))
            times[(d, p)] = (pair[0], pair[-1])
    solved = sum(len({a, b}) for (d, p), (a, b) in times.items() if d or p)
    return StepTable(tuple(ds), tuple(ps), times), solved
