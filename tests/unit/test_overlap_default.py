"""A library chip's calibrated overlap is the default (issue #16): `run` of a plain setup
and `validate` of the same workload assume the same execution semantics."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from hardware import library
from hardware.calibration import UNCALIBRATED_OVERLAPS, calibration_of
from mapshard import pipeline
from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.predict import predict
from mapshard.fidelity.scenarios import build_setup, load_case_scenario
from mapshard.scenario import execution_options, overlap_mode
from schema import setup_pb2

DEV = Path(__file__).parents[1] / "data" / "validation" / "validation_dev_structured.csv"
LLAMA = (
    'workload { llm_inference { model { hf_model: "Llama-3.1-8B" } phase: DECODE '
    "context_len: 128 } }\n"
)


def mode(text: str, tmp_path: Path) -> tuple[str, bool, bool]:
    (tmp_path / "setup.txt").write_text(LLAMA + text, encoding="utf-8")
    sc = pipeline.load_scenario(tmp_path)
    ex = execution_options(sc.setup, sc.system.chip.overlap)
    return overlap_mode(sc.setup, sc.system.chip.overlap), ex.overlap, ex.serialize_network


CUSTOM = (
    "system { accelerator { bf16_tflops: 100 sram_cap: 1e7 } memory { dram_bw: 1000 "
    "dram_cap: 1e11 } }\n"
)


@pytest.mark.parametrize(
    "text,expected",
    [
        # GPUs: the mode their efficiency constants were fitted under
        ('system { chip: "H100-SXM5-80GB" }', ("serial_network", True, True)),
        (
            'system { chip: "MI300X" }\nexecution { execution_style: KERNEL_BY_KERNEL }',
            ("serial_network", True, True),
        ),  # fmt: skip
        # a dataflow chip of DFModel's example streams all three at once
        (
            'system { chip: "JGS" }\nexecution { execution_style: DATAFLOW }',
            ("perfect", True, False),
        ),  # fmt: skip
        # the setup wins: new field, then the legacy flags
        (
            'system { chip: "H100-SXM5-80GB" }\nexecution { overlap: NO_OVERLAP }',
            ("none", False, False),
        ),  # fmt: skip
        (
            'system { chip: "H100-SXM5-80GB" }\nexecution { perfect_overlap: true }',
            ("perfect", True, False),
        ),  # fmt: skip
        # no library chip: DFModel's meaning (block without perfect_overlap = no overlap)
        (CUSTOM, ("perfect", True, False)),
        (CUSTOM + "execution { execution_style: KERNEL_BY_KERNEL }", ("none", False, False)),
    ],
)
def test_overlap_resolution(text, expected, tmp_path):
    assert mode(text, tmp_path) == expected


def test_validate_and_run_assume_the_same_overlap(tmp_path):
    """T01's scenario as `validate` builds it, and the same setup written to a file and
    loaded as `mapshard run` would: same options (A100: SERIAL_NETWORK)."""
    t01 = next(c for c in read_cases(DEV) if c.id == "T01")
    setup, _ = build_setup(t01)
    (tmp_path / "setup.txt").write_text(text_format.MessageToString(setup), encoding="utf-8")
    ran = pipeline.load_scenario(tmp_path)
    validated = load_case_scenario(t01, DEV)
    run_opts = execution_options(ran.setup, ran.system.chip.overlap)
    val_opts = execution_options(validated.setup, validated.system.chip.overlap)
    assert run_opts == val_opts
    assert (run_opts.overlap, run_opts.serialize_network) == (True, True)
    assert not setup.HasField("execution")


def test_every_gpu_in_the_library_declares_its_overlap():
    for name in library.chip_names():
        spec = library.get_chip(name)
        if spec.vendor in ("NVIDIA", "AMD"):
            assert spec.overlap == setup_pb2.SERIAL_NETWORK, name


def test_no_uncalibrated_chip_defaults_to_perfect_overlap(tmp_path):
    """Issue #35: a chip with no fitted efficiency never assumes that its collectives hide
    (TPU v4 did, and its training rows came out far too fast): every uncalibrated library
    chip of a real vendor declares SERIAL_NETWORK, so a plain TPU v4 setup, with or without
    an execution block, charges its collectives after their kernels; the result says the
    chip is uncalibrated. DFModel's example designs (vendor "example") stream by definition."""
    for name in library.chip_names():
        spec = library.get_chip(name)
        if not calibration_of(spec.accelerator.efficiency).calibrated and spec.vendor != "example":
            assert spec.overlap in UNCALIBRATED_OVERLAPS, name
    for text in ('system { chip: "TPUv4" }', 'system { chip: "TPUv5p" }\nexecution { }'):
        assert mode(text, tmp_path) == ("serial_network", True, True)
    sc = pipeline.load_scenario(tmp_path)
    assert not sc.system.chip.calibration.calibrated


def test_validate_and_run_give_the_same_time_for_the_same_gemm(tmp_path):
    """A 4096^3 BF16 GEMM on one H100: `validate`'s row and a plain setup file naming the
    chip (what a user would write, no execution block) predict the same seconds."""
    row = Case(
        {"id": "G", "kind": "gemm", "chip": "H100-SXM5-80GB", "num_chips": "1",
         "precision": "bf16", "m": "4096", "k": "4096", "n": "4096",
         "metric": "kernel_time_s"}
    )  # fmt: skip
    validated = predict(row, DEV).value
    (tmp_path / "setup.txt").write_text(
        'workload { gemm { M: 4096 K: 4096 N: 4096 } }\nsystem { chip: "H100-SXM5-80GB" }\n',
        encoding="utf-8",
    )
    plan = pipeline.plan(pipeline.load_scenario(tmp_path))
    assert plan.latency_s == validated
    assert plan.overlap == "serial_network"  # written to summary.json as `overlap`
