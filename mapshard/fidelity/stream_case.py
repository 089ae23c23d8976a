"""Offline-throughput rows (kind inference_offline_throughput: trtllm-bench / MLPerf Offline
style, in-flight batching over a request set) predicted by the request-stream view
(mapshard/analyses/stream.py) on the row's scenario with its parallel degrees fixed.

The row gives the request set (extra_params `requests`, input_len / output_len columns:
every request the same lengths, all arriving at t = 0) and the engine's limits
(extra_params `max_batch`, `max_num_tokens`, `kv_memory_fraction`, `chunked_prefill`).
The metric is output tokens per second over the whole set (trtllm-bench's "Token
Throughput"), or requests per second.
"""

from __future__ import annotations

from pathlib import Path

from mapshard import pipeline
from mapshard.analyses.stream import run_stream
from mapshard.fidelity.cases import Case
from mapshard.fidelity.scenarios import Unmodelable, build_setup
from schema import setup_pb2

ENGINE_KEYS = ("requests", "max_batch", "max_num_tokens", "kv_memory_fraction")


def stream_setup(case: Case) -> tuple[setup_pb2.Setup, list]:
    """The row's setup with its stream block; Unmodelable when the row lacks the request
    count, the lengths or the engine limits."""
    missing = [k for k in ENGINE_KEYS if not case.extra_float(k)]
    if missing or case.int("input_len") < 1 or case.int("output_len") < 1:
        what = ", ".join(missing) or "input_len/output_len"
        raise Unmodelable(f"offline-throughput row without {what} (engine limits unknown)")
    setup, levels = build_setup(case)
    inf = setup.workload.llm_inference
    s = inf.stream
    s.num_requests = case.int_extra("requests")
    s.input_len.tokens = case.int("input_len")
    s.output_len.tokens = case.int("output_len")
    s.arrival = setup_pb2.OFFLINE
    s.max_batch = case.int_extra("max_batch")
    s.max_num_tokens = case.int_extra("max_num_tokens")
    s.kv_memory_fraction = case.extra_float("kv_memory_fraction")
    s.chunked_prefill = case.extra.get("chunked_prefill", "0") in ("1", "true")
    inf.prefill_tokens_per_pass = 0  # the stream's max_num_tokens is the step budget
    inf.request_overhead_us = 0.0
    return setup, levels


def predict_offline(case: Case, where: Path) -> tuple[float, str]:
    """(metric value, detail) of an offline-throughput row."""
    if case.metric not in ("tokens_per_s", "requests_per_s"):
        raise Unmodelable(f"offline-throughput metric {case.metric!r} is not modelled")
    setup, _ = stream_setup(case)
    loaded = pipeline.load_message(setup, where)
    system = pipeline.resolve(loaded)
    view, _, _ = run_stream(loaded, system)
    st = view.stats
    value = st.output_tokens_per_s if case.metric == "tokens_per_s" else st.requests_per_s
    detail = (
        f"stream of {st.num_requests} requests: {st.duration_s:.4g}s, {st.steps} steps, "
        f"at most {st.max_concurrency} sequences, KV {view.kv_capacity_tokens} tokens"
    )
    return value, detail
