"""Checks that need both the resolved system and the generated workload: parallel degrees
pinned by topology tags, by execution.placement or by the workload's own fields must fit the
model (a TP that does not divide the attention heads would silently split tokens instead,
an EP the experts, a CP the sequence), tags go on every level or none, and a pinned
placement names the system's levels with their degrees."""

from __future__ import annotations

import math
from pathlib import Path

from generator.degrees import tp_fits
from generator.graph import Workload
from hardware.system import System
from schema.errors import SetupError
from schema.pins import Placement, parse_placement, placement_degrees

PLACEMENT = "execution.placement"


def tagged_degrees(system: System) -> dict[str, int]:
    """Degree of each parallelism over the levels that carry its tag and a fixed degree."""
    degrees: dict[str, int] = {}
    for level in system.network:
        if level.degree > 0:
            for tag in level.parallelism:
                degrees[tag] = degrees.get(tag, 1) * level.degree
    return degrees


def check_degrees(path: Path, system: System, workload: Workload, placement: str = "") -> None:
    """Raise SetupError listing every pinned degree the workload cannot use; `placement`:
    execution.placement (schema.pins syntax, already checked)."""
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
    pinned = parse_placement(placement) if placement else None
    if pinned is not None:
        problems += placement_problems(path, system, pinned)
        degrees = placement_degrees(pinned)
        where = f"{path}: {PLACEMENT}"
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
        problems += _model_problems(where, workload, degrees, system.num_chips)
    problems += _workload_problems(path, where, system, workload, degrees, pinned is not None)
    if problems:
        raise SetupError(problems)


def _model_problems(
    where: str, workload: Workload, degrees: dict[str, int], chips: int
) -> list[str]:
    """PP at most the layers; TP dividing the heads and the KV heads it splits (or split by
    them: replicated KV heads); EP dividing the experts."""
    model = workload.model
    assert model is not None
    problems = []
    for tag, limit, what in (
        ("TP", model.num_heads, "attention heads"),
        ("PP", model.num_layers, "layers"),
        ("EP", model.num_experts, "experts"),
    ):
        degree = degrees.get(tag, 1)
        if degree > 1 and degree > limit:
            if limit:
                wrong = f"{tag} {degree} exceeds the model's {limit} {what}; give {tag} <= {limit}"
            else:
                wrong = f"{tag} {degree} on a model without {what}; leave {tag} out"
            problems.append(f"{where}: {wrong}")
    tp = degrees.get("TP", 1)
    if 1 < tp <= model.num_heads and not tp_fits(model, tp):
        valid = ", ".join(str(d) for d in _divisors(chips) if tp_fits(model, d))
        problems.append(
            f"{where}: TP {tp} does not divide the model's {model.num_heads} attention heads "
            f"and {model.num_kv_heads or model.num_heads} KV heads evenly (it would split "
            f"tokens instead); valid TP degrees on {chips} chips: {valid}"
        )
    pp, vp = degrees.get("PP", 1), workload.virtual_pipeline
    if workload.kind == "training" and "virtual_pipeline" not in workload.searched and vp > 1:
        per = -(-model.num_layers // pp)  # the layers of the largest stage
        if pp > 1 and per % vp:
            valid = ", ".join(str(d) for d in range(1, per + 1) if per % d == 0)
            problems.append(
                f"{where}: workload.llm_training.virtual_pipeline {vp} does not divide the "
                f"{per} layers of a pipeline stage (PP {pp} over {model.num_layers} layers); "
                f"valid: {valid}"
            )
    ep = degrees.get("EP", 1)
    if 1 < ep <= model.num_experts and model.num_experts % ep:
        valid = _valid(model.num_experts, chips)
        problems.append(
            f"{where}: EP {ep} does not divide the model's {model.num_experts} experts; "
            f"valid EP degrees on {chips} chips: {valid}"
        )
    return problems


def _workload_problems(
    path: Path,
    where: str,
    system: System,
    workload: Workload,
    degrees: dict[str, int],
    placed: bool,
) -> list[str]:
    """The workload's own context_parallel and expert_parallel: equal to the degrees the
    levels pin, dividing the chips, CP dividing the sequence, EP the experts."""
    problems = []
    cp, ep = workload.context_parallel, workload.expert_parallel
    if any(_serves_tags(v, degrees) for v in workload.variants):
        ep = degrees.get("EP", 1)  # EP searched (solver.search.degrees): a variant has it
    train = "workload.llm_training"
    pins, tags = ("the levels tagged", "tag") if not placed else ("the placement's", "place")
    if degrees and degrees.get("CP", 1) != cp:
        problems.append(
            f"{where}: {pins} CP multiply to {degrees.get('CP', 1)} but the workload's "
            f"context_parallel is {cp}; give {train}.context_parallel: "
            f"{degrees.get('CP', 1)} or {tags} CP levels multiplying to {cp}"
        )
    elif cp > 1 and system.num_chips % cp:
        problems.append(
            f"{where}: context_parallel {cp} does not divide the system's {system.num_chips} chips"
        )
    elif cp > 1 and workload.seq_len % cp:
        valid = _valid(workload.seq_len, system.num_chips)
        problems.append(
            f"{path}: {train}.context_parallel {cp} does not divide the sequence of "
            f"{workload.seq_len} tokens; valid CP degrees on {system.num_chips} chips: {valid}"
        )
    model = workload.model
    if workload.kind == "training" and degrees and degrees.get("EP", 1) != ep:
        problems.append(
            f"{where}: {pins} EP multiply to {degrees.get('EP', 1)} but the workload's "
            f"expert_parallel is {ep}; give {train}.expert_parallel: "
            f"{degrees.get('EP', 1)} or {tags} EP levels multiplying to {ep}"
        )
    elif ep > 1 and system.num_chips % (ep * cp):
        problems.append(
            f"{where}: expert_parallel {ep} x context_parallel {cp} does not divide the "
            f"system's {system.num_chips} chips"
        )
    elif ep > 1 and model is not None and model.num_experts % ep:
        valid = _valid(model.num_experts, system.num_chips)
        problems.append(
            f"{path}: {train}.expert_parallel {ep} does not divide the model's "
            f"{model.num_experts} experts; valid EP degrees on {system.num_chips} chips: {valid}"
        )
    return problems


def _serves_tags(variant: Workload, degrees: dict[str, int]) -> bool:
    """Whether an expert-layout variant runs on the degrees the tags pin: its EP TP-groups
    equal to the EP tags', and, folded over TP (expert_tensor_parallel 1), those groups x
    the tagged TP equal to the EP degree the setup gave (solver.search.degrees
    .fits_expert_layout on the tagged layout)."""
    if variant.expert_parallel != degrees.get("EP", 1):
        return False
    if not degrees or variant.expert_tensor_parallel != 1:
        return True
    given = variant.expert_parallel_group
    return given <= 0 or given == variant.expert_parallel * degrees.get("TP", 1)


def placement_problems(path: Path, system: System, placement: Placement) -> list[str]:
    """A pinned placement names each level of the system by a unique name, takes each
    level's whole degree (a searched degree takes what the placement gives it) and every
    chip."""
    where = f"{path}: {PLACEMENT}"
    names = [lv.name for lv in system.network]
    if len(set(names)) != len(names):
        return [
            f"{where}: the topology levels' names ({', '.join(names)}) repeat, so a placement "
            "cannot name them; give each system.topology level a unique name"
        ]
    on: dict[str, int] = {}
    for span in placement.values():
        for level, chips in span:
            on[level] = on.get(level, 1) * chips
    problems = []
    unknown = sorted(set(on) - set(names))
    if unknown:
        levels = ", ".join(f"{lv.name} ({lv.degree or 'searched'})" for lv in system.network)
        return [
            f"{where}: {', '.join(unknown)} is not a topology level of this system; valid "
            f"levels (chips): {levels or 'none (one chip)'}"
        ]
    for lv in system.network:
        got = on.get(lv.name, 1)
        if lv.degree > 0 and got != lv.degree:
            problems.append(
                f"{where}: level {lv.name} has {lv.degree} chips but the placement uses "
                f"{got} of them; give groups on {lv.name} whose chips multiply to {lv.degree}"
            )
    total = math.prod(on.values())
    if not problems and total != system.num_chips:
        problems.append(
            f"{where}: the groups span {total} chips but the system has {system.num_chips}; "
            "give a placement whose chips multiply to system.num_chip"
        )
    return problems


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _valid(size: int, chips: int) -> str:
    """The degrees that divide both `size` and the chip count, as words."""
    return ", ".join(str(d) for d in _divisors(math.gcd(size, chips)))
