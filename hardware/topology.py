"""Topology levels of a setup: explicit levels, a preset's levels or the chip's default
(scale-up domain, then scale-out), checked and converted to NetworkLevels. DFModel's
topologies arrive as explicit levels (schema.dfmodel); messages name the user's fields
through the seam's origin map."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from hardware.checks import Problems, fraction, non_negative, positive
from hardware.system import PARALLELISMS, CollectiveEfficiency, NetworkLevel, Topology
from schema import setup_pb2
from schema.dfmodel import NormalisedSetup

_KIND = {
    setup_pb2.RING: Topology.RING,
    setup_pb2.SWITCH: Topology.SWITCH,
    setup_pb2.FULLY_CONNECTED: Topology.FULLY_CONNECTED,
    setup_pb2.TORUS: Topology.TORUS,
}


@dataclass
class _Level:
    """A topology level before conversion, with the field paths its values came from."""

    name: str
    kind: Topology | None
    degree: int
    link_bw_GBps: float
    latency_us: float
    parallelism: list[str]
    torus_dims: tuple[int, ...]
    path: str  # e.g. "system.topology[1]", or the DFModel field the user wrote (origins)
    degree_field: str  # e.g. "system.topology[1].degree"
    bw_field: str
    par_field: str
    from_preset: bool = False
    efficiency: CollectiveEfficiency = field(default_factory=CollectiveEfficiency)


MAX_LEVELS = 4  # scale-up, scale-out, and two more: no system has more levels


def resolve_num_chip(
    sysmsg: setup_pb2.System,
    preset: setup_pb2.SystemPreset | None,
    problems: Problems,
    native: NormalisedSetup | None = None,
) -> int:
    """system.num_chip, else the preset's, else the product of fully given degrees, else 1.
    `native`: the DFModel seam's result (a variant's degree 0 is searched, not 1)."""
    if sysmsg.num_chip < 0:
        problems.add(f"system.num_chip must be > 0, got {sysmsg.num_chip}")
        return 1
    if sysmsg.num_chip > 0:
        return sysmsg.num_chip
    if preset is not None and preset.num_chip > 0:
        return preset.num_chip
    degrees = [lv.degree or math.prod(lv.torus_dims) for lv in sysmsg.topology]
    if native is not None and native.chip_count_degrees is not None:
        degrees = list(native.chip_count_degrees)
    if degrees and all(d > 0 for d in degrees):
        return math.prod(degrees)
    if degrees:
        problems.add(
            "system.num_chip must be > 0, got 0 (the topology leaves degrees to search, so the "
            "chip count must be given)"
        )
    return 1


def resolve_levels(
    sysmsg: setup_pb2.System,
    preset: setup_pb2.SystemPreset | None,
    spec: setup_pb2.ChipSpec,
    num_chip: int,
    problems: Problems,
    spec_problems: Problems,
    native: NormalisedSetup | None = None,
) -> tuple[NetworkLevel, ...]:
    """The topology levels (innermost first): the setup's, else the preset's, else the
    chip's default. `spec_problems` collects problems that only matter if the chip is known.
    `native`: what the DFModel seam made of the setup (origins of the fields, whether the
    levels replace a preset's, conflicts it found)."""
    native = native or NormalisedSetup(setup_pb2.Setup())
    for conflict in native.conflicts:
        problems.add(conflict)
    if sysmsg.topology:
        given = list(sysmsg.topology)
        replaces = native.topology_replaces_preset
        base = list(preset.topology) if preset is not None and not replaces else []
        merged = [_merge_level(base, given, i) for i in range(max(len(base), len(given)))]
        levels = [
            _from_level(lv, f"system.topology[{i}]", i, native.origin)
            for i, lv in enumerate(merged)
        ]
        for i, lv in enumerate(levels):  # a preset's degree 0 still scales with num_chip
            lv.from_preset = i < len(base) and (i >= len(given) or given[i].degree == 0)
        path = native.origin("system.topology")
    elif preset is not None and preset.topology:
        ppath = f'system.preset "{preset.name}" topology'
        levels = [_from_level(lv, f"{ppath}[{i}]", i) for i, lv in enumerate(preset.topology)]
        for lv in levels:
            lv.from_preset = True
        path = ppath
    else:
        levels = _default_levels(spec, num_chip, spec_problems)
        path = ""
    if path:
        for lv in levels:
            _check_level(lv, problems)
        _check_degrees(levels, num_chip, path, problems)
        _inherit_links(levels, spec)
        for lv in levels:
            if lv.link_bw_GBps == 0 and lv.degree == 1:
                continue  # one chip along this level: nothing crosses it
            if lv.link_bw_GBps == 0:  # neither given nor in the chip (unknown chip: noise)
                spec_problems.add(
                    f"{lv.bw_field} is missing; give the link bandwidth in GB/s per chip, one "
                    "direction (or a library chip whose bandwidth it takes)"
                )
            else:
                positive(lv.link_bw_GBps, lv.bw_field, problems, unit=" (GB/s per chip)")
        _check_parallelism(levels, problems)
    for entry in spec.accelerator.efficiency.collective:
        if 0 <= entry.level < len(levels):
            levels[entry.level].efficiency = _collective(entry, problems)
        elif not 0 <= entry.level < MAX_LEVELS:
            # a chip's entries may name a level this (smaller) system lacks; an index no
            # system has is a typo
            problems.add(
                f"system.accelerator.efficiency.collective[level={entry.level}] names no "
                f"topology level; give 0 (innermost) .. {MAX_LEVELS - 1}"
            )
    return tuple(
        NetworkLevel(
            name=lv.name,
            kind=lv.kind or Topology.SWITCH,
            degree=lv.degree,
            link_bandwidth_Bps=lv.link_bw_GBps * 1e9,
            latency_s=lv.latency_us * 1e-6,
            parallelism=tuple(lv.parallelism),
            torus_dims=lv.torus_dims,
            efficiency=lv.efficiency,
        )
        for lv in levels
    )


def _merge_level(
    base: list[setup_pb2.TopologyLevel], given: list[setup_pb2.TopologyLevel], i: int
) -> setup_pb2.TopologyLevel:
    """Level i of the preset with the setup's level i on top (set fields override; a given
    parallelism or torus_dims list replaces the preset's)."""
    level = setup_pb2.TopologyLevel()
    if i < len(base):
        level.CopyFrom(base[i])
    if i < len(given):
        if given[i].parallelism:
            level.ClearField("parallelism")
        if given[i].torus_dims:
            level.ClearField("torus_dims")
        level.MergeFrom(given[i])
    return level


def _from_level(
    lv: setup_pb2.TopologyLevel,
    path: str,
    index: int,
    origin: Callable[[str], str] = lambda p: p,
) -> _Level:
    """`origin` maps a field path to the one the user wrote (a DFModel variant's)."""
    return _Level(
        name=lv.name or f"level{index}",
        kind=_KIND.get(lv.kind),
        degree=lv.degree,
        link_bw_GBps=lv.link_bw_GBps,
        latency_us=lv.latency_us,
        parallelism=[p for p in lv.parallelism],
        torus_dims=tuple(lv.torus_dims),
        path=origin(path),
        degree_field=origin(f"{path}.degree"),
        bw_field=origin(f"{path}.link_bw_GBps"),
        par_field=origin(f"{path}.parallelism"),
    )


def _check_level(lv: _Level, problems: Problems) -> None:
    if lv.kind is None:
        problems.add(f"{lv.path}.kind is missing; give RING, SWITCH, FULLY_CONNECTED or TORUS")
    if lv.degree < 0:
        problems.add(f"{lv.degree_field} must be >= 0 (0 = searched), got {lv.degree}")
    non_negative(lv.latency_us, f"{lv.path}.latency_us", problems)
    if lv.kind is Topology.TORUS:
        if not lv.torus_dims or any(d <= 0 for d in lv.torus_dims):
            problems.add(
                f"{lv.path}.torus_dims must list the torus sides (each > 0), got "
                f"{list(lv.torus_dims)}"
            )
        elif lv.degree == 0:
            lv.degree = math.prod(lv.torus_dims)
        elif lv.degree != math.prod(lv.torus_dims):
            problems.add(
                f"{lv.degree_field} is {lv.degree} but torus_dims {list(lv.torus_dims)} "
                f"hold {math.prod(lv.torus_dims)} chips; drop degree or make them agree"
            )
    elif lv.torus_dims:
        problems.add(f"{lv.path}.torus_dims is only valid for kind TORUS")


def _inherit_links(levels: list[_Level], spec: setup_pb2.ChipSpec) -> None:
    """A level given without link bandwidth (or latency) takes the chip's: scale-up while
    the chips inside the level fit the chip's scale-up domain, scale-out beyond it (the
    innermost level is scale-up when degrees are searched or the domain is unknown)."""
    inside = 1
    for i, lv in enumerate(levels):
        inside = inside * lv.degree if inside and lv.degree > 0 else 0
        if inside and spec.scale_up_domain > 0:
            scale_up = inside <= spec.scale_up_domain
        else:
            scale_up = i == 0
        bw = spec.scale_up_bw_GBps if scale_up else spec.scale_out_bw_GBps
        latency = spec.scale_up_latency_us if scale_up else spec.scale_out_latency_us
        if lv.link_bw_GBps == 0 and bw > 0:
            lv.link_bw_GBps = bw
        if lv.latency_us == 0:
            lv.latency_us = latency


def _check_parallelism(levels: list[_Level], problems: Problems) -> None:
    """Each name is one of TP PP DP EP CP (any case), once per level. A name on several
    `system.topology` levels spans them (a DP group of 32 = 8 in a node x 4 nodes: its
    degree is their product, inner level first, as every level then carries a tag:
    mapshard.compat); DFModel's par_x/par_y/par_z keep one level per parallelism."""
    seen: dict[str, tuple[str, bool]] = {}
    for lv in levels:
        names = []
        repeated = lv.par_field.endswith(".parallelism")
        for j, raw in enumerate(lv.parallelism):
            where = f"{lv.par_field}[{j}]" if repeated else lv.par_field
            p = raw.strip().upper()
            if p not in PARALLELISMS:
                problems.add(
                    f'{where} "{raw}" is not a parallelism; valid: {", ".join(PARALLELISMS)}'
                )
                continue
            first = seen.get(p)
            if first is not None and (p in names or not (repeated and first[1])):
                problems.add(
                    f"{where} assigns {p} a second time (already on {first[0]}); "
                    "a parallelism goes on one level"
                )
            else:
                seen.setdefault(p, (where, repeated))
                names.append(p)
        lv.parallelism = names


def _check_degrees(levels: list[_Level], num_chip: int, path: str, problems: Problems) -> None:
    """Known degrees must multiply to num_chip (all known) or divide it (some searched). A
    preset's outermost degree 0 scales with num_chip."""
    if levels and levels[-1].from_preset and levels[-1].degree == 0:
        inner = math.prod(lv.degree for lv in levels[:-1] if lv.degree > 0)
        if num_chip % inner == 0:
            levels[-1].degree = num_chip // inner
        else:
            problems.add(
                f"system.num_chip {num_chip} is not a multiple of {inner}, the chips inside "
                f"the outermost level of {path}; use a multiple of {inner}"
            )
            return
    degrees = [lv.degree for lv in levels]
    known = math.prod(d for d in degrees if d > 0)
    shown = "x".join(str(d) if d > 0 else "?" for d in degrees)
    if all(d > 0 for d in degrees):
        if known != num_chip:
            problems.add(
                f"{path}: degrees {shown} multiply to {known} but system.num_chip is "
                f"{num_chip}; make the product equal num_chip (or set a degree to 0 to search it)"
            )
    elif num_chip % known != 0:
        fit = -(-num_chip // known) * known  # the next multiple of the product
        problems.add(
            f"{path}: the given degrees {shown} multiply to {known}, which does not divide "
            f"system.num_chip {num_chip}; num_chip must be a multiple of {known} (e.g. "
            f"{fit}), or give degrees whose product divides {num_chip}"
        )


def _default_levels(spec: setup_pb2.ChipSpec, num_chip: int, problems: Problems) -> list[_Level]:
    """No topology given: the chip's scale-up domain, then its scale-out network."""
    if num_chip <= 1:
        return []
    domain = spec.scale_up_domain
    hint = "; give system.topology (e.g. topology { kind: SWITCH degree: N link_bw_GBps: B })"
    chip = f'chip "{spec.name}"' if spec.name else "the accelerator"

    def level(name: str, degree: int, bw: float, latency: float) -> _Level:
        return _Level(
            name=name,
            kind=Topology.SWITCH,
            degree=degree,
            link_bw_GBps=bw,
            latency_us=latency,
            parallelism=[],
            torus_dims=(),
            path=f"{chip} {name}",
            degree_field="system.num_chip",
            bw_field=f"{chip} {name}",
            par_field="",
        )

    if domain > 0 and num_chip > domain:
        if num_chip % domain:
            problems.add(
                f"system.num_chip {num_chip} is not a multiple of the {chip} scale-up domain "
                f"({domain}){hint}"
            )
            return []
        if spec.scale_up_bw_GBps <= 0 or spec.scale_out_bw_GBps <= 0:
            problems.add(f"{chip} has no scale-up or scale-out bandwidth{hint}")
            return []
        return [
            level("scale_up", domain, spec.scale_up_bw_GBps, spec.scale_up_latency_us),
            level(
                "scale_out",
                num_chip // domain,
                spec.scale_out_bw_GBps,
                spec.scale_out_latency_us,
            ),
        ]
    if spec.scale_up_bw_GBps <= 0:
        problems.add(f"{chip} has no scale_up_bw_GBps for {num_chip} chips{hint}")
        return []
    return [level("scale_up", num_chip, spec.scale_up_bw_GBps, spec.scale_up_latency_us)]


def _collective(entry: setup_pb2.CollectiveEfficiency, problems: Problems) -> CollectiveEfficiency:
    path = f"system.accelerator.efficiency.collective[level={entry.level}]"
    fraction(entry.bus_bw_util, f"{path}.bus_bw_util", problems)
    non_negative(entry.latency_us, f"{path}.latency_us", problems)
    non_negative(entry.half_bw_bytes, f"{path}.half_bw_bytes", problems)
    for name in CURVE_FIELDS:
        for i, pt in enumerate(getattr(entry, name)):
            positive(pt.message_bytes, f"{path}.{name}[{i}].message_bytes", problems)
            fraction(pt.bus_bw_util, f"{path}.{name}[{i}].bus_bw_util", problems)
            if pt.bus_bw_util <= 0:
                problems.add(f"{path}.{name}[{i}].bus_bw_util must be > 0")
    return collective_efficiency(entry)


# the entry's message-size curves -> CollectiveEfficiency's fields
CURVE_FIELDS = {
    "bus_bw_at_size": "bus_bw_curve",
    "all_to_all_bw_at_size": "all_to_all_curve",
    "all_gather_bw_at_size": "all_gather_curve",
    "reduce_scatter_bw_at_size": "reduce_scatter_curve",
}


def collective_efficiency(entry: setup_pb2.CollectiveEfficiency) -> CollectiveEfficiency:
    """A chip file's (or setup's) collective entry in SI units."""
    curves = {
        field: tuple(sorted((pt.message_bytes, pt.bus_bw_util) for pt in getattr(entry, name)))
        for name, field in CURVE_FIELDS.items()
    }
    return CollectiveEfficiency(
        bus_bw_util=entry.bus_bw_util or 1.0,
        latency_s=entry.latency_us * 1e-6,
        half_bw_bytes=entry.half_bw_bytes,
        **curves,
    )
