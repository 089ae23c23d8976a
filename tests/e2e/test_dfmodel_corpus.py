"""DFModel's own input files (tests/data/dfmodel, origins in SOURCES.md) parse unchanged and
run end to end through the product, each plan no faster than the roofline of its FLOPs.

The roofline is derived here from the file alone, not from MapShard's generator: a GEMM
variant does 2 x outer x M x K x N FLOP, an element-wise one outer x M x N; an LLM graph
(execution.llm) runs num_layer / num_layer_in_graph times per sequence for
global_batch_size sequences; no chip beats 2 x core x systolic_width x systolic_height x
freq FLOP/s (DFModel's own GFLOPS formula)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard import pipeline
from mapshard.cli import main
from mapshard.run import run
from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import load_setup

DATA = Path(__file__).resolve().parents[1] / "data" / "dfmodel"
FILES = sorted(p.name for p in DATA.glob("*.txt"))
# DFModel's lane/stage SSM study leaves sram_cap out: DFModel's equations read that as no
# limit (--cost-model dfmodel runs it); the native model refuses it (SOURCES.md)
REFUSED = {"ssm_mamba_hsscan_256k.txt": "system.accelerator.sram_cap must be > 0"}
# GPT-3 1T training on 1024 chips: DFModel counts no gradients or optimizer state; the
# native model does, and 107.5 GiB (115.4 GB) per chip exceeds the 96 GiB DRAM: one
# infeasible line
NATIVE_INFEASIBLE = {"llm_dse_2d_torus_hbm_nvlink.txt": "needs 107.5 GiB per chip"}
# run natively with hand estimates in tests/e2e/test_dfmodel_parity.py (7 s: not twice)
NATIVE_ELSEWHERE = {"damsim_dlrm_test_fwdbwd.txt"}
# PP 128 x 3072 micro-batches: the plan is checked, the 262,144-slice trace not written
NO_FOLDER = {"llm_dse_2d_torus_hbm_nvlink.txt"}
RUNS = [f for f in FILES if f not in REFUSED | NATIVE_INFEASIBLE.keys() | NATIVE_ELSEWHERE]
# every input taken from DFModel's repository: the files above and fft_8/ (ORIGIN.md)
DFMODEL_RUNS = FILES + ["fft_8"]


def test_the_corpus_has_every_family_and_twenty_files_running_in_both_models() -> None:
    """LLM training (llm_dse: DFModel's LLM/DSE folder) and serving (genz: LLM_Serving),
    DLRM, HPL, FFT (fft_*: its FFT/DSE folders), SSM, DAMSim; the Examples folder's input is
    scenarios/dfmodel_gpt3_1t_sn30 (tests/e2e/test_dfmodel_runs.py)."""
    families = {f.split("_")[0] if not f.startswith("damsim") else f.split("_")[1] for f in FILES}
    assert {"fft", "hpl", "dlrm", "llm", "ssm", "genz"} <= families
    assert any(f.startswith("damsim") for f in FILES)
    both = [f for f in DFMODEL_RUNS if f not in REFUSED]
    assert len(both) >= 20
    listed = (DATA / "SOURCES.md").read_text()
    assert all(f"| {f} |" in listed for f in FILES)


@pytest.mark.parametrize("name", FILES)
def test_every_file_parses_unchanged(name: str) -> None:
    setup, _ = load_setup(DATA / name)
    assert setup.dataflow_graph.kernels


def _roofline_s(setup: setup_pb2.Setup) -> float:
    flop = 0.0
    for k in setup.dataflow_graph.kernels:
        variant = k.WhichOneof("kernel_variant")
        v = getattr(k, variant)
        outer = v.outer if v.HasField("outer") else 1
        flop += 2 * outer * v.M * v.K * v.N if variant.startswith("gemm") else outer * v.M * v.N
    ex = setup.miscellany if setup.HasField("miscellany") else setup.execution
    if ex.HasField("llm"):
        flop *= ex.llm.num_layer / max(ex.llm.num_layer_in_graph, 1) * ex.llm.global_batch_size
    a = setup.system.accelerator
    peak = 2 * a.core * a.systolic_width * a.systolic_height * a.freq * 1e9
    return flop / (setup.system.num_chip * peak)


def _run(name: str, tmp_path: Path, cost_model: str | None = None) -> None:
    """`mapshard run`'s spine: load, resolve, generate, solve, re-check, write."""
    setup, _ = load_setup(DATA / name)
    if name in NO_FOLDER:
        loaded = pipeline.load(DATA / name, cost_model)
        plan = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))
        assert plan.stats.status == "optimal"  # on the work budgets: at any load
        assert plan.latency_s >= _roofline_s(setup) * (1 - 1e-9)
        return
    result = run(DATA / name, tmp_path / "out", cost_model=cost_model)
    plan = result.plan
    assert plan.stats.status == "optimal"  # on the work budgets: at any load
    assert math.isfinite(plan.latency_s) and plan.latency_s > 0
    assert plan.latency_s >= _roofline_s(setup) * (1 - 1e-9)
    final = (tmp_path / "out" / "dse_final.txt").read_text()
    back = text_format.Parse(final, setup_pb2.Setup())
    assert [k.name for k in back.dataflow_graph.kernels] == [
        k.name for k in setup.dataflow_graph.kernels
    ]


@pytest.mark.parametrize(
    ("name", "model"),
    [(f, "native") for f in RUNS] + [(f, "dfmodel") for f in DFMODEL_RUNS],
)
def test_every_file_runs_end_to_end_in_both_models(name: str, model: str, tmp_path: Path) -> None:
    """Native: ~4 s on one core for all (each proven optimal on its work budgets); DFModel's
    equations: ~0.3-2 s each, ~9 s for the 38-kernel Hyena study (every num_tile count
    where a shard changes, each with every allowed assignment of its 3 configurations)."""
    _run(name, tmp_path, model)
    if name not in NO_FOLDER:
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["cost_model"] == model


@pytest.mark.parametrize("name", sorted(NATIVE_INFEASIBLE))
def test_a_file_the_native_model_cannot_fit_says_why_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", str(DATA / name), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert len(err) == 1 and NATIVE_INFEASIBLE[name] in err[0]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_file_outside_the_physical_model_is_refused_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", str(DATA / name), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and str(DATA / name) in err[0] and REFUSED[name] in err[0]
    with pytest.raises(SetupError):
        pipeline.load_scenario(DATA / name)


def test_dse_final_records_the_mapping_in_dfmodels_shape(tmp_path: Path) -> None:
    """DAMSim's DLRM 2x4: a chain MLP_1 -> ... -> MLP_8 of 8000 x 8000 x 16 GEMMs on 8 chips.
    A chain's topological numbers are 0..7 and every edge's buffer depth is 1 - 0 + 1 = 2;
    each edge carries its producer's 256,000-byte output, 256,000 / 8 = 32,000 bytes per
    chip when the producer is split over the 8 chips; a split dim holds ceil(8000 / 8) =
    1000 (or 16 / 8 = 2) per chip. One batch item per step (global_batch_size 1), so the
    chain is not replicated over the chips (a 4096-item batch puts one copy on each chip,
    8000 x 8000 whole: test_native_hand_estimates.py)."""
    text = (DATA / "damsim_dlrm_2x4.txt").read_text()
    assert "global_batch_size: 4096" in text
    src = tmp_path / "setup.txt"
    src.write_text(text.replace("global_batch_size: 4096", "global_batch_size: 1"))
    result = run(src, tmp_path / "out")
    final = text_format.Parse((tmp_path / "out" / "dse_final.txt").read_text(), setup_pb2.Setup())
    tp = result.plan.parallelism["tp"]
    assert tp == 8  # the plan puts all 8 chips on the chain (checked, not assumed)
    chosen = {k.name: k for p in result.plan.phases for k in p.kernels}
    full = {"outer_M": 8000, "K": 8000, "N": 16}
    split = {}
    for i, kernel in enumerate(final.dataflow_graph.kernels):
        body = kernel.gemm_input1_weight
        assert kernel.topological_number == i and kernel.config == chosen[kernel.name].config
        dim = chosen[kernel.name].sharding.split("+")[0]
        want = dict(full)
        key = {"M": "outer_M", "K": "K", "N": "N"}.get(dim)
        if key:
            want[key] = -(-full[key] // 8)
        assert (body.shard_outer_M, body.shard_K, body.shard_N) == (
            want["outer_M"],
            want["K"],
            want["N"],
        )
        split[kernel.id] = key is not None
    for c in final.dataflow_graph.connections:
        assert c.buffer_depth == 2 and c.tensor_size == 256000.0
        assert c.shard_tensor_size == (32000.0 if split[c.startIdx] else 256000.0)
        assert (c.startName, c.endName) == (f"MLP_{c.startIdx}", f"MLP_{c.endIdx}")
