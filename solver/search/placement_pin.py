"""A pinned parallel layout (setup.proto Execution.placement, which plan.txt writes): the
outer search keeps only the choices that place every group on the same chips of the same
levels, so a pinned plan solves one layout instead of searching them all."""

from __future__ import annotations

from schema.errors import SetupError
from schema.pins import parse_placement, placement_key, placement_text
from solver.search.parallel import Choice


def choice_placement(choice: Choice) -> dict[str, tuple[tuple[str, int], ...]]:
    """A choice's placement in schema.pins' words: group -> ((level name, chips), ...)."""
    return {
        name.upper(): tuple((lv.name, p) for lv, p in span) for name, span in choice.spans if span
    }


def pinned_choices(choices: list[Choice], placement: str) -> list[Choice]:
    """The choices that are the pinned `placement` ("" = every choice); SetupError when
    none is (the placement names levels or degrees this search does not offer)."""
    if not placement:
        return choices
    wanted = parse_placement(placement)
    assert wanted is not None, "schema.validation_pins checks the syntax"
    key = placement_key(wanted)
    kept = [c for c in choices if placement_key(choice_placement(c)) == key]
    if not kept:
        offered = sorted({placement_text(choice_placement(c)) for c in choices})
        shown = "; ".join(offered[:6]) + (f"; ... ({len(offered)})" if len(offered) > 6 else "")
        raise SetupError(
            f"execution.placement {placement!r} is not a layout this workload can take on "
            f"this system; valid: {shown or 'none'} (or leave it empty to search)"
        )
    return kept
