"""In-flight (continuous) batching of a request stream, simulated step by step.

The engine model (TensorRT-LLM's in-flight batching with its default GUARANTEED_NO_EVICT
capacity policy; vLLM and Sarathi schedule the same way):
- Admission, first come first served: a waiting request joins the running set when fewer
  than `max_batch` sequences run and the KV cache can hold its whole request (input_len +
  output_len tokens are reserved at admission, released when it finishes). The head of the
  queue is never skipped.
- Each engine step runs one decode token of every running sequence whose prompt is done,
  plus prompt tokens of admitted sequences (in admission order) within the step's token
  budget `max_num_tokens` less the decode tokens. Without chunked prefill a prompt enters a
  step whole or waits; with it, a prompt takes what is left of the budget (a chunk).
- The step that completes a prompt yields the request's first token (TTFT = end of that
  step - arrival); each later step yields one more. A request finishes with its
  output_len-th token. TPOT = (finish - first token) / (output_len - 1).
- A step takes `step_cost(decode sequences, mean decode context, prefill tokens)` seconds.
  When nothing runs the engine idles until the next arrival.
Everything is deterministic: the requests (lengths, arrival times) are inputs.
"""

from __future__ import annotations

import functools
import importlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

# (decode sequences, mean KV length they attend to, prefill tokens) -> step seconds
StepCost = Callable[[int, float, int], float]
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Request:
    arrival_s: float
    input_len: int
    output_len: int


@dataclass(frozen=True)
class EngineLimits:
    max_batch: int  # sequences in flight
    max_num_tokens: int  # tokens per step (decode + prefill)
    chunked_prefill: bool
    kv_capacity_tokens: int  # KV-cache tokens the free DRAM holds (whole requests reserved)


@dataclass(frozen=True)
class StreamStats:
    """What a simulated stream did; times in seconds, percentiles at PERCENTILES."""

    num_requests: int
    output_tokens: int
    duration_s: float  # first arrival to last finish
    steps: int
    max_concurrency: int  # most sequences admitted at once
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    latency_s: tuple[float, ...]  # end to end, arrival to last token

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def requests_per_s(self) -> float:
        return self.num_requests / self.duration_s if self.duration_s > 0 else 0.0


class _Seq:
    """A running sequence: prompt tokens done, tokens generated."""

    __slots__ = ("req", "index", "prefilled", "generated", "first_s")

    def __init__(self, req: Request, index: int):
        self.req, self.index = req, index
        self.prefilled = 0
        self.generated = 0
        self.first_s = 0.0


def simulate(requests: Sequence[Request], limits: EngineLimits, step_cost: StepCost) -> StreamStats:
    """Run the stream to its last token (see the module docstring for the rules)."""
    assert requests and limits.max_batch >= 1 and limits.max_num_tokens >= 1
    order = sorted(range(len(requests)), key=lambda i: (requests[i].arrival_s, i))
    pending = deque(order)  # not yet arrived
    waiting: deque[int] = deque()  # arrived, not admitted
    running: list[_Seq] = []
    kv_used = steps = most = 0
    first = [0.0] * len(requests)
    finish = [0.0] * len(requests)
    t = requests[order[0]].arrival_s
    while pending or waiting or running:
        while pending and requests[pending[0]].arrival_s <= t:
            waiting.append(pending.popleft())
        while waiting and len(running) < limits.max_batch:
            req = requests[waiting[0]]
            need = req.input_len + req.output_len
            if kv_used + need > limits.kv_capacity_tokens:
                break
            kv_used += need
            running.append(_Seq(req, waiting.popleft()))
        most = max(most, len(running))
        if not running:  # idle until the next arrival
            t = max(t, requests[pending[0]].arrival_s)
            continue
        decode = [s for s in running if s.prefilled == s.req.input_len]
        budget = limits.max_num_tokens - len(decode)
        chunks: list[tuple[_Seq, int]] = []
        for s in running:
            left = s.req.input_len - s.prefilled
            if left == 0 or budget <= 0:
                continue
            take = min(left, budget) if limits.chunked_prefill else left
            if take > budget:
                break  # first come first served: a whole prompt waits for a step with room
            chunks.append((s, take))
            budget -= take
        context = sum(s.req.input_len + s.generated for s in decode) / len(decode) if decode else 0
        prefill = sum(take for _, take in chunks)
        assert decode or prefill, "a step with no tokens (prompt longer than the budget)"
        t += step_cost(len(decode), context, prefill)
        steps += 1
        for s, take in chunks:
            s.prefilled += take
            if s.prefilled == s.req.input_len:
                s.generated, s.first_s = 1, t
                first[s.index] = t
        for s in decode:
            s.generated += 1
        done = [
            s for s in running if s.prefilled == s.req.input_len and s.generated >= s.req.output_len
        ]
        for s in done:
            finish[s.index] = t
            kv_used -= s.req.input_len + s.req.output_len
        if done:
            running = [
                s
                for s in running
                if s.generated < s.req.output_len or s.prefilled < s.req.input_len
            ]
    return _stats(requests, first, finish, steps, most)


def _stats(
    requests: Sequence[Request], first: list[float], finish: list[float], steps: int, most: int
) -> StreamStats:
    arrivals = [r.arrival_s for r in requests]
    ttft = [f - a for f, a in zip(first, arrivals)]
    tpot = [
        (end - f) / (r.output_len - 1)
        for r, f, end in zip(requests, first, finish)
        if r.output_len > 1
    ]
    latency = [end - a for end, a in zip(finish, arrivals)]
    return StreamStats(
        num_requests=len(requests),
        output_tokens=sum(r.output_len for r in requests),
        duration_s=max(finish) - min(arrivals),
        steps=steps,
        max_concurrency=most,
        ttft_s=percentiles(ttft),
        tpot_s=percentiles(tpot) if tpot else (),
        latency_s=percentiles(latency),
    )


def percentiles(values: Sequence[float]) -> tuple[float, ...]:
    """p50/p90/p99 with linear interpolation between order statistics (numpy's default)."""
    np = _numpy()
    return tuple(float(np.percentile(np.asarray(values, dtype=float), q)) for q in PERCENTILES)


@functools.cache
def _numpy() -> ModuleType:
    """numpy, imported when a stream's percentiles are first taken, not with this module:
    the views and the reports read PERCENTILES from here on every run, streams or not."""
    return importlib.import_module("numpy")
