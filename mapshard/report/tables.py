"""kernels.csv and configs.csv: one row per kernel / configuration, full precision.

Rows keep the plan's order (phase, configuration, kernel order in the phase), which is the
execution order, so a diff between two runs lines up.
"""

from __future__ import annotations

import csv
import io

from mapshard.fmt import num
from mapshard.report.totals import (
    busy_total_s,
    config_step_s,
    config_total_s,
    phase_instances,
    phase_step_s,
    row_time_s,
)
from solver.plan import KernelPlan, PhasePlan, Plan

KERNEL_COLUMNS = (
    "phase",
    "name",
    "kind",
    "class",
    "pass",
    "dims",
    "flop",
    "weight_bytes",
    "activation_bytes",
    "kv_bytes",
    "sharding",
    "tile",
    "config",
    "overhead_s",
    "compute_s",
    "memory_s",
    "network_s",
    "time_s",
    "dram_bytes",
    "network_bytes",
    "sram_bytes",
    "bound",
    "collective",
    "energy_J",
    "count",
    "steps",
    "instances",
    "time_source",
)

CONFIG_COLUMNS = (
    "phase",
    "config",
    "num_kernels",
    "kernels",
    "overhead_s",
    "compute_s",
    "memory_s",
    "network_s",
    "latency_s",
    "sram_bytes",
    "bound",
    "instances",
    "total_s",
    "share_of_busy",
    "per_step_s",
    "share_of_step",
)


def dims_text(dims: tuple[tuple[str, int], ...]) -> str:
    """Loop dims as `m=4096 k=8192 n=1024` (loop order kept)."""
    return " ".join(f"{d}={s}" for d, s in dims)


def ordered_kernels(phase: PhasePlan) -> list[KernelPlan]:
    """The phase's kernels by configuration, keeping their order inside each."""
    index = {id(k): i for i, k in enumerate(phase.kernels)}
    return sorted(phase.kernels, key=lambda k: (k.config, index[id(k)]))


def _csv(header: tuple[str, ...], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def kernels_csv(plan: Plan) -> str:
    """Per kernel: each resource's time alone (`overhead_s` the launch time and the part of
    a launch-rate floor above the work, `compute_s` the work without them), `time_s` the
    kernel's latency under the plan's overlap rule and `bound` the resource that adds most
    to it (solver.plan.latency_split)."""
    rows = []
    for phase in plan.phases:
        instances = phase_instances(plan, phase)
        for k in ordered_kernels(phase):
            rows.append(
                [
                    k.phase or phase.name,
                    k.name,
                    k.kind,
                    k.kernel_class,
                    k.pass_,
                    dims_text(k.dims),
                    num(k.flop),
                    num(k.weight_bytes),
                    num(k.activation_bytes),
                    num(k.kv_bytes),
                    k.sharding,
                    k.tile,
                    num(k.config),
                    num(k.overhead_s + k.floor_s),
                    num(k.compute_s - k.overhead_s - k.floor_s),
                    num(k.memory_s),
                    num(k.network_s),
                    num(row_time_s(plan, k)),
                    num(k.dram_bytes),
                    num(k.network_bytes),
                    num(k.sram_bytes),
                    k.bound,
                    k.collective,
                    num(k.energy_J),
                    num(phase.count),
                    num(phase.steps),
                    num(instances),
                    k.time_source,
                ]
            )
    return _csv(KERNEL_COLUMNS, rows)


def configs_csv(plan: Plan) -> str:
    """Per configuration: one instance's times; `total_s` its busy time per step summed over
    the chips that run it (pipeline stages included); `per_step_s` its share of the step's
    wall time, which with the step's own terms (summary.json time_breakdown) adds up to the
    step."""
    busy = busy_total_s(plan)
    per_phase = phase_step_s(plan)
    rows = []
    for phase in plan.phases:
        for c in sorted(phase.configs, key=lambda c: c.index):
            total = config_total_s(plan, phase, c)
            per_step = config_step_s(plan, phase, c, per_phase[phase.name])
            rows.append(
                [
                    phase.name,
                    num(c.index),
                    num(len(c.kernels)),
                    ";".join(c.kernels),
                    num(c.overhead_s + c.floor_s),
                    num(max(c.compute_s - c.overhead_s - c.floor_s, 0.0)),
                    num(c.memory_s),
                    num(c.network_s),
                    num(c.latency_s),
                    num(c.sram_bytes),
                    c.bound,
                    num(phase_instances(plan, phase)),
                    num(total),
                    num(total / busy if busy > 0 else None),
                    num(per_step),
                    num(per_step / plan.latency_s if plan.latency_s > 0 else None),
                ]
            )
    return _csv(CONFIG_COLUMNS, rows)
