"""The DFModel seam: DFModel's compatibility fields turned into the native setup, once.

MapShard reads DFModel's setup.txt unchanged. DFModel's other spellings of native blocks
(`miscellany`, the `overlap` enum, a kernel variant's `sharding`) are renamed first, right
after parsing, by the sibling `schema.dfmodel_spelling`. Its hardware/solver compatibility
fields are interpreted here and nowhere below:

* a topology variant (`system.r`, `system.r_r`, ... `system.sw_sw_sw`: `x/y/z`,
  `link_bw_x/y/z` in GB/s, `par_x/y/z` strings) becomes native `system.topology` levels, x
  innermost, named "x", "y", "z". A variant replaces a preset's topology instead of merging
  onto it (`NormalisedSetup.topology_replaces_preset`);
* `gurobi { time gap }` fills `solver { time_limit_s gap }` where the user left them unset
  (`solver` wins). `gurobi.thread` is not carried over: it is a Gurobi setting for a large
  server, and HiGHS runs single-threaded unless `solver.threads` asks otherwise;
* `execution.compute_util` becomes `system.accelerator.efficiency.compute_util` (a native
  efficiency given in the setup wins);
* `system.accelerator.link_latency` (DFModel's newer schema: one link's latency in ns)
  becomes every topology level's `latency_us` left unset: the alpha of each algorithm step
  of the native collectives (solver/cost/collectives.py), and DFModel's per-hop term under
  `--cost-model dfmodel` (solver/dfmodel/model.all_reduce_alpha_s).

`system.HBD` and `system.memory.second_dram_bw/cap` stay where they are: only the
dfmodel cost model reads them (mapshard.scenario.dfmodel_options ->
solver/dfmodel/model.hbd_ratios, solver/dfmodel/search.dram_tiers); the native model has no
two-level all-reduce over an HBD nor a second DRAM tier, which `ignored_fields` says.

Validation runs on the user's setup before this, so its messages name the user's fields.
Problems found later (hardware resolution) name the user's fields too, through `origins`:
native field path -> the field the user wrote. DFModel's *workload* fields (kernel variants,
`execution.llm`, `execution.word`) are workload descriptions the generator builds graphs
from; they are not touched here.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from schema import setup_pb2

# DFModel topology variants: one basic topology per dimension, x innermost.
VARIANTS: Mapping[str, tuple[int, ...]] = {
    "r": (setup_pb2.RING,),
    "sw": (setup_pb2.SWITCH,),
    "fc": (setup_pb2.FULLY_CONNECTED,),
    "r_r": (setup_pb2.RING, setup_pb2.RING),
    "r_fc": (setup_pb2.RING, setup_pb2.FULLY_CONNECTED),
    "r_sw": (setup_pb2.RING, setup_pb2.SWITCH),
    "sw_sw": (setup_pb2.SWITCH, setup_pb2.SWITCH),
    "fc_fc": (setup_pb2.FULLY_CONNECTED, setup_pb2.FULLY_CONNECTED),
    "r_r_r": (setup_pb2.RING, setup_pb2.RING, setup_pb2.RING),
    "r_sw_sw": (setup_pb2.RING, setup_pb2.SWITCH, setup_pb2.SWITCH),
    "sw_sw_sw": (setup_pb2.SWITCH, setup_pb2.SWITCH, setup_pb2.SWITCH),
}
COMPUTE_UTIL = "system.accelerator.efficiency.compute_util"
_PAR_SPLIT = re.compile(r"[\s,+/]+")  # DFModel's par_x may name several: "TP+EP"


@dataclass(frozen=True)
class NormalisedSetup:
    """A setup with DFModel's compatibility fields moved to their native places."""

    setup: setup_pb2.Setup  # a copy; the user's message is never changed
    # native field path (e.g. "system.topology[1].degree") -> the user's ("system.r_r.y")
    origins: Mapping[str, str] = field(default_factory=dict)
    # the topology levels replace a preset's instead of merging onto them (DFModel variants)
    topology_replaces_preset: bool = False
    # problems of the user's setup that only show at the seam (no file prefix)
    conflicts: tuple[str, ...] = ()
    # the degrees that give the chip count when num_chip is left 0, a 0 (searched) staying 0
    # (a DFModel variant's); None: the topology levels' (where a degree 0 counts as 1)
    chip_count_degrees: tuple[int, ...] | None = None

    def origin(self, path: str) -> str:
        """The field the user wrote for native `path` (itself when not from DFModel)."""
        return self.origins.get(path, path)


def normalise(setup: setup_pb2.Setup | NormalisedSetup) -> NormalisedSetup:
    """The native form of `setup` (already normalised: returned as is)."""
    if isinstance(setup, NormalisedSetup):
        return setup
    native = setup_pb2.Setup()
    native.CopyFrom(setup)
    origins: dict[str, str] = {}
    replaces, conflicts, degrees = _topology(native.system, origins)
    if setup.HasField("gurobi") or setup.HasField("solver"):
        native.solver.CopyFrom(native_solver(setup, origins))
    native.ClearField("gurobi")
    util = native.system.accelerator.efficiency
    if setup.execution.compute_util and not util.compute_util:
        util.compute_util = setup.execution.compute_util
        origins[COMPUTE_UTIL] = "execution.compute_util"
    if native.execution.compute_util:  # (assigning would make an absent block present)
        native.execution.compute_util = 0.0
    _link_latency(native, origins)
    if sram_unbounded(native):
        native.system.accelerator.sram_cap = float(sys.maxsize)  # DFModel's own reading
    return NormalisedSetup(native, origins, replaces, conflicts, degrees)


LINK_LATENCY = "system.accelerator.link_latency"


def _link_latency(setup: setup_pb2.Setup, origins: dict[str, str]) -> None:
    """DFModel's accelerator.link_latency (ns per hop) as the levels' latency_us (a level's
    own latency wins); the accelerator field is cleared so nothing reads it twice (kept, and
    reported unused by `ignored_fields`, when the setup names no level to carry it)."""
    acc = setup.system.accelerator
    ns = acc.link_latency
    if ns <= 0 or not setup.system.topology:
        return
    for i, level in enumerate(setup.system.topology):
        if not level.latency_us:
            level.latency_us = ns * 1e-3
            origins[f"system.topology[{i}].latency_us"] = LINK_LATENCY
    acc.link_latency = 0.0


def sram_unbounded(setup: setup_pb2.Setup) -> bool:
    """DFModel's lane/stage studies leave sram_cap out, which its equations read as no
    SRAM limit (sys.maxsize, intra_chip.py @ b9a3e2f): under --cost-model dfmodel an
    unset sram_cap on a DFModel graph is unbounded; the native model still refuses it."""
    acc = setup.system.accelerator
    dfmodel_graph = any(
        k.WhichOneof("kernel_variant") not in (None, "einsum") for k in setup.dataflow_graph.kernels
    )
    return (
        setup.execution.cost_model == setup_pb2.DFMODEL
        and acc.sram_cap == 0
        and not setup.system.chip
        and dfmodel_graph
    )


def native_solver(
    setup: setup_pb2.Setup | NormalisedSetup, origins: dict[str, str] | None = None
) -> setup_pb2.Solver:
    """`solver` with DFModel's `gurobi { time gap }` filling the fields left unset."""
    if isinstance(setup, NormalisedSetup):
        return setup.setup.solver
    solver = setup_pb2.Solver()
    solver.CopyFrom(setup.solver)
    g = setup.gurobi
    for native, dfmodel in (("time_limit_s", "time"), ("gap", "gap")):
        if not getattr(solver, native) and getattr(g, dfmodel):
            setattr(solver, native, getattr(g, dfmodel))
            if origins is not None:
                origins[f"solver.{native}"] = f"gurobi.{dfmodel}"
    return solver


def _topology(
    system: setup_pb2.System, origins: dict[str, str]
) -> tuple[bool, tuple[str, ...], tuple[int, ...] | None]:
    """Replace a topology variant by native levels. Returns (the levels replace a preset's,
    conflicts, the degrees that give the chip count)."""
    variant = system.WhichOneof("topology_variant")
    if not variant:
        return False, (), None
    msg = getattr(system, variant)
    system.ClearField(variant)
    degrees = tuple(getattr(msg, axis) for axis in "xyz"[: len(VARIANTS[variant])])
    if system.topology:  # both given: the levels stand, the variant is an error
        conflict = f"system.topology and system.{variant} are exclusive; give one of them"
        return True, (conflict,), degrees
    vpath = f"system.{variant}"
    origins["system.topology"] = vpath
    for i, (axis, kind) in enumerate(zip("xyz", VARIANTS[variant])):
        system.topology.add(
            name=axis,
            kind=kind,
            degree=getattr(msg, axis),
            link_bw_GBps=getattr(msg, f"link_bw_{axis}"),
            parallelism=[p for p in _PAR_SPLIT.split(getattr(msg, f"par_{axis}")) if p],
        )
        path = f"system.topology[{i}]"
        origins[path] = vpath
        origins[f"{path}.degree"] = f"{vpath}.{axis}"
        origins[f"{path}.link_bw_GBps"] = f"{vpath}.link_bw_{axis}"
        origins[f"{path}.parallelism"] = f"{vpath}.par_{axis}"
    return True, (), degrees


def hbd_read(setup: setup_pb2.Setup) -> bool:
    """Whether DFModel reads system.HBD for this setup: a 3-D topology whose levels carry
    TP, PP, DP innermost first (solver/dfmodel/model.hbd_applies)."""
    levels = normalise(setup).setup.system.topology
    return [tuple(lv.parallelism) for lv in levels] == [("TP",), ("PP",), ("DP",)]


def ignored_fields(setup: setup_pb2.Setup) -> tuple[str, ...]:
    """DFModel fields this setup gives that no model here reads, one sentence each (the run
    goes on without them; the result says so: never silently)."""
    out = []
    sysm = setup.system
    dfmodel = setup.execution.cost_model == setup_pb2.DFMODEL
    if sysm.HBD and not dfmodel:
        out.append(
            f"system.HBD ({sysm.HBD}) is priced by --cost-model dfmodel only (DFModel's "
            "two-level all-reduce over a fast domain of that many chips); the native model's "
            "topology levels say which chips share a fast domain: give that domain its own "
            "level (system.topology) to price it natively"
        )
    elif sysm.HBD and not hbd_read(setup):
        out.append(
            f"system.HBD ({sysm.HBD}) is not read: DFModel reads it only on a 3-D topology "
            'with par_x "TP", par_y "PP", par_z "DP"'
        )
    mem = sysm.memory
    if (mem.second_dram_bw or mem.second_dram_cap) and not dfmodel:
        out.append(
            "system.memory.second_dram_bw / second_dram_cap are priced by --cost-model "
            "dfmodel only: the native model has one DRAM level per chip, so weights, "
            f"activations and edges use the first ({mem.dram_bw:g} GB/s, {mem.dram_cap:g} B)"
        )
    elif mem.second_dram_bw and not mem.second_dram_cap:
        out.append(
            "system.memory.second_dram_bw is not read without second_dram_cap (DFModel reads "
            "the second DRAM only when its capacity is given)"
        )
    if setup.gurobi.thread:
        out.append(
            f"gurobi.thread ({setup.gurobi.thread}) is ignored: it is Gurobi's; HiGHS runs "
            f"with solver.threads ({setup.solver.threads or 1})"
        )
    if (
        sysm.accelerator.link_latency
        and not sysm.topology
        and not sysm.WhichOneof("topology_variant")
    ):
        out.append(
            f"{LINK_LATENCY} is ignored: the setup names no topology level to carry it "
            "(give a DFModel topology variant or system.topology)"
        )
    return tuple(out)
