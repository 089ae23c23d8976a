"""trace.json: Chrome trace-event schema, bounded size, and busy time adding up to the plan."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from report_fixtures import inference_plan, training_plan

from mapshard.report.summary import phase_total_s
from mapshard.report.trace import (
    MAX_DRAWN,
    TID_CONFIG,
    TID_SCHEDULE,
    one_f_one_b,
    trace_dict,
    trace_json,
)


def _check_schema(trace: dict) -> None:
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    named = set()
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M", "i"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index")  # fmt: skip
            if e["name"] == "thread_name":
                named.add((e["pid"], e["tid"]))
            continue
        assert isinstance(e["name"], str) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] > 0
    used = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] != "M"}
    assert used <= named, used - named


def _no_overlap(trace: dict) -> None:
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-6


def _busy_by_phase(trace: dict) -> dict[str, float]:
    busy: dict[str, float] = defaultdict(float)
    for e in trace["traceEvents"]:
        if e["ph"] != "M" and e["tid"] == TID_SCHEDULE and "busy_us" in e.get("args", {}):
            for phase, us in e["args"]["busy_us"].items():
                busy[phase] += us
    return busy


@pytest.mark.parametrize(
    "plan",
    [training_plan(), training_plan(micro_batches=20, pp=4), training_plan(pp=1),
     inference_plan(), inference_plan(decode_steps=3, pp=1)],
    ids=["train-pp2-mb4", "train-pp4-mb20", "train-pp1", "infer-pp2", "infer-pp1"],
)  # fmt: skip
def test_trace_schema_and_phase_totals(plan):
    trace = json.loads(trace_json(plan))
    _check_schema(trace)
    _no_overlap(trace)
    busy = _busy_by_phase(trace)
    for p in plan.phases:
        assert busy[p.name] == pytest.approx(phase_total_s(plan, p) * 1e6, rel=1e-6), p.name
    # Each drawn schedule slice is exactly the busy time it carries.
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["tid"] == TID_SCHEDULE and "busy_us" in e.get("args", {}):
            assert sum(e["args"]["busy_us"].values()) == pytest.approx(e["dur"], rel=1e-6)


def test_trace_detail_of_one_instance_adds_up_per_stage():
    plan = inference_plan(pp=2)
    trace = trace_dict(plan)
    for p in plan.phases:
        stage = 1 if p.role == "head" else 0  # head graphs run on the last stage
        per_stage = p.latency_s * (p.count if p.role == "head" else p.count / 2)
        dur = sum(e["dur"] for e in trace["traceEvents"]
                  if e["ph"] == "X" and e["pid"] == stage and e["tid"] == TID_CONFIG
                  and e["args"]["phase"] == p.name)  # fmt: skip
        assert dur == pytest.approx(per_stage * 1e6, rel=1e-6), p.name


def test_trace_is_bounded_and_notes_what_is_left_out():
    plan = training_plan(micro_batches=50, pp=2)
    trace = trace_dict(plan)
    schedule = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == TID_SCHEDULE]
    drawn = {e["args"]["micro_batch"] for e in schedule if "micro_batch" in e.get("args", {})}
    assert drawn == set(range(MAX_DRAWN))
    notes = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert len(notes) == 2 and all("42 more micro-batches" in e["name"] for e in notes)
    assert len(trace["traceEvents"]) < 400
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"schedule", "configurations", "compute", "DRAM"} <= names
    assert any(n.startswith("network tp") for n in names)


def test_one_f_one_b_matches_the_textbook_makespan():
    # Equal stages: (M + S - 1) * (F + B).
    times = one_f_one_b(4, 6, [1.0] * 4, [2.0] * 4)
    assert max(end for _, end in times.values()) == pytest.approx((6 + 4 - 1) * 3.0)
    # Stage 0 of 4 runs 3 warm-up forwards before its first backward.
    order = sorted((start, kind, m) for (kind, s, m), (start, _) in times.items() if s == 0)
    assert [k for _, k, _ in order[:5]] == ["F", "F", "F", "F", "B"]
    assert len(times) == 2 * 4 * 6
