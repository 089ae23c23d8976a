"""Matching measured kernels to a plan's kernels, and fitting efficiency from the matches.

Matching is by class and order (documented mapping, `profile_io.NAME_PATTERNS`): the plan
is unrolled into the launch order a framework runs it in (inference: for each step, the
layer graphs x layers, then the head; training: per micro-batch the forward kernels of
every layer, the head, then the recompute/backward/weight-gradient kernels of every
layer), split into one queue per class (gemm, attention, norm, softmax, elementwise,
embedding, collective), and the i-th measured kernel of a class is the i-th entry of that
class's queue. So the n-th GEMM of a layer in the profile is the n-th GEMM of the plan's
layer. A plan kernel with a collective also sits in the collective queue (NCCL kernels).
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mapshard.fidelity.fit import OVERHEADS_US
from mapshard.fidelity.profile_io import PLAN_CLASSES, MeasuredKernel, kernel_class
from solver.plan import KernelPlan, Plan


@dataclass(frozen=True)
class Row:
    """One plan kernel (or its collective) against the measured launches matched to it."""

    phase: str
    kernel: str
    part: str  # "compute" or "collective"
    cls: str
    matched: int
    measured_s: float  # mean per launch
    predicted_s: float  # per launch
    measured_bytes: float | None  # mean per launch (None: no counters)
    predicted_bytes: float
    tensor_pct: float | None
    plan_kernel: KernelPlan

    @property
    def time_ratio(self) -> float:
        return self.measured_s / self.predicted_s if self.predicted_s > 0 else float("inf")

    @property
    def bytes_ratio(self) -> float | None:
        if self.measured_bytes is None or self.predicted_bytes <= 0:
            return None
        return self.measured_bytes / self.predicted_bytes


@dataclass(frozen=True)
class Comparison:
    rows: tuple[Row, ...]
    unmatched: dict[str, tuple[int, float]]  # measured class -> (launches, seconds)


def predicted_compute_s(k: KernelPlan) -> float:
    """A kernel launch's own time: compute (with launch overhead) or DRAM, whichever binds;
    its collective is a separate NCCL launch."""
    return max(k.compute_s, k.memory_s)


def _phase_group(name: str) -> str:
    return name[: -len("_head")] if name.endswith("_head") else name


def launch_order(plan: Plan) -> Iterator[tuple[str, KernelPlan]]:
    """The plan's kernels in the order a framework launches them, (phase, kernel)."""
    layers = [p for p in plan.phases if p.role == "layer"]
    heads = [p for p in plan.phases if p.role != "layer"]
    if plan.workload_kind == "training":
        pp = max(plan.parallelism.get("pp", 1), 1)
        for _ in range(max(plan.micro_batches, 1)):
            for ph in layers:
                for _ in range(max(ph.count // pp, 1)):
                    yield from ((ph.name, k) for k in ph.kernels if k.pass_ == "FWD")
            for ph in heads:
                yield from ((ph.name, k) for k in ph.kernels)
            for ph in layers:
                for _ in range(max(ph.count // pp, 1)):
                    yield from ((ph.name, k) for k in ph.kernels if k.pass_ != "FWD")
        return
    groups: dict[str, list] = defaultdict(list)
    for ph in plan.phases:
        groups[_phase_group(ph.name)].append(ph)
    for phases in groups.values():
        steps = max(ph.steps for ph in phases)
        for _ in range(steps):
            for ph in sorted(phases, key=lambda p: p.role != "layer"):
                for _ in range(max(ph.count, 1)):
                    yield from ((ph.name, k) for k in ph.kernels)


def _queues(plan: Plan, need: dict[str, int]) -> dict[str, list[tuple[str, KernelPlan, str]]]:
    """Per class, the expected launches (phase, kernel, part), long enough for `need`."""
    queues: dict[str, list[tuple[str, KernelPlan, str]]] = defaultdict(list)
    limit = 10 * max(sum(need.values()), 1) + 10_000
    for phase, k in itertools.islice(launch_order(plan), limit):
        cls = PLAN_CLASSES.get(k.kind, "other")
        if len(queues[cls]) < need.get(cls, 0):
            queues[cls].append((phase, k, "compute"))
        if k.network_s > 0 and len(queues["collective"]) < need.get("collective", 0):
            queues["collective"].append((phase, k, "collective"))
        if all(len(queues[c]) >= n for c, n in need.items()):
            break
    return queues


def compare(plan: Plan, measured: Sequence[MeasuredKernel]) -> Comparison:
    """Match every measured launch to a plan kernel and aggregate per plan kernel."""
    by_class: dict[str, list[MeasuredKernel]] = defaultdict(list)
    for m in measured:
        by_class[kernel_class(m.name)].append(m)
    need = {c: len(ms) for c, ms in by_class.items()}
    queues = _queues(plan, need)
    acc: dict[tuple[str, str, str], list] = {}
    unmatched: dict[str, tuple[int, float]] = {}
    for cls, ms in by_class.items():
        queue = queues.get(cls, [])
        for m, slot in itertools.zip_longest(ms, queue[: len(ms)]):
            if slot is None:
                n, t = unmatched.get(cls, (0, 0.0))
                unmatched[cls] = (n + 1, t + m.time_s)
                continue
            phase, k, part = slot
            acc.setdefault((phase, k.name, part), [k, cls, []])[2].append(m)
    rows = []
    for (phase, name, part), (k, cls, ms) in acc.items():
        nbytes = [m.dram_bytes for m in ms]
        tensor = [m.tensor_pct for m in ms if m.tensor_pct is not None]
        rows.append(
            Row(
                phase,
                name,
                part,
                cls,
                len(ms),
                statistics.fmean(m.time_s for m in ms),
                k.network_s if part == "collective" else predicted_compute_s(k),
                None if any(b is None for b in nbytes) else statistics.fmean(nbytes),
                0.0 if part == "collective" else k.dram_bytes,
                statistics.fmean(tensor) if tensor else None,
                k,
            )
        )
    rows.sort(key=lambda r: -r.measured_s * r.matched)
    return Comparison(tuple(rows), unmatched)


# ---------------------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    gemm_util: float | None
    kernel_overhead_us: float | None
    gemm_launches: int
    gemm_mean_abs_err: float | None
    dram_util: float | None
    dram_launches: int


def calibrate(
    rows: Sequence[Row], gemm_util: float, overhead_s: float, dram_Bps: float
) -> Calibration:
    """Fit gemm_util and kernel_overhead_us to the compute-bound GEMM launches (least mean
    |relative error|, every launch weighted once), and dram_util to the memory-bound
    launches: median achieved bandwidth (measured bytes, else the plan's) / DRAM peak."""
    utils = [u / 200 for u in range(2, 201)]  # 0.01 .. 1.0

    gemms = [
        r
        for r in rows
        if r.part == "compute"
        and r.cls == "gemm"
        and r.plan_kernel.compute_s >= r.plan_kernel.memory_s
        and r.measured_s > 0
    ]
    u_fit = o_fit = err = None
    if gemms:
        # compute_s = overhead + F / (peak x gemm_util x shape terms): the util-free part
        raw = [
            ((r.plan_kernel.compute_s - overhead_s) * gemm_util, r.measured_s, r.matched)
            for r in gemms
        ]
        total = sum(n for _, _, n in raw)
        best = None
        for u in utils:
            for o in OVERHEADS_US:
                e = sum(n * abs((o * 1e-6 + x / u) / t - 1) for x, t, n in raw) / total
                if best is None or e < best[0] - 1e-12:
                    best = (e, u, o)
        assert best is not None
        err, u_fit, o_fit = best
    mems = [
        r
        for r in rows
        if r.part == "compute"
        and r.plan_kernel.memory_s > r.plan_kernel.compute_s
        and r.measured_s > 0
    ]
    dram = None
    launches = 0
    if mems and dram_Bps > 0:
        rates = []
        for r in mems:
            b = r.measured_bytes if r.measured_bytes is not None else r.predicted_bytes
            rates.extend([b / r.measured_s / dram_Bps] * r.matched)
        launches = len(rates)
        dram = round(min(max(statistics.median(rates), 1e-3), 1.0), 3)
    return Calibration(u_fit, o_fit, sum(r.matched for r in gemms), err, dram, launches)
