"""Hardware library, resolution to a System, and DFModel's cost/power closed forms."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from google.protobuf import text_format

from hardware import chip_table, library
from hardware.cost import cost_breakdown, power_breakdown, system_cost, system_power
from hardware.resolve import resolve_system
from hardware.system import System, Topology
from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import load_setup

HARDWARE = Path(library.__file__).parent
SETUP = Path("setup.txt")

# DFModel README example (GPT-3 1T on 1024 SN30): its system and cost blocks, verbatim.
DFMODEL_SYSTEM = """
system {
  num_chip: 1024
  accelerator { core: 1280 systolic_width: 32 systolic_height: 6 sram_cap: 671088640.0 freq: 1.25 }
  r_r { x: 8 y: 128 link_bw_x: 50.0 link_bw_y: 50.0 par_x: "TP" par_y: "PP" }
  memory { dram_bw: 300.0 dram_cap: 1099511600000.0 }
}
cost {
  accelerator_price: 16522.25023
  accelerator_power: 444.7061955
  dram_unit_price: 1.0
  dram_unit_power: 0.16248
  link_unit_price: 2.0
  link_unit_power_x: 0.052
  link_unit_power_y: 0.052
  switch_unit_price: 24.0
  switch_unit_power: 0.052
}
"""


def resolve(text: str, path: Path = SETUP) -> System:
    setup = setup_pb2.Setup()
    text_format.Parse(text, setup)
    return resolve_system(setup, path)


def problems(text: str, path: Path = SETUP) -> list[str]:
    with pytest.raises(SetupError) as info:
        resolve(text, path)
    return info.value.problems


# ---------------------------------------------------------------------------------------
# Every library file parses, cites its numbers, and resolves
# ---------------------------------------------------------------------------------------

REQUIRED_CHIPS = [
    "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "B200", "GB200",
    "MI300X", "TPUv4", "TPUv5e", "TPUv5p", "Gaudi2", "Gaudi3", "SN30", "SN40L", "Groq-LPU",
    "Cloud-AI-100", "NVL-AX", "JGS",
]  # fmt: skip
REQUIRED_PRESETS = [
    "DGX-A100",
    "DGX-H100",
    "HGX-H200",
    "DGX-B200",
    "MI300X-8",
    "TPUv4-pod",
    "SN30-1024",
]


def test_library_has_the_required_entries():
    assert set(REQUIRED_CHIPS) <= set(library.chip_names())
    assert set(REQUIRED_PRESETS) <= set(library.preset_names())
    files = {p.stem for p in (HARDWARE / "chips").glob("*.txt")}
    assert files == set(library.chip_names())


@pytest.mark.parametrize("path", sorted((HARDWARE / "chips").glob("*.txt")), ids=lambda p: p.stem)
def test_every_number_in_a_chip_file_has_a_source(path: Path):
    numeric = re.compile(r"^\s*\w+\s*:\s*[-+\d.\[]")
    bare = [
        line for line in path.read_text().splitlines() if numeric.match(line) and "#" not in line
    ]
    assert not bare, f"{path.name}: numbers without a `# source` comment: {bare}"


@pytest.mark.parametrize("name", library.chip_names())
def test_every_chip_resolves(name: str):
    spec = library.get_chip(name)
    one = resolve(f'system {{ chip: "{name}" }}')
    assert one.num_chips == 1 and one.network == ()
    assert one.chip.name == name
    assert max(one.chip.peak_flops.values()) > 0
    assert one.chip.sram_bytes > 0 and one.chip.vector_flops > 0
    assert one.dram.bandwidth_Bps == pytest.approx(spec.memory.dram_bw * 1e9)
    if spec.scale_up_bw_GBps > 0:
        n = 2 * spec.scale_up_domain if spec.scale_up_domain and spec.scale_out_bw_GBps else 4
        many = resolve(f'system {{ chip: "{name}" num_chip: {n} }}')
        assert math.prod(level.degree for level in many.network) == n
        assert many.network[0].link_bandwidth_Bps == pytest.approx(spec.scale_up_bw_GBps * 1e9)


@pytest.mark.parametrize("name", library.preset_names())
def test_every_preset_resolves(name: str):
    preset = library.get_preset(name)
    system = resolve(f'system {{ preset: "{name}" }}')
    assert system.num_chips == preset.num_chip
    assert math.prod(level.degree for level in system.network) == preset.num_chip
    assert system.name == name
    assert system_cost(system) >= 0  # every degree is known


def test_lookup_is_case_insensitive_with_aliases():
    assert library.get_chip("h100-sxm").name == "H100-SXM5-80GB"
    assert library.get_chip("TPU v4").name == "TPUv4"
    assert library.get_chip("h200-sxm").name == "H200-SXM-141GB"
    assert library.get_preset("dgx-h100").name == "DGX-H100"
    assert library.closest_names("H100-SXM6")[0] == "H100-SXM5-80GB"
    assert "MI300X" in library.closest_names("MI300")
    with pytest.raises(SetupError, match='did you mean "A100-SXM4-80GB"'):
        library.get_chip("A100-SXM4-80")


def test_list_and_show():
    table = library.format_list()
    for name in REQUIRED_CHIPS + REQUIRED_PRESETS:
        assert name in table
    assert re.search(r"H100-SXM5-80GB\s+989\.4\s+80\.0\s+3\.35", table)
    shown = library.format_show("H100-SXM")
    assert "accelerator.bf16_tflops = 989.4" in shown
    assert "H100 SXM datasheet" in shown  # the source comment beside the value
    assert "torus_dims" in library.format_show("TPUv4-pod")


# ---------------------------------------------------------------------------------------
# Peak FLOP/s derived by hand
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "chip, precision, flops",
    [
        ("H100-SXM5-80GB", "bf16", 989.4e12),
        ("H100-SXM5-80GB", "fp8", 1978.9e12),
        ("A100-SXM4-80GB", "tf32", 156e12),
        ("SN30", "bf16", 1280 * 32 * 6 * 2 * 1.25e9),  # 614.4e12, systolic only
        ("SN40L", "bf16", 1040 * 32 * 6 * 2 * 1.6e9),
        ("NVL-AX", "fp16", 32 * 2048 * 2 * 2.5e9),  # 327.68e12
        ("JGS", "fp32", 192 * 8192 * 2 * 1.5e9),  # 4718.592e12
    ],
)
def test_peak_flops(chip: str, precision: str, flops: float):
    system = resolve(f'system {{ chip: "{chip}" }}')
    assert system.chip.peak_flops[precision] == pytest.approx(flops, rel=1e-12)


def test_systolic_descriptions_agree_with_published_peaks():
    for name in ("NVL-AX", "TPUv4", "TPUv5e", "TPUv5p"):
        acc = library.get_chip(name).accelerator
        peaks = library.peak_flops(acc)
        published = peaks.get("bf16", peaks.get("fp16", 0.0))
        assert library.systolic_flops(acc) == pytest.approx(published, rel=0.005), name


def test_vector_flops_rules():
    sn30 = resolve('system { chip: "SN30" }').chip
    assert sn30.vector_flops == sn30.peak_flops["bf16"]  # systolic-only: SIMD at full rate
    tpu = resolve('system { chip: "TPUv4" }').chip
    assert tpu.vector_flops == pytest.approx(275e12 / 16)  # no vector_tflops: bf16 peak / 16
    h100 = resolve('system { chip: "H100-SXM" }').chip
    assert h100.vector_flops == pytest.approx(66.9e12)


# ---------------------------------------------------------------------------------------
# Resolution semantics
# ---------------------------------------------------------------------------------------


def test_dfmodel_example_resolves():
    system = resolve(DFMODEL_SYSTEM)
    assert system.num_chips == 1024
    assert [lv.kind for lv in system.network] == [Topology.RING, Topology.RING]
    assert [lv.degree for lv in system.network] == [8, 128]
    assert [lv.link_bandwidth_Bps for lv in system.network] == [50e9, 50e9]
    assert [lv.parallelism for lv in system.network] == [("TP",), ("PP",)]
    assert system.chip.peak_flops == {"bf16": 614.4e12, "fp16": 614.4e12}
    assert system.chip.sram_bytes == 671088640
    assert system.chip.frequency_Hz == 1.25e9
    assert system.dram.bandwidth_Bps == 300e9
    assert system.dram.capacity_bytes == 1099511600000.0
    assert system.cost.link_unit_power == (0.052, 0.052)


def test_dfmodel_scenario_file_resolves():
    path = Path(__file__).parents[2] / "scenarios/dfmodel_gpt3_1t_sn30/setup.txt"
    if not path.is_file():
        pytest.skip("scenario not present")
    setup, setup_path = load_setup(path)
    system = resolve_system(setup, setup_path)
    assert [lv.degree for lv in system.network] == [8, 128]
    # DFModel's 17,757,184 less its switch term on the two rings, (2*128*50 + 2*8*50) x 24
    assert system_cost(system) == pytest.approx(17_757_184 - 326_400, abs=1)


def test_setup_fields_override_the_library_chip():
    system = resolve(
        """system {
             chip: "H100-SXM"
             accelerator { bf16_tflops: 1000 efficiency { dram_util: 0.9 } }
             memory { dram_bw: 4000 }
           }
           execution { compute_util: 0.5 }"""
    )
    chip = system.chip
    assert chip.name == "H100-SXM5-80GB"
    assert chip.peak_flops["bf16"] == 1000e12  # overridden
    assert chip.peak_flops["fp8"] == 1978.9e12  # kept from the library
    assert system.dram.bandwidth_Bps == 4000e9  # overridden
    assert system.dram.capacity_bytes == 80 * 2**30  # kept
    # dram_util overridden; the 16-bit GEMM plateau and the FP8 one kept from the library
    assert chip.efficiency.dram_util == 0.9 and chip.efficiency.gemm_util == 0.784
    assert dict(chip.efficiency.gemm_util_by_precision) == {"fp8": 0.694, "fp64": 0.852}
    assert chip.efficiency.fixed_compute_util == 0.5
    assert chip.tdp_W == 700


def test_preset_with_chip_and_num_chip_overrides():
    system = resolve('system { preset: "DGX-H100" chip: "H200-SXM" num_chip: 64 }')
    assert system.chip.name == "H200-SXM-141GB"
    assert [(lv.name, lv.degree) for lv in system.network] == [("nvswitch", 8), ("infiniband", 8)]
    assert system.network[1].link_bandwidth_Bps == 50e9


def test_setup_levels_merge_onto_the_preset():
    system = resolve(
        """system { preset: "DGX-H100" num_chip: 32
                    topology { parallelism: "TP" } topology { parallelism: "DP" } }"""
    )
    assert [(lv.name, lv.degree, lv.parallelism) for lv in system.network] == [
        ("nvswitch", 8, ("TP",)),
        ("infiniband", 4, ("DP",)),
    ]
    assert system.network[0].link_bandwidth_Bps == 450e9


def test_default_topology_from_the_chip():
    two = resolve('system { chip: "H100-SXM" num_chip: 64 }').network
    assert [(lv.kind, lv.degree, lv.link_bandwidth_Bps) for lv in two] == [
        (Topology.SWITCH, 8, 450e9),
        (Topology.SWITCH, 8, 50e9),
    ]
    one = resolve('system { chip: "H100-SXM" num_chip: 4 }').network
    assert [(lv.degree, lv.link_bandwidth_Bps) for lv in one] == [(4, 450e9)]


def test_measured_collective_efficiency_lands_on_its_level():
    system = resolve('system { preset: "DGX-A100" num_chip: 16 }')
    assert system.network[0].efficiency.bus_bw_util == pytest.approx(0.775, abs=0.01)
    assert system.network[1].efficiency.bus_bw_util == 1.0


def test_explicit_levels_torus_and_searched_degrees():
    system = resolve(
        """system {
             chip: "TPUv5p" num_chip: 128
             topology { kind: TORUS torus_dims: [4, 4, 4] link_bw_GBps: 600 parallelism: "tp" }
             topology { kind: SWITCH link_bw_GBps: 6.25 latency_us: 10 parallelism: ["DP", "EP"] }
           }
           cost { link_unit_price: 1 }"""
    )
    torus, dcn = system.network
    assert torus.degree == 64 and torus.torus_dims == (4, 4, 4) and torus.parallelism == ("TP",)
    assert dcn.degree == 0 and not system.degrees_known  # searched
    assert dcn.latency_s == pytest.approx(10e-6) and dcn.parallelism == ("DP", "EP")
    assert system_cost(system, degrees=[64, 2]) == pytest.approx(128 * 600 + 128 * 6.25)


def test_levels_without_bandwidth_take_the_chips():
    system = resolve(
        """system {
             chip: "H100-SXM" num_chip: 64
             topology { kind: SWITCH degree: 8 parallelism: "TP" }
             topology { kind: SWITCH parallelism: "DP" }
           }"""
    )
    assert [(lv.degree, lv.link_bandwidth_Bps) for lv in system.network] == [(8, 450e9), (0, 50e9)]
    msgs = problems('system { chip: "NVL-AX" num_chip: 4 r { x: 4 } }')
    assert len(msgs) == 1 and msgs[0].startswith("setup.txt: system.r.link_bw_x is missing")


def test_non_finite_numbers_are_reported():
    msgs = problems('system { chip: "H100" memory { dram_bw: nan } accelerator { freq: inf } }')
    assert "setup.txt: system.memory.dram_bw is not a finite number, got nan" in msgs
    assert "setup.txt: system.accelerator.freq is not a finite number, got inf" in msgs


def test_cost_falls_back_to_chip_price_and_tdp():
    system = resolve('system { chip: "Gaudi3" }')
    assert system.cost.accelerator_price == 15625 and system.cost.accelerator_power_W == 900


# ---------------------------------------------------------------------------------------
# Spreadsheet import
# ---------------------------------------------------------------------------------------

TABLE = [
    ["name", "bf16_tflops", "memory_gb", "memory_bw_GBps", "sram_mb", "cores", "clock_ghz",
     "scale_up_bw_GBps", "tdp_w", "price_usd"],
    ["MyChip", 500, 96, 2000, 64, 100, 1.5, 400, 500, 9000],
    ["Other", "", 24, "1,000", 32, "", "", "", "", ""],
]  # fmt: skip


def _check_mychip(system: System) -> None:
    assert system.chip.name == "MyChip"
    assert system.chip.peak_flops == {"bf16": 500e12}
    assert system.dram.capacity_bytes == 96e9 and system.dram.bandwidth_Bps == 2000e9
    assert system.chip.sram_bytes == 64e6 and system.chip.cores == 100
    assert system.cost.accelerator_price == 9000
    assert [(lv.degree, lv.link_bandwidth_Bps) for lv in system.network] == [(4, 400e9)]


def test_chip_table_csv(tmp_path: Path):
    (tmp_path / "chips.csv").write_text("\n".join(",".join(f'"{c}"' for c in r) for r in TABLE))
    chips = chip_table.load_chip_table(tmp_path / "chips.csv")
    assert set(chips) == {"MyChip", "Other"}
    assert chips["Other"].memory.dram_bw == 1000
    setup = 'system { chip: "mychip" chip_table: "chips.csv" num_chip: 4 }'
    _check_mychip(resolve(setup, tmp_path / "setup.txt"))


def test_chip_table_xlsx(tmp_path: Path):
    import openpyxl

    book = openpyxl.Workbook()
    for row in TABLE:
        book.active.append([None if c == "" else c for c in row])
    book.save(tmp_path / "chips.xlsx")
    setup = 'system { chip: "MyChip" chip_table: "chips.xlsx" num_chip: 4 }'
    _check_mychip(resolve(setup, tmp_path / "setup.txt"))


def test_a_missing_chip_table_is_named(tmp_path: Path):
    setup = 'system { chip: "Nope" chip_table: "missing.csv" }'
    assert "missing.csv: no such file" in problems(setup, tmp_path / "setup.txt")[0]


def test_unknown_chip_suggests_the_closest():
    (msg,) = problems('system { chip: "H100-SXM6" }')
    assert msg.startswith('setup.txt: system.chip "H100-SXM6" is not in the hardware library')
    assert 'did you mean "H100-SXM5-80GB"' in msg


def test_unknown_preset_and_bad_num_chip():
    msgs = problems('system { preset: "DGX-H1000" chip: "H100" num_chip: -3 }')
    (preset_msg,) = [m for m in msgs if "system.preset" in m]
    assert preset_msg.startswith('setup.txt: system.preset "DGX-H1000" is not a known preset')
    assert preset_msg.endswith('did you mean "DGX-H100"?')
    assert "setup.txt: system.num_chip must be > 0, got -3" in msgs
    assert len(msgs) == 2


def test_all_topology_problems_reported_at_once():
    msgs = problems(
        """system {
             num_chip: 1024
             accelerator { core: 1280 systolic_width: 32 systolic_height: 6
                           sram_cap: 1e9 freq: 1.25 }
             memory { dram_bw: 300 }
             r_r_r { x: 8 y: 64 z: 1 link_bw_x: 50 link_bw_y: -5 link_bw_z: 50
                     par_x: "TP" par_y: "tp" par_z: "XP" }
           }"""
    )
    assert "setup.txt: system.r_r_r.link_bw_y must be > 0 (GB/s per chip), got -5" in msgs
    assert (
        "setup.txt: system.r_r_r.par_y assigns TP a second time (already on "
        "system.r_r_r.par_x); a parallelism goes on one level" in msgs
    )
    assert any(
        m.startswith('setup.txt: system.r_r_r.par_z "XP" is not a parallelism') for m in msgs
    )
    assert any(
        "system.r_r_r: degrees 8x64x1 multiply to 512 but system.num_chip is 1024" in m
        for m in msgs
    )
    assert len(msgs) == 4


def test_negative_and_missing_numbers():
    msgs = problems(
        """system {
             num_chip: 4
             accelerator { sram_cap: 1e6 freq: -1 efficiency { gemm_util: 1.5 } }
             memory { dram_bw: -10 }
             sw { x: 4 link_bw_x: 100 }
           }"""
    )
    assert "setup.txt: system.accelerator.freq must be >= 0, got -1" in msgs
    assert "setup.txt: system.memory.dram_bw must be > 0 (GB/s), got -10" in msgs
    assert any(m.startswith("setup.txt: system.accelerator has no peak FLOP/s") for m in msgs)
    partial = problems('system { accelerator { core: 8 systolic_width: 4 systolic_height: 4 '
                       'sram_cap: 1e6 } memory { dram_bw: 1 } }')  # fmt: skip
    assert partial == [
        "setup.txt: system.accelerator.freq must be > 0 to derive the peak from core x "
        "systolic_width x systolic_height x 2 x freq (or give bf16_tflops), got 0"
    ]
    assert any("efficiency.gemm_util must be in (0, 1]" in m for m in msgs)


def test_preset_scale_out_must_divide():
    (msg,) = problems('system { preset: "DGX-H100" num_chip: 12 }')
    assert "system.num_chip 12 is not a multiple of 8" in msg


# ---------------------------------------------------------------------------------------
# System Cost and System Power (DFModel's closed forms)
# ---------------------------------------------------------------------------------------


def test_dfmodel_cost_and_power():
    """The native closed form on DFModel's README system (r_r 8 x 128 at 50 GB/s): DFModel's
    terms except the switch it charges on rings (2 d B per level: 13,600 GB/s of ports x $24,
    x 0.052 W; solver/dfmodel/model.py keeps DFModel's own form): a ring has no switch."""
    system = resolve(DFMODEL_SYSTEM)
    expected = 1024 * 16522.25023 + 1024 * 300 * 1 + 2 * (1024 * 50 * 2)
    assert system_cost(system) == pytest.approx(expected, abs=1e-6)
    assert abs(system_cost(system) - (17_757_184 - 326_400)) < 1
    assert cost_breakdown(system)["switch"] == 0.0
    assert system_power(system) == pytest.approx(511_325.000192 - 13_600 * 0.052, abs=1e-6)


def test_switch_ports_one_per_chip_per_switch_level():
    """A switch level of degree d: n / d switches of d ports, one port per chip."""
    system = resolve(
        """system {
             chip: "H100-SXM" num_chip: 16
             topology { kind: SWITCH degree: 8 link_bw_GBps: 450 }
             topology { kind: RING degree: 2 link_bw_GBps: 50 }
           }
           cost { switch_unit_price: 2 switch_unit_power: 0.5 }"""
    )
    assert cost_breakdown(system)["switch"] == pytest.approx(16 * 450 * 2)
    assert power_breakdown(system)["switch"] == pytest.approx(16 * 450 * 0.5)


def test_cost_needs_known_degrees():
    system = resolve(
        'system { chip: "H100" num_chip: 16 topology { kind: SWITCH link_bw_GBps: 450 } }'
    )
    with pytest.raises(ValueError, match="searched"):
        system_cost(system)
    assert system_cost(system, degrees=[16]) == 0.0  # no cost block, no chip price
