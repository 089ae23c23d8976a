"""Checks that need both the resolved system and the generated workload: parallel degrees
pinned by topology tags must fit the model (a TP wider than the attention heads would
silently replicate every kernel), and tags go on every level or none."""

from __future__ import annotations

from pathlib import Path

from generator.graph import Workload
from hardware.system import System
from schema.errors import SetupError


def tagged_degrees(system: System) -> dict[str, int]:
    """Degree of each parallelism over the levels that carry its tag and a fixed degree."""
    degrees: dict[str, int] = {}
    for level in system.network:
        if level.degree > 0:
            for tag in level.parallelism:
                degrees[tag] = degrees.get(tag, 1) * level.degree
    return degrees


def check_degrees(path: Path, system: System, workload: Workload) -> None:
    """Raise SetupError listing every pinned degree the workload cannot use."""
    where = f"{path}: system topology parallelism"
    problems = []
    tagged = [lv.name for lv in system.network if lv.parallelism]
    untagged = [lv.name for lv in system.network if not lv.parallelism and lv.degree != 1]
    if tagged and untagged:
        problems.append(
            f"{where}: levels {', '.join(tagged)} carry a parallelism tag but "
            f"{', '.join(untagged)} do not; tag every level or none (none = searched)"
        )
    degrees = tagged_degrees(system)
    pp_levels = [lv.name for lv in system.network if "PP" in lv.parallelism and lv.degree > 1]
    if pp_levels and workload.kind not in ("training", "inference"):
        problems.append(
            f"{where}: level(s) {', '.join(pp_levels)} carry PP, but this {workload.kind} "
            "workload has no layers to pipeline (a dataflow_graph without execution.llm runs "
            "as one graph), so those chips would idle; tag them TP or DP, or describe the "
            "layers with execution.llm { num_layer ... }"
        )
    model = workload.model
    if model is not None and workload.kind in ("training", "inference"):
        limits = (
            ("TP", model.num_heads, "attention heads"),
            ("PP", model.num_layers, "layers"),
            ("EP", model.num_experts, "experts"),
        )
        for tag, limit, what in limits:
            degree = degrees.get(tag, 1)
            if degree > 1 and degree > limit:
                if limit:
                    wrong = (
                        f"{tag} {degree} exceeds the model's {limit} {what}; give {tag} <= {limit}"
                    )
                else:
                    wrong = f"{tag} {degree} on a model without {what}; leave {tag} out"
                problems.append(f"{where}: {wrong}")
    cp = workload.context_parallel
    if degrees and degrees.get("CP", 1) != cp:
        problems.append(
            f"{where}: the levels tagged CP multiply to {degrees.get('CP', 1)} but the workload's "
            f"context_parallel is {cp}; give workload.llm_training.context_parallel: "
            f"{degrees.get('CP', 1)} or tag CP levels multiplying to {cp}"
        )
    elif cp > 1 and system.num_chips % cp:
        problems.append(
            f"{where}: context_parallel {cp} does not divide the system's {system.num_chips} chips"
        )
    ep = workload.expert_parallel
    if workload.kind == "training" and degrees and degrees.get("EP", 1) != ep:
        problems.append(
            f"{where}: the levels tagged EP multiply to {degrees.get('EP', 1)} but the workload's "
            f"expert_parallel is {ep}; give workload.llm_training.expert_parallel: "
            f"{degrees.get('EP', 1)} or tag EP levels multiplying to {ep}"
        )
    elif ep > 1 and system.num_chips % (ep * cp):
        problems.append(
            f"{where}: expert_parallel {ep} x context_parallel {cp} does not divide the "
            f"system's {system.num_chips} chips"
        )
    if problems:
        raise SetupError(problems)
