"""Checks of llm_inference.stream (the request-stream view) and of prefill_sequences: every
field in range, each problem one message naming the field and what is valid."""

from __future__ import annotations

import math

from schema import setup_pb2
from schema.problems import Problems

MAX_REQUESTS = 1_000_000  # the simulation is O(steps); more is a typo, not a workload
DEFAULT_MAX_BATCH = 256  # sequences (TensorRT-LLM's default max_batch_size)
DEFAULT_MAX_NUM_TOKENS = 8192  # tokens per step (TensorRT-LLM's default max_num_tokens)
DEFAULT_KV_FRACTION = 0.9  # TensorRT-LLM's free_gpu_memory_fraction, vLLM's 0.9
# Host microseconds per kernel of an engine step, serial with the GPU (setup.proto
# Stream.kernel_launch_us): the value with the least mean |error| over the FIT
# offline-throughput rows P-AZL08, P-AZS01, P-AZS03..10 (TensorRT-LLM on GB200, Llama-3.1-8B
# TP1 and Llama-3-70B TP4); their measured-minus-solved time per step is 9.2-11.7 us per
# kernel at both model sizes, flat in the step's GPU time (tests/unit/test_stream_overhead.py).
DEFAULT_KERNEL_LAUNCH_US = 10.4


def check_prefill_sequences(v: setup_pb2.LlmInference, wp: str, p: Problems) -> None:
    """prefill_sequences >= 0, and chunk_size a multiple of it (each prompt whole)."""
    n = v.prefill_sequences
    if n < 0:
        p.add(f"{wp}.prefill_sequences", "must be >= 0", n, "give 0 or 1 (one prompt) or more")
    elif n > 1 and v.chunk_size % n:
        p.add(
            f"{wp}.prefill_sequences",
            f"must divide chunk_size ({v.chunk_size})",
            n,
            "give a divisor of chunk_size (every prompt of the chunk the same length)",
        )


def check_stream(v: setup_pb2.LlmInference, wp: str, p: Problems) -> None:
    """The stream's counts, lengths, arrivals and limits (see setup.proto Stream)."""
    s, sp = v.stream, f"{wp}.stream"
    if v.HasField("serving"):
        p.add(sp, "cannot be combined with serving", "both", "give stream or serving, not both")
    if not 1 <= s.num_requests <= MAX_REQUESTS:
        p.add(
            f"{sp}.num_requests", f"must be in [1, {MAX_REQUESTS}]", s.num_requests, "give a count"
        )
    inputs = _lengths(s.input_len, s.HasField("input_len"), v.input_len, f"{sp}.input_len", p)
    _lengths(s.output_len, s.HasField("output_len"), v.output_len, f"{sp}.output_len", p)
    _arrival(s, sp, p)
    if s.seed < 0:
        p.add(f"{sp}.seed", "must be >= 0", s.seed, "give a non-negative integer")
    for name in ("max_batch", "max_num_tokens"):
        if getattr(s, name) < 0:
            p.add(f"{sp}.{name}", "must be >= 0 (0 = default)", getattr(s, name), "give a count")
    frac = s.kv_memory_fraction
    if not (math.isfinite(frac) and 0 <= frac <= 1):
        fix = f"give a fraction (0 = {DEFAULT_KV_FRACTION:g})"
        p.add(f"{sp}.kv_memory_fraction", "is outside [0, 1]", frac, fix)
    launch = s.kernel_launch_us
    if s.HasField("kernel_launch_us") and not (math.isfinite(launch) and launch >= 0):
        p.add(
            f"{sp}.kernel_launch_us",
            f"must be >= 0 (unset = {DEFAULT_KERNEL_LAUNCH_US:g})",
            launch,
            "give microseconds per kernel, 0 for none",
        )
    budget = s.max_num_tokens or DEFAULT_MAX_NUM_TOKENS
    if not s.chunked_prefill and inputs and max(inputs) > budget:
        p.add(
            f"{sp}.input_len",
            f"has prompts longer than max_num_tokens ({budget}) without chunked_prefill",
            max(inputs),
            "set chunked_prefill: true or raise max_num_tokens",
        )


def _lengths(
    mix: setup_pb2.LengthMix, given: bool, default: int, field: str, p: Problems
) -> list[int]:
    """The extreme lengths of a mix (for later checks), or [] after a problem."""
    if not given:
        if default < 1:
            p.add(field, "is unset and so is the llm_inference default", default, "give tokens")
            return []
        return [default]
    kinds = [k for k, on in (("tokens", mix.tokens), ("min/max", mix.min or mix.max),
                             ("values", len(mix.values))) if on]  # fmt: skip
    if len(kinds) != 1:
        got = " and ".join(kinds) or "nothing"
        p.add(field, "must give exactly one of tokens, min/max or values", got, "give one")
        return []
    if mix.tokens:
        if mix.tokens < 1:
            p.add(f"{field}.tokens", "must be >= 1", mix.tokens, "give tokens")
            return []
        return [mix.tokens]
    if mix.values:
        bad = [x for x in mix.values if x < 1]
        if bad:
            p.add(f"{field}.values", "must all be >= 1", bad[0], "give positive token counts")
            return []
        return [min(mix.values), max(mix.values)]
    if not 1 <= mix.min <= mix.max:
        got = f"min {mix.min}, max {mix.max}"
        p.add(field, "must have 1 <= min <= max", got, "give a token range")
        return []
    return [mix.min, mix.max]


def _arrival(s: setup_pb2.Stream, sp: str, p: Problems) -> None:
    """POISSON needs a rate or latency limits to search one; OFFLINE reads neither."""
    limits = [n for n in ("max_ttft_p99_ms", "max_tpot_p99_ms") if getattr(s, n) != 0]
    for name in limits:
        value = getattr(s, name)
        if not (math.isfinite(value) and value > 0):
            p.add(f"{sp}.{name}", "must be >= 0 (0 = no limit)", value, "give milliseconds")
    rate = s.rate_per_s
    if s.arrival == setup_pb2.POISSON:
        if not (math.isfinite(rate) and rate >= 0 and (rate > 0 or limits)):
            why = "must be > 0 for arrival POISSON without max_ttft_p99_ms / max_tpot_p99_ms"
            p.add(f"{sp}.rate_per_s", why, rate, "give requests/s, or limits to search it")
        return
    if rate != 0:
        p.add(f"{sp}.rate_per_s", "is only read with arrival POISSON", rate, "leave it 0")
    for name in limits:
        p.add(f"{sp}.{name}", "is only read with arrival POISSON", getattr(s, name), "leave it 0")
