"""A pinned parallel layout (setup.proto Execution.placement, which plan.txt writes): the
outer search keeps only the choices that place every group on the same chips of the same
levels, so a pinned plan solves one layout instead of searching them all."""

from __future__ import annotations

from generator.graph import Workload
from schema.errors import SetupError
from schema.pins import parse_placement, placement_degrees, placement_key, placement_text
from solver.search.parallel import Choice
from solver.search.stages import splits_batch


def choice_placement(choice: Choice) -> dict[str, tuple[tuple[str, int], ...]]:
    """A choice's placement in schema.pins' words: group -> ((level name, chips), ...)."""
    return {
        name.upper(): tuple((lv.name, p) for lv, p in span) for name, span in choice.spans if span
    }


def pinned_choices(
    choices: list[Choice], placement: str, workload: Workload | None = None
) -> list[Choice]:
    """The choices that are the pinned `placement` ("" = every choice); SetupError when
    none is (the placement names levels or degrees this search does not offer, or a pinned
    training micro-batch that the placement's data ranks cannot take: `workload`)."""
    if not placement:
        return choices
    wanted = parse_placement(placement)
    assert wanted is not None, "schema.validation_pins checks the syntax"
    key = placement_key(wanted)
    kept = [c for c in choices if placement_key(choice_placement(c)) == key]
    if not kept and workload is not None:
        _check_micro_batch(workload, placement_degrees(wanted), placement)
    if not kept:
        offered = sorted({placement_text(choice_placement(c)) for c in choices})
        shown = "; ".join(offered[:6]) + (f"; ... ({len(offered)})" if len(offered) > 6 else "")
        raise SetupError(
            f"execution.placement {placement!r} is not a layout this workload can take on "
            f"this system; valid: {shown or 'none'} (or leave it empty to search)"
        )
    return kept


def _check_micro_batch(workload: Workload, degrees: dict[str, int], placement: str) -> None:
    """A pinned micro-batch the placement's data ranks (DP x EP: EP ranks are carved from
    the data-parallel ones) cannot take whole is named, not the placement."""
    if workload.kind != "training" or "micro_batch" in workload.searched:
        return
    ranks = degrees.get("DP", 1) * degrees.get("EP", 1)
    batch, micro = workload.global_batch, max(workload.micro_batch, 1)
    if splits_batch(workload, ranks):
        return
    per_rank = batch // ranks if batch % ranks == 0 else 0
    valid = [d for d in range(1, per_rank + 1) if per_rank % d == 0]
    raise SetupError(
        f"workload.llm_training.micro_batch {micro}: the placement {placement!r} has {ranks} "
        f"data ranks (DP x EP), which share the global_batch of {batch} sequences "
        + (
            f"{per_rank} each; valid micro_batch: {', '.join(map(str, valid))}"
            if valid
            else "unevenly; give a global_batch that they divide"
        )
    )
