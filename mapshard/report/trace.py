"""trace.json: the predicted timeline in Chrome trace-event format (open in ui.perfetto.dev).

One process per pipeline stage; in each, one thread per resource: the schedule (micro-batches
or steps), the configurations, compute, DRAM, and one per network group a collective runs
over. Training draws the 1F1B schedule; inference draws the steps of a request. Kernel detail
is drawn for one graph instance per phase and stage (the others are identical), and at most
MAX_DRAWN micro-batches or steps are drawn one by one (every one, for any real run); the
steps of a request beyond that are one slice covering them, and micro-batches beyond it an
instant event carrying their busy time, so the timeline has no hole and the busy time in
the file always adds up to the plan's totals.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mapshard.fmt import finite
from mapshard.report.totals import parallel_degrees
from solver.plan import ConfigPlan, PhasePlan, Plan

MAX_DRAWN = 1024  # micro-batches (training) or steps (inference) drawn one by one per stage
MAX_DETAIL_STAGES = 16  # stages that get per-configuration and per-kernel detail
TID_SCHEDULE, TID_CONFIG, TID_COMPUTE, TID_DRAM, TID_NETWORK0 = 0, 1, 2, 3, 4
_OVER = re.compile(r"\bover\s+([A-Za-z0-9_+\-]+)")


def network_group(collective: str) -> str:
    """The group a kernel's collective runs over ("tp" in "all_reduce 12 MB over tp")."""
    m = _OVER.search(collective or "")
    return m.group(1).lower() if m else ""


def is_forward(phase: PhasePlan, config: ConfigPlan) -> bool:
    """A configuration belongs to the forward pass when all its kernels do."""
    passes = {k.name: k.pass_.upper() for k in phase.kernels}
    return all(passes.get(name, "FWD") == "FWD" for name in config.kernels)


# id(phase) -> (phase, its forward configurations' latency): a trace asks for it per slice
# (hundreds of thousands on a long pipeline); trace_dict empties it per plan
_FORWARD_S: dict[int, tuple[PhasePlan, float]] = {}


def part_latency(phase: PhasePlan, part: str) -> float:
    """One instance's time of the forward part ("F"), the rest ("B") or all of it."""
    if part == "all":
        return phase.latency_s
    known = _FORWARD_S.get(id(phase))
    if known is None or known[0] is not phase:
        fwd = sum(c.latency_s for c in phase.configs if is_forward(phase, c))
        known = _FORWARD_S[id(phase)] = (phase, fwd)
    return known[1] if part == "F" else phase.latency_s - known[1]


def _configs_of(phase: PhasePlan, part: str) -> list[ConfigPlan]:
    configs = sorted(phase.configs, key=lambda c: c.index)
    if part == "all":
        return configs
    return [c for c in configs if is_forward(phase, c) == (part == "F")]


@dataclass(frozen=True)
class Segment:
    phase: PhasePlan
    part: str  # "F", "B" or "all"
    instances: float

    @property
    def duration_s(self) -> float:
        return part_latency(self.phase, self.part) * self.instances


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 6)


class _Trace:
    """Collects events; keeps one cursor per (pid, tid) so slices on a track never overlap."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.events: list[dict[str, Any]] = []
        self.cursor: dict[tuple[int, int], float] = {}
        groups = {network_group(k.collective) for k in plan.kernels() if k.network_s}
        if plan.dp_allreduce_s > 0:
            groups.add("dp")
        self.net_tid = {g: TID_NETWORK0 + i for i, g in enumerate(sorted(groups))}

    def slice(
        self,
        pid: int,
        tid: int,
        name: str,
        cat: str,
        start_s: float,
        dur_s: float,
        args: dict[str, Any] | None = None,
    ) -> float:
        """Add a complete event no earlier than the track is free; returns its end."""
        start = max(start_s, self.cursor.get((pid, tid), 0.0))
        if _us(start + dur_s) - _us(start) <= 0:  # below the file's resolution (1 ps)
            return start_s
        event = {
            "name": name,
            "cat": cat,
            "ph": "X",
            "pid": pid,
            "tid": tid,
            "ts": _us(start),
            "dur": round(_us(start + dur_s) - _us(start), 6),  # ends line up after rounding
        }
        if args:
            event["args"] = args
        self.events.append(event)
        self.cursor[(pid, tid)] = start + dur_s
        return start + dur_s

    def instant(self, pid: int, name: str, at_s: float, args: dict[str, Any]) -> None:
        self.events.append(
            {
                "name": name,
                "cat": "note",
                "ph": "i",
                "s": "t",
                "pid": pid,
                "tid": TID_SCHEDULE,
                "ts": _us(at_s),
                "args": args,
            }
        )

    def unit(
        self,
        pid: int,
        name: str,
        start_s: float,
        segments: list[Segment],
        detail: bool,
        args: dict[str, Any],
    ) -> float:
        """One micro-batch pass or step on one stage, with kernel detail when asked."""
        dur = sum(s.duration_s for s in segments)
        busy = _busy(segments)
        end = self.slice(
            pid, TID_SCHEDULE, name, "schedule", start_s, dur, {**args, "busy_us": busy}
        )
        if detail:
            t = end - dur
            for seg in segments:
                t = self._detail(pid, seg, t)
        return end

    def _detail(self, pid: int, seg: Segment, start_s: float) -> float:
        """Configurations and kernels of one instance, then the other instances as one slice."""
        t = start_s
        if seg.instances < 1:
            name = f"{seg.phase.name} x{seg.instances:g}"
            args = {"phase": seg.phase.name, "instances": seg.instances}
            return self.slice(pid, TID_CONFIG, name, "config", t, seg.duration_s, args)
        kernels = {k.name: k for k in seg.phase.kernels}
        for c in _configs_of(seg.phase, seg.part):
            args = {"phase": seg.phase.name, "bound": c.bound, "kernels": len(c.kernels)}
            self.slice(
                pid,
                TID_CONFIG,
                f"{seg.phase.name} config {c.index}",
                "config",
                t,
                c.latency_s,
                args,
            )
            for name in c.kernels:
                k = kernels.get(name)
                if k is None:
                    continue
                kargs = {
                    "phase": k.phase,
                    "config": k.config,
                    "bound": k.bound,
                    "sharding": k.sharding,
                    "tile": k.tile,
                }
                self.slice(pid, TID_COMPUTE, k.name, "kernel", t, k.compute_s, kargs)
                self.slice(pid, TID_DRAM, k.name, "kernel", t, k.memory_s, kargs)
                tid = self.net_tid.get(network_group(k.collective), TID_NETWORK0)
                self.slice(
                    pid, tid, k.name, "kernel", t, k.network_s, kargs | {"collective": k.collective}
                )
            t += c.latency_s
        rest = seg.instances - 1
        if rest > 0:
            name = f"{seg.phase.name} x{rest:g} more instances"
            dur = part_latency(seg.phase, seg.part) * rest
            args = {"phase": seg.phase.name, "instances": rest}
            t = self.slice(pid, TID_CONFIG, name, "config", t, dur, args)
        return t

    def metadata(self, stages: int) -> list[dict[str, Any]]:
        placement = {k.lower(): v for k, v in self.plan.placement.items()}
        threads = {
            TID_SCHEDULE: "schedule",
            TID_CONFIG: "configurations",
            TID_COMPUTE: "compute",
            TID_DRAM: "DRAM",
        }
        for group, tid in self.net_tid.items():
            where = f" ({placement[group]})" if group in placement else ""
            threads[tid] = f"network {group}".strip() + where
        used = {(e["pid"], e["tid"]) for e in self.events}
        meta: list[dict[str, Any]] = []
        for pid in range(stages):
            meta.append(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": f"stage {pid}"},
                }
            )
            meta.append(
                {
                    "name": "process_sort_index",
                    "ph": "M",
                    "pid": pid,
                    "tid": 0,
                    "args": {"sort_index": pid},
                }
            )
            for tid, name in sorted(threads.items()):
                if tid == TID_SCHEDULE or (pid, tid) in used:
                    meta.append(
                        {
                            "name": "thread_name",
                            "ph": "M",
                            "pid": pid,
                            "tid": tid,
                            "args": {"name": name},
                        }
                    )
                    meta.append(
                        {
                            "name": "thread_sort_index",
                            "ph": "M",
                            "pid": pid,
                            "tid": tid,
                            "args": {"sort_index": tid},
                        }
                    )
        return meta


def _busy(segments: list[Segment], times: float = 1.0) -> dict[str, float]:
    """Busy microseconds per phase of `times` repetitions of the segments."""
    busy: dict[str, float] = {}
    for s in segments:
        busy[s.phase.name] = busy.get(s.phase.name, 0.0) + s.duration_s * times
    return {p: _us(v) for p, v in busy.items()}


def _instances_on(phase: PhasePlan, stage: int, stages: int) -> float:
    """Layer graphs are split evenly over the stages; head graphs run on the last stage,
    the embedding (role "embed") on the first."""
    if phase.role == "head":
        return float(phase.count) if stage == stages - 1 else 0.0
    if phase.role == "embed":
        return float(phase.count) if stage == 0 else 0.0
    return phase.count / stages


def _segments(
    phases: list[PhasePlan], stage: int, stages: int, part: str, scale: float = 1.0
) -> list[Segment]:
    """What one stage runs of each phase for one micro-batch pass or step."""
    segs = [Segment(p, part, _instances_on(p, stage, stages) * scale) for p in phases]
    return [s for s in segs if s.instances > 0 and part_latency(s.phase, s.part) > 0]


def one_f_one_b(
    stages: int, micro: int, fwd: list[float], bwd: list[float]
) -> dict[tuple[str, int, int], tuple[float, float]]:
    """Start and end of every forward/backward pass in the non-interleaved 1F1B schedule:
    stage s runs min(S-s-1, M) forwards, then alternates one forward and one backward."""
    order: list[list[tuple[str, int]]] = []
    for s in range(stages):
        warm = min(stages - s - 1, micro)
        ops = [("F", m) for m in range(warm)]
        for i in range(micro - warm):
            ops += [("F", warm + i), ("B", i)]
        ops += [("B", m) for m in range(micro - warm, micro)]
        order.append(ops)
    done: dict[tuple[str, int, int], tuple[float, float]] = {}
    nxt, free = [0] * stages, [0.0] * stages
    progress = True
    while progress:
        progress = False
        for s in range(stages):
            while nxt[s] < len(order[s]):
                kind, m = order[s][nxt[s]]
                dep = (kind, s - 1 if kind == "F" else s + 1, m)
                if 0 <= dep[1] < stages and dep not in done:
                    break
                ready = done[dep][1] if 0 <= dep[1] < stages else 0.0
                start = max(free[s], ready)
                end = start + (fwd[s] if kind == "F" else bwd[s])
                done[(kind, s, m)] = (start, end)
                free[s] = end
                nxt[s] += 1
                progress = True
    assert all(nxt[s] == len(order[s]) for s in range(stages)), "1F1B schedule deadlocked"
    return done


def _training(tr: _Trace, plan: Plan, stages: int, detail: set[int]) -> float:
    micro = max(1, plan.micro_batches)
    phases = list(plan.phases)
    segs = {
        (s, part): _segments(phases, s, stages, part) for s in range(stages) for part in ("F", "B")
    }
    fwd = [sum(x.duration_s for x in segs[(s, "F")]) for s in range(stages)]
    bwd = [sum(x.duration_s for x in segs[(s, "B")]) for s in range(stages)]
    times = one_f_one_b(stages, micro, fwd, bwd)
    ends = [0.0] * stages
    for (kind, s, m), (start, end) in sorted(times.items(), key=lambda x: (x[0][1], x[1][0])):
        ends[s] = max(ends[s], end)
        if m < MAX_DRAWN:
            tr.unit(
                s,
                f"{kind} mb{m}",
                start,
                segs[(s, kind)],
                m == 0 and s in detail,
                {"micro_batch": m, "pass": kind},
            )
    for s in range(stages):
        if micro > MAX_DRAWN:
            first = min(times[(k, s, MAX_DRAWN)][0] for k in ("F", "B"))
            rest = micro - MAX_DRAWN
            busy = _busy(segs[(s, "F")] + segs[(s, "B")], rest)
            tr.instant(
                s,
                f"{rest} more micro-batches (not drawn)",
                first,
                {"busy_us": busy},
            )
        t = tr.slice(
            s,
            tr.net_tid.get("dp", 0),
            "DP gradient all-reduce",
            "step",
            ends[s],
            plan.dp_allreduce_s,
        )
        tr.slice(s, TID_SCHEDULE, "optimizer", "step", t, plan.optimizer_s)
    return max(ends) + plan.dp_allreduce_s + plan.optimizer_s


def _inference(tr: _Trace, plan: Plan, stages: int, detail: set[int]) -> float:
    """Phases with the same step count run interleaved, step by step, stage after stage."""
    groups: list[list[PhasePlan]] = []
    for p in plan.phases:
        if groups and groups[-1][0].steps == p.steps:
            groups[-1].append(p)
        else:
            groups.append([p])
    scale = float(max(1, plan.micro_batches))
    t = 0.0
    for group in groups:
        segs = [_segments(group, s, stages, "all", scale) for s in range(stages)]
        label = "+".join(p.name for p in group)
        steps = group[0].steps
        for step in range(min(steps, MAX_DRAWN)):
            for s in range(stages):
                name = label if steps == 1 else f"{label} step {step}"
                t = tr.unit(s, name, t, segs[s], step == 0 and s in detail, {"step": step})
        rest = steps - MAX_DRAWN
        if rest > 0:  # one slice per stage spanning the rest (steps alternate over stages)
            per_step = [sum(x.duration_s for x in seg) for seg in segs]
            total = sum(per_step)
            for s in range(stages):
                args = {"steps": rest, "busy_us": _busy(segs[s], rest)}
                name = f"{label} steps {MAX_DRAWN}-{steps - 1} ({rest} steps, one slice)"
                begin = t + sum(per_step[:s])
                span = (rest - 1) * total + per_step[s]
                tr.slice(s, TID_SCHEDULE, name, "schedule", begin, span, args)
            t += rest * sum(per_step)
    return t


def _drawn_note(plan: Plan) -> str:
    """ "draws 96 of 96 micro-batches" / "draws 1024 of 4096 decode steps one by one"."""
    if plan.workload_kind == "training":
        micro = max(1, plan.micro_batches)
        return f"draws {min(micro, MAX_DRAWN)} of {micro} micro-batches one by one"
    steps = max((p.steps for p in plan.phases), default=1)
    return f"draws {min(steps, MAX_DRAWN)} of {steps} steps one by one"


def trace_dict(plan: Plan) -> dict[str, Any]:
    """The trace as a JSON-ready dict (events sorted: metadata, then by process/thread/time)."""
    _FORWARD_S.clear()
    stages = max(1, parallel_degrees(plan)["pp"])
    detail = set(range(min(stages, MAX_DETAIL_STAGES))) | {stages - 1}
    tr = _Trace(plan)
    if plan.workload_kind == "training":
        makespan = _training(tr, plan, stages, detail)
        kind = "1F1B pipeline schedule over micro-batches"
    else:
        makespan = _inference(tr, plan, stages, detail)
        kind = "steps of one request, stage after stage"
    events = sorted(tr.events, key=lambda e: (e["pid"], e["tid"], e["ts"], e["name"]))
    notes = [
        f"timeline: {kind}; kernel detail for one graph instance per phase and stage",
        f"{_drawn_note(plan)}; the timeline covers the whole step",
        "a head phase is drawn on the last stage",
    ]
    return {
        "traceEvents": tr.metadata(stages) + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "scenario": plan.scenario,
            "plan_latency_s": finite(plan.latency_s),
            "timeline_end_s": finite(makespan),
            "notes": notes,
        },
    }


def trace_json(plan: Plan) -> str:
    return (
        json.dumps(trace_dict(plan), sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    )
