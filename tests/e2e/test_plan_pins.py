"""Pinned mappings (execution.placement, execution.pin, a dataflow_graph's own fields) and
the pins users get wrong (issue #33 items 6-7): plan.txt keeps the workload and pins every
choice, deleting a pin has it searched again, configuration numbers nobody can hold are
closed up, and a pin that cannot work (a TP that does not divide the heads, an unknown
kernel, a GEMM tile on a norm) is one line of bad input, exit 2."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from solver_fixtures import gemm

from generator.graph import Edge, KernelGraph
from generator.pins import close_config_gaps
from mapshard import solve
from mapshard.cli import EXIT_BAD_INPUT, main
from mapshard.run import run
from solver.search.training_space import zero_stages

DECODE_8B = 'workload { llm_inference { model { hf_model: "Llama-3.1-8B" } phase: DECODE '
DECODE_8B += "batch: 8 context_len: 1024 } }\n"
CHAIN = """
dataflow_graph {
  kernels { name: "a" id: 1 %s gemm_input1_weight { M: 256 K: 256 N: 256 } }
  kernels { name: "b" id: 2 %s gemm_input1_weight { M: 256 K: 256 N: 256 } }
  kernels { name: "c" id: 3 %s gemm_input1_weight { M: 256 K: 256 N: 256 } }
  connections { startIdx: 1 endIdx: 2 }
  connections { startIdx: 2 endIdx: 3 }
}
system { chip: "H100-SXM5-80GB" num_chip: 1 }
execution { execution_style: DATAFLOW }
"""


def _run_error(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line `mapshard run` prints for a setup (exit 2, no traceback)."""
    case = tmp_path / "case"
    case.mkdir(exist_ok=True)
    (case / "setup.txt").write_text(text)
    code = main(["run", str(case), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def _configs(text: str) -> dict[str, int]:
    result = solve(text)
    return dict(zip(result.kernels["name"], result.kernels["config"]))


# --- configuration numbers ---------------------------------------------------------------


def test_every_kernel_pinned_with_configuration_0_empty_is_renumbered() -> None:
    """Was "infeasible: SRAM": pins 1, 1, 3 read as 0, 0, 1."""
    assert _configs(CHAIN % ("config: 1", "config: 1", "config: 3")) == {"a": 0, "b": 0, "c": 1}


def test_a_free_kernel_fills_the_gap_it_can_and_the_rest_closes() -> None:
    """a free, b pinned 2, c pinned 3: a holds configuration 0, nothing can hold 1."""
    assert _configs(CHAIN % ("", "config: 2", "config: 3")) == {"a": 0, "b": 1, "c": 2}


def test_close_config_gaps_keeps_the_numbers_free_kernels_can_hold() -> None:
    x, y, z = gemm("x", 8, 8, 8), gemm("y", 8, 8, 8), gemm("z", 8, 8, 8)
    edges = (Edge("x", "y", "a"), Edge("y", "z", "a"))

    def pinned(*configs: int) -> tuple[int, ...]:
        kernels = tuple(replace(k, pinned_config=c) for k, c in zip((x, y, z), configs))
        graph = close_config_gaps(KernelGraph("g", kernels, edges))
        return tuple(k.pinned_config for k in graph.kernels)

    assert pinned(-1, 1, 2) == (-1, 1, 2)  # x can hold 0
    assert pinned(1, -1, 3) == (0, -1, 2)  # nothing before x: 0 closes; y can hold 2 -> 1
    assert pinned(2, 4, 4) == (0, 1, 1)  # every kernel pinned: 0, 1, ...
    assert pinned(-1, -1, -1) == (-1, -1, -1)


# --- parallel degrees pinned -------------------------------------------------------------


def test_a_tagged_tp_that_does_not_divide_the_heads_is_bad_input(tmp_path, capsys) -> None:
    """Was accepted and solved with tokens split instead: TP 3 on 32 heads."""
    line = _run_error(
        tmp_path,
        DECODE_8B + 'system { chip: "H100-SXM5-80GB" num_chip: 3 topology { kind: SWITCH '
        'degree: 3 link_bw_GBps: 450 parallelism: "TP" } }',
        capsys,
    )
    assert "system topology parallelism: TP 3 does not divide the model's 32 attention heads" in (
        line
    )
    assert line.endswith("valid TP degrees on 3 chips: 1")


def test_a_placed_tp_that_does_not_divide_the_heads_is_bad_input(tmp_path, capsys) -> None:
    line = _run_error(
        tmp_path,
        DECODE_8B + 'system { chip: "H100-SXM5-80GB" num_chip: 6 topology { name: "nvl" '
        'kind: SWITCH degree: 6 link_bw_GBps: 450 } }\nexecution { placement: "TP=nvl:3, '
        'PP=nvl:2" }',
        capsys,
    )
    assert "execution.placement: TP 3 does not divide the model's 32 attention heads" in line
    assert line.endswith("valid TP degrees on 6 chips: 1, 2")


def test_an_ep_that_does_not_divide_the_experts_names_the_valid_ones(tmp_path, capsys) -> None:
    line = _run_error(
        tmp_path,
        'workload { llm_training { model { hf_model: "Mixtral-8x7B-v0.1" } global_batch: 12 '
        "micro_batch: 1 seq_len: 1024 expert_parallel: 3 } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 6 }',
        capsys,
    )
    assert "workload.llm_training.expert_parallel 3 must divide the model's 8 experts" in line
    assert line.endswith("valid: 1, 2, 4, 8")


def test_a_placement_on_levels_the_system_lacks_is_bad_input(tmp_path, capsys) -> None:
    line = _run_error(
        tmp_path,
        DECODE_8B + 'system { chip: "H100-SXM5-80GB" num_chip: 8 }\n'
        'execution { placement: "TP=nvlink:8" }',
        capsys,
    )
    assert "execution.placement: nvlink is not a topology level of this system" in line
    assert "scale_up (8)" in line


# --- pins users get wrong -----------------------------------------------------------------

ONE_H100 = 'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'


@pytest.mark.parametrize(
    "pin, expect",
    [
        ('phase: "prefill" kernel: "q_proj"', "execution.pin[0].phase 'prefill' is not a phase"),
        ('phase: "decode" kernel: "qproj"', "execution.pin[0].kernel 'qproj' is not a kernel"),
        (
            'phase: "decode" kernel: "q_proj" sharding: "hidden+rs" tile: "stream"',
            "execution.pin[0].tile (phase decode, kernel q_proj): 'stream' is not a GEMM tile",
        ),
        (
            'phase: "decode" kernel: "attn_norm" tile: "output_stationary:Tm=8,Tn=8"',
            "'output_stationary:Tm=8,Tn=8' is not a tile of this NORM kernel; give 'stream'",
        ),
        (
            'phase: "decode" kernel: "q_proj" sharding: "tokens+rs"',
            "reduce-scatters over tokens, which is not a reduction dim",
        ),
        ('phase: "decode" kernel: "q_proj" sharding: "vocab"', "'vocab' is not a loop dim"),
        ('phase: "decode" kernel: "q_proj" tile: "big"', "execution.pin[0].tile is not a tile"),
        ('phase: "" kernel: "q_proj"', "execution.pin[0].phase is empty"),
        ('phase: "decode" kernel: "q_proj" config: 2', "kernel by kernel each kernel is its own"),
    ],
)
def test_a_wrong_pin_is_one_line_naming_it(pin: str, expect: str, tmp_path, capsys) -> None:
    line = _run_error(tmp_path, DECODE_8B + ONE_H100 + f"execution {{ pin {{ {pin} }} }}", capsys)
    assert expect in line


def test_a_request_stream_takes_no_kernel_pin(tmp_path, capsys) -> None:
    stream = 'workload { llm_inference { model { hf_model: "Llama-3.1-8B" } input_len: 128 '
    stream += "output_len: 64 stream { num_requests: 4 } } }\n"
    pin = 'execution { pin { phase: "decode" kernel: "q_proj" } }'
    line = _run_error(tmp_path, stream + ONE_H100 + pin, capsys)
    assert "execution.pin pins kernels of a request stream" in line


def test_a_bad_placement_and_a_repeated_pin_are_named(tmp_path, capsys) -> None:
    pin = 'pin { phase: "decode" kernel: "q_proj" }'
    case = tmp_path / "case"
    case.mkdir()
    text = DECODE_8B + ONE_H100 + f'execution {{ placement: "TP 8" {pin} {pin} }}'
    (case / "setup.txt").write_text(text)
    assert main(["run", str(case), "--out", str(tmp_path / "out"), "--quiet"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert 'execution.placement is not a placement, got "TP 8"' in err
    assert "execution.pin[1] pins the kernel of execution.pin[0] again" in err


# --- plan.txt: pins honoured, unpinned by deleting them -----------------------------------


def _plan_txt(tmp_path: Path, scenario: str) -> tuple[str, dict]:
    root = Path(__file__).resolve().parents[2] / "scenarios" / scenario
    out = tmp_path / "first"
    run(root, out)
    return (out / "plan.txt").read_text(), json.loads((out / "summary.json").read_text())


def test_plan_txt_keeps_the_workload_and_deleting_pins_searches_again(tmp_path) -> None:
    """The header's unpinning recipe works: without the placement line and with one
    kernel's pin gone, the run searches the layouts (more than the one pinned) and that
    kernel's choices, and lands on the same optimum."""
    text, first = _plan_txt(tmp_path, "llama31_70b_decode_8xh100")
    assert "workload {" in text and "dataflow_graph" not in text  # the workload kept
    assert "delete what pins it" in text and 'placement: "TP=scale_up:8"' in text
    pinned = solve(text)
    assert pinned.summary["choices_total"] == 1
    assert pinned.summary["latency_s"] == first["latency_s"]
    unpinned = re.sub(r'  placement: "[^"]*"\n', "", text)
    unpinned = re.sub(
        r'  pin \{\n    phase: "decode"\n    kernel: "o_proj"\n[^}]*\}\n', "", unpinned
    )
    assert unpinned.count("pin {") == text.count("pin {") - 1
    again = solve(unpinned)
    assert again.summary["choices_total"] > 1
    assert again.summary["latency_s"] == first["latency_s"]


def test_deleting_a_training_knob_or_a_tile_searches_it_again(tmp_path) -> None:
    """The knobs the search chose are pinned as the llm_training fields; without the
    micro_batch line (and a tile line) the search chooses them again, to the same plan."""
    tiny = (
        'workload { llm_training { model { inline { name: "tiny" architecture: "llama" '
        "hidden_size: 256 num_layers: 4 num_heads: 4 num_kv_heads: 4 intermediate_size: 512 "
        "vocab_size: 1000 ffn: SWIGLU norm: RMSNORM } } global_batch: 16 seq_len: 128 "
        "recompute: RECOMPUTE_NONE zero_stage: 0 virtual_pipeline: 1 } }\n" + ONE_H100
    )
    first = solve(tiny)
    first.write(tmp_path / "r")
    text = (tmp_path / "r" / "plan.txt").read_text()
    assert "workload.llm_training micro_batch: the knob(s) the search chose" in text
    assert solve(text).summary["choices_total"] == 1
    unpinned = re.sub(r"    micro_batch: \d+\n", "", text)
    unpinned = re.sub(r'    tile: "[^"]*"\n', "", unpinned, count=1)
    again = solve(unpinned)
    assert again.summary["choices_total"] == first.summary["choices_total"] > 1
    assert again.summary["latency_s"] == first.summary["latency_s"]


def test_a_graph_kernel_takes_a_reduce_scattered_sharding() -> None:
    """Was refused ("K+rs is not a loop dim"): every word the writer uses is read back."""
    text = (CHAIN % ('sharding: "K+rs"', "", "")).replace("num_chip: 1", "num_chip: 2")
    result = solve(text.replace("DATAFLOW", "KERNEL_BY_KERNEL"))
    assert dict(zip(result.kernels["name"], result.kernels["sharding"]))["a"] == "K+rs"


def test_a_pinned_attention_tile_is_the_one_used(tmp_path) -> None:
    """`attn:Br=..,Bc=..` (the words the writer uses for fused attention) is read back and
    honoured, not replaced by the largest tile."""
    text = DECODE_8B.replace("DECODE", "PREFILL").replace("context_len: 1024", "input_len: 1024")
    text += ONE_H100 + 'execution { pin { phase: "prefill" kernel: "attention" tile: '
    text += '"attn:Br=64,Bc=128" } }'
    result = solve(text)
    tiles = dict(zip(result.kernels["name"], result.kernels["tile"]))
    assert tiles["attention"] == "attn:Br=64,Bc=128"


def test_plan_txt_pins_a_searched_expert_tensor_parallel(tmp_path) -> None:
    """The search chose ETP 1 (the EP group folded over TP), under which the MoE dispatch
    splits tokens; plan.txt left expert_tensor_parallel out, so its run searched ETP
    again and refused the dispatch pins (found by fuzzing)."""
    text = (
        'workload { llm_training { model { hf_model: "gpt-oss-20b" } global_batch: 16 '
        "seq_len: 4096 micro_batch: 1 recompute: RECOMPUTE_NONE zero_stage: 1 "
        "virtual_pipeline: 1 expert_parallel: 8 } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 8 }\n'
        'execution { placement: "TP=scale_up:8" }\n'
    )
    first = solve(text)
    assert "expert_tensor_parallel" in first.plan.training["searched"]
    first.write(tmp_path / "r")
    plan_txt = (tmp_path / "r" / "plan.txt").read_text()
    etp = first.plan.training["expert_tensor_parallel"]
    assert f"    expert_tensor_parallel: {etp}\n" in plan_txt
    again = solve(plan_txt)
    assert again.summary["latency_s"] == first.summary["latency_s"]


def test_a_pin_against_a_sharding_the_workload_fixes_is_bad_input(tmp_path, capsys) -> None:
    """The expert layout (EP 2, ETP 2) fixes the backward dispatch whole ("none"); a pin of
    "experts+rs" halved its all-to-all and ran 0.52% under the proven optimum of the
    layouts the model runs (found by fuzzing). Such a pin is refused, naming the fixed
    value; the fixed value itself is accepted (plan.txt writes it)."""
    text = (
        'workload { llm_training { model { hf_model: "Llama-4-Scout-17B-16E" } '
        "global_batch: 256 seq_len: 1024 micro_batch: 2 sequence_parallel: true "
        "expert_parallel: 2 expert_tensor_parallel: 2 } }\n"
        'system { chip: "GB200" num_chip: 16 }\n'
        'execution { pin { phase: "layer" kernel: "dispatch_bwd" sharding: "%s" } }\n'
    )
    line = _run_error(tmp_path, text % "experts+rs", capsys)
    assert "execution.pin[0].sharding (phase layer, kernel dispatch_bwd): 'experts+rs': " in line
    assert "the workload's rules fix this kernel's sharding; valid: none" in line
    # "tokens" is a loop dim it has, and no sharding the layout runs
    line = _run_error(tmp_path, text % "tokens", capsys)
    assert "'tokens': the workload's rules fix this kernel's sharding; valid: none" in line


def test_a_searched_zero_stage_under_grad_reduce_overlap_is_one_plan_txt_takes(tmp_path) -> None:
    """dp_overlap DP_OVERLAP_GRAD_REDUCE overlaps a ZeRO parameter all-gather, which stage
    0 has not, and a setup pinning both is refused: the search chose stage 0 and plan.txt
    could not be run (found by fuzzing). Now it searches stages 1-3."""
    text = (
        'workload { llm_training { model { inline { name: "tiny" architecture: "llama" '
        "hidden_size: 256 num_layers: 4 num_heads: 4 num_kv_heads: 4 intermediate_size: 512 "
        "vocab_size: 1000 ffn: SWIGLU norm: RMSNORM } } global_batch: 16 seq_len: 128 "
        "micro_batch: 1 recompute: RECOMPUTE_NONE virtual_pipeline: 1 "
        "dp_overlap: DP_OVERLAP_GRAD_REDUCE } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 2 }\n'
        'execution { placement: "DP=scale_up:2" }\n'
    )
    first = solve(text)
    assert first.plan.training["zero_stage"] in (1, 2, 3)
    assert "zero_stage" in first.plan.training["searched"]
    workload = first.scenario.workload
    for replicas, stages in ((2, (1, 2, 3)), (1, (1,))):
        choice = SimpleNamespace(weight_replicas=lambda n=replicas: n)
        assert zero_stages(workload, choice) == stages  # stage 0 was among them
    first.write(tmp_path / "r")
    again = solve((tmp_path / "r" / "plan.txt").read_text())
    assert again.summary["latency_s"] == first.summary["latency_s"]


def test_a_virtual_pipeline_that_splits_layers_is_bad_input(tmp_path, capsys) -> None:
    """16 model chunks on a stage of 8 layers (Llama-3.1-8B, PP 4) ran, credited with the
    bubble of half-layer chunks (found by fuzzing); a chunk is whole layers."""
    text = (
        'workload { llm_training { model { hf_model: "Llama-3.1-8B" } global_batch: 16 '
        "seq_len: 2048 virtual_pipeline: %d micro_batch: 1 zero_stage: 1 "
        "recompute: RECOMPUTE_NONE } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 8 }\n'
        'execution { placement: "PP=scale_up:4, DP=scale_up:2" }\n'
    )
    for vp in (16, 3):
        line = _run_error(tmp_path, text % vp, capsys)
        assert f"virtual_pipeline {vp} does not divide the 8 layers of a pipeline stage" in line
        assert line.endswith("(PP 4 over 32 layers); valid: 1, 2, 4, 8")
