"""The DFModel seam (schema/dfmodel.py): DFModel's compatibility fields become the native
setup once, and nothing below reads them (issue #13)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from google.protobuf import text_format

from hardware.resolve import resolve_system
from hardware.system import System
from mapshard.pipeline import solver_options
from schema import setup_pb2
from schema.dfmodel import VARIANTS, NormalisedSetup, native_solver, normalise
from schema.errors import SetupError
from schema.setup_io import load_setup
from solver.dfmodel.model import all_reduce_alpha_s

ROOT = Path(__file__).parents[2]
SETUP = Path("setup.txt")
# DFModel's SN30 accelerator: no library chip, so every link bandwidth is the setup's.
CHIP = """
  accelerator { core: 1280 systolic_width: 32 systolic_height: 6 sram_cap: 671088640.0 freq: 1.25 }
  memory { dram_bw: 300.0 dram_cap: 1099511600000.0 }
"""
# Written out by hand (not taken from schema.dfmodel): the letters of a variant's name.
KIND = {"r": "RING", "sw": "SWITCH", "fc": "FULLY_CONNECTED"}
DEGREES = (4, 2, 8)
BANDWIDTHS = (50.0, 25.5, 12.5)
PARS = ('"TP+EP"', '"PP"', '"dp"')


def parse(text: str) -> setup_pb2.Setup:
    setup = setup_pb2.Setup()
    text_format.Parse(text, setup)
    return setup


def resolve(text: str) -> System:
    return resolve_system(parse(text), SETUP)


def problems(text: str) -> list[str]:
    with pytest.raises(SetupError) as info:
        resolve(text)
    return info.value.problems


def dfmodel_text(variant: str, degrees=DEGREES, extra: str = "") -> str:
    axes = "xyz"[: len(variant.split("_"))]
    fields = " ".join(
        f"{a}: {d} link_bw_{a}: {bw} par_{a}: {par}"
        for a, d, bw, par in zip(axes, degrees, BANDWIDTHS, PARS)
    )
    num_chip = math.prod(degrees[: len(axes)])
    return f"system {{ num_chip: {num_chip} {CHIP} {variant} {{ {fields} }} {extra} }}"


def native_text(variant: str) -> str:
    kinds = variant.split("_")
    pars = ('"TP" parallelism: "EP"', '"PP"', '"dp"')
    levels = " ".join(
        f'topology {{ name: "{a}" kind: {KIND[k]} degree: {d} link_bw_GBps: {bw} '
        f"parallelism: {par} }}"
        for a, k, d, bw, par in zip("xyz", kinds, DEGREES, BANDWIDTHS, pars)
    )
    num_chip = math.prod(DEGREES[: len(kinds)])
    return f"system {{ num_chip: {num_chip} {CHIP} {levels} }}"


def test_every_variant_of_the_schema_is_covered():
    variants = setup_pb2.System.DESCRIPTOR.oneofs_by_name["topology_variant"].fields
    assert sorted(f.name for f in variants) == sorted(VARIANTS)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_resolves_to_the_same_system_as_its_native_levels(variant):
    dfmodel = resolve(dfmodel_text(variant))
    native = resolve(native_text(variant))
    assert dfmodel == native
    assert [lv.name for lv in dfmodel.network] == list("xyz"[: len(variant.split("_"))])
    assert dfmodel.network[0].parallelism == ("TP", "EP")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_becomes_native_topology_levels(variant):
    user = parse(dfmodel_text(variant))
    seam = normalise(user)
    assert seam.setup.system.WhichOneof("topology_variant") is None
    assert len(seam.setup.system.topology) == len(variant.split("_"))
    assert seam.origins["system.topology[0].degree"] == f"system.{variant}.x"
    assert seam.topology_replaces_preset
    assert user.system.WhichOneof("topology_variant") == variant  # the user's is untouched
    assert normalise(seam) is seam


def test_dfmodel_gallery_scenario_resolves_as_before():
    setup, path = load_setup(ROOT / "scenarios/dfmodel_gpt3_1t_sn30")
    system = resolve_system(normalise(setup), path)
    assert system == resolve_system(setup, path)
    assert [(lv.name, lv.degree) for lv in system.network] == [("x", 8), ("y", 128)]


def test_variant_replaces_a_presets_topology():
    system = resolve('system { preset: "DGX-H100" num_chip: 16 sw_sw { x: 8 y: 2 } }')
    assert [(lv.name, lv.degree) for lv in system.network] == [("x", 8), ("y", 2)]
    merged = resolve(
        'system { preset: "DGX-H100" num_chip: 16 topology { kind: SWITCH degree: 8 } }'
    )
    assert [lv.name for lv in merged.network] == ["nvswitch", "infiniband"]


# ---------------------------------------------------------------------------------------
# Messages name the field the user wrote
# ---------------------------------------------------------------------------------------


def test_degrees_not_multiplying_to_num_chip_name_the_variant():
    text = dfmodel_text("r_r").replace("num_chip: 8", "num_chip: 16")
    assert problems(text) == [
        "setup.txt: system.r_r: degrees 4x2 multiply to 8 but system.num_chip is 16; make the "
        "product equal num_chip (or set a degree to 0 to search it)"
    ]


def test_missing_link_bandwidth_names_the_variant_field():
    text = dfmodel_text("sw_sw_sw").replace("link_bw_y: 25.5", "")
    assert problems(text) == [
        "setup.txt: system.sw_sw_sw.link_bw_y is missing; give the link bandwidth in GB/s per "
        "chip, one direction (or a library chip whose bandwidth it takes)"
    ]


def test_bad_parallelism_names_the_variant_field():
    text = dfmodel_text("r_fc").replace('par_y: "PP"', 'par_y: "TP"')
    assert problems(text) == [
        "setup.txt: system.r_fc.par_y assigns TP a second time (already on system.r_fc.par_x); "
        "a parallelism goes on one level"
    ]
    # native levels may share a parallelism: its group spans them (TP 4 x 2 = 8 chips)
    native = native_text("r_fc").replace('parallelism: "PP"', 'parallelism: "TP"')
    assert [lv.parallelism for lv in resolve(native).network] == [("TP", "EP"), ("TP",)]
    twice = native.replace('parallelism: "TP" parallelism: "EP"', 'parallelism: "TP" ' * 2)
    assert problems(twice) == [
        "setup.txt: system.topology[0].parallelism[1] assigns TP a second time (already on "
        "system.topology[0].parallelism[0]); a parallelism goes on one level"
    ]


def test_variant_beside_topology_levels_is_still_reported():
    text = native_text("r").replace("} }", '} r { x: 4 link_bw_x: 1 par_x: "TP" } }')
    assert problems(text) == [
        "setup.txt: system.topology and system.r are exclusive; give one of them"
    ]


def test_compute_util_out_of_range_names_execution():
    text = dfmodel_text("r") + " execution { compute_util: 1.5 }"
    assert any("execution.compute_util" in p for p in problems(text))


# ---------------------------------------------------------------------------------------
# execution.compute_util and gurobi
# ---------------------------------------------------------------------------------------


def test_compute_util_reaches_the_chip_efficiency():
    text = dfmodel_text("r")
    dfmodel = resolve(text + " execution { compute_util: 0.5 }")
    assert dfmodel.chip.efficiency.fixed_compute_util == 0.5
    native = resolve(text.replace("freq: 1.25", "freq: 1.25 efficiency { compute_util: 0.5 }"))
    assert dfmodel == native
    seam = normalise(parse(text + " execution { compute_util: 0.5 }"))
    assert seam.setup.execution.compute_util == 0
    assert seam.setup.system.accelerator.efficiency.compute_util == 0.5
    assert seam.origin("system.accelerator.efficiency.compute_util") == "execution.compute_util"


def test_native_compute_util_wins_over_execution():
    text = dfmodel_text("r").replace("freq: 1.25", "freq: 1.25 efficiency { compute_util: 0.7 }")
    system = resolve(text + " execution { compute_util: 0.5 }")
    assert system.chip.efficiency.fixed_compute_util == 0.7


def test_no_compute_util_leaves_execution_absent():
    seam = normalise(parse(dfmodel_text("r")))
    assert not seam.setup.HasField("execution")


def test_gurobi_fills_solver_and_solver_wins():
    setup = parse("gurobi { thread: 8 gap: 0.01 time: 30 }")
    seam = normalise(setup)
    assert not seam.setup.HasField("gurobi")
    assert (seam.setup.solver.time_limit_s, seam.setup.solver.gap) == (30, 0.01)
    assert seam.setup.solver.threads == 0  # a Gurobi server setting: HiGHS is not given it
    assert seam.origin("solver.gap") == "gurobi.gap"
    options = solver_options(setup)
    assert (options.time_limit_s, options.gap, options.threads) == (30, 0.01, 1)
    assert solver_options(seam.setup) == options

    both = parse("gurobi { gap: 0.01 time: 30 } solver { gap: 0.05 threads: 2 }")
    assert (native_solver(both).time_limit_s, native_solver(both).gap) == (30, 0.05)
    options = solver_options(both, time_limit_s=5)
    assert (options.time_limit_s, options.gap, options.threads) == (5, 0.05, 2)
    assert solver_options(parse("")).gap == 1e-4


def test_normalise_leaves_native_setups_alone():
    setup = parse(native_text("r_sw"))
    seam = normalise(setup)
    assert isinstance(seam, NormalisedSetup)
    assert seam.setup == setup and not seam.origins and not seam.topology_replaces_preset


# ---------------------------------------------------------------------------------------
# Nothing below the seam reads DFModel's compatibility fields
# ---------------------------------------------------------------------------------------


def test_hardware_reads_no_dfmodel_compatibility_field():
    banned = set(VARIANTS) | {"topology_variant", "execution", "gurobi", "WhichOneof"}
    found = []
    for path in sorted((ROOT / "hardware").rglob("*.py")):
        text = path.read_text()
        assert "topology_variant" not in text, path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr in banned:
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in banned:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert not found


def test_a_searched_variant_degree_needs_num_chip():
    """A variant's degree 0 is searched, so it gives no chip count (a native level's 0
    counts as 1 there: both as before the seam)."""
    text = 'system { chip: "H100-SXM" r_r { x: 0 y: 4 } }'
    assert problems(text) == [
        "setup.txt: system.num_chip must be > 0, got 0 (the topology leaves degrees to search, "
        "so the chip count must be given)",
        "setup.txt: system.r_r: the given degrees ?x4 multiply to 4, which does not divide "
        "system.num_chip 1; num_chip must be a multiple of 4 (e.g. 4), or give degrees whose "
        "product divides 1",
    ]
    native = 'system { chip: "H100-SXM" topology { kind: RING } topology { kind: RING degree: 4 } }'
    assert resolve(native).num_chips == 4


def test_link_latency_becomes_every_levels_alpha():
    """accelerator.link_latency (DFModel's newer schema, ns per hop) is each level's
    latency: 2000 ns -> 2 us on x and y; a native level's own latency_us wins."""
    chip = CHIP.replace("freq: 1.25 }", "freq: 1.25 link_latency: 2000 }")
    text = dfmodel_text("r_r").replace(CHIP, chip)
    system = resolve(text)
    assert [lv.latency_s for lv in system.network] == pytest.approx([2e-6, 2e-6])
    seam = normalise(parse(text))
    assert seam.origin("system.topology[1].latency_us") == "system.accelerator.link_latency"
    assert seam.setup.system.accelerator.link_latency == 0.0  # moved, not read twice
    native = (
        native_text("r_sw")
        .replace(CHIP, chip)
        .replace("bw_GBps: 50.0", "bw_GBps: 50.0 latency_us: 5")
    )
    assert [lv.latency_s for lv in resolve(native).network] == pytest.approx([5e-6, 2e-6])


def test_dfmodel_all_reduce_alpha_is_two_hops_per_tp_step():
    """DFModel's link-latency term of one all-reduce: link_latency x 2 (p_TP - 1) on the TP
    level, whatever its kind (intra_chip.py @ 5ba2040): 12 chips at 2 us -> 44 us."""
    system = resolve(
        dfmodel_text("r", (12,)).replace(CHIP, CHIP.replace("}", "link_latency: 2000 }", 1))
    )
    (level,) = system.network
    assert all_reduce_alpha_s({"tp": ((level, 12),)}) == pytest.approx(44e-6)
    assert all_reduce_alpha_s({"pp": ((level, 12),)}) == 0.0
