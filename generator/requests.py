"""Defaults of the generator requests' fields that more than one reader applies: written
once here, so the generators and the views that re-read a request (serving, fidelity)
cannot drift apart."""

from __future__ import annotations

from schema import setup_pb2

BatchedRequest = setup_pb2.LlmInference | setup_pb2.Gemm | setup_pb2.Fft


def request_batch(req: BatchedRequest) -> int:
    """The request's batch: unset or 0 means 1 (setup.proto: `batch ... (0 = 1)`). A
    negative batch is an input error that the generators refuse before reading it."""
    return max(1, req.batch)
