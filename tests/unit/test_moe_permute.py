"""An MoE layer as PyTorch runs it (issue #35, MoE layouts): the unfused token permutation
(setup.proto MoePermute SCATTER_ADD) and torch._grouped_mm's expert GEMMs (MoeGemm
TORCH_GROUPED). The H200's atomic-add rate and grouped_mm streaming share re-derived from
the FIT profile and rows, which kernels carry each, and their times by hand."""

from __future__ import annotations

import csv
import json
import random
import statistics
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator import ops_moe
from generator.build import build_workload
from generator.graph import KernelGraph
from mapshard.fidelity.fit import library_system
from schema import setup_pb2
from solver.cost.kernel_times import ATOMIC_SOURCE
from solver.cost.menus import TORCH_GROUPED_SOURCE
from tests.solver_fixtures import one_kernel_menu, one_kernel_options

PROFILE = Path(__file__).parents[1] / "data/profiles/h200/prefill_qwen3_30b_a3b_layer_b1_s2048.json"
# Qwen3-30B-A3B: hidden 2,048, top-8 of 128 experts; 2,048 prompt tokens make 16,384 copies
HIDDEN, TOP_K, TOKENS = 2048, 8, 2048
COPIES = TOKENS * TOP_K


def test_the_h200_rate_is_the_fit_profiles_index_add():
    """M-H200-S003's layer: PyTorch's index_add_ of 16,384 x 2,048 BF16 elements, 265.182 us,
    126.5 G atomic adds per second."""
    events = [e for e in json.loads(PROFILE.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    (index_add,) = [e for e in events if "indexFuncLargeIndex<c10::BFloat16" in e["name"]]
    rate = COPIES * HIDDEN / (index_add["dur"] * 1e-6)
    assert rate == pytest.approx(126.53e9, rel=1e-4)
    chip = library_system("H200-SXM-141GB").chip
    assert chip.efficiency.atomic_add_elem_per_s == pytest.approx(126.5e9)
    assert library_system("H100-SXM5-80GB").chip.efficiency.atomic_add_elem_per_s == 126.5e9


def test_the_h200_grouped_mm_share_is_the_fit_rows_median():
    """torch._grouped_mm with several experts of <= 128 tokens (its 64 x 128 tile kernel):
    the median of the 21 FIT rows' operand rates, 3.008 TB/s, over the 4.8 TB/s peak."""
    path = Path(__file__).parents[1] / "data/validation/validation_public_fit.csv"
    rates = []
    with path.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if not row["id"].startswith("M-H200-U") or int(row["batch"]) < 2:
                continue
            if int(row["m"]) <= 128:
                extra = dict(p.split("=", 1) for p in row["extra_params"].split(";"))
                rates.append(
                    float(extra["derived_operand_bytes"]) / float(extra["derived_kernel_time_s"])
                )
    assert len(rates) == 21
    assert statistics.median(rates) == pytest.approx(3.008e12, rel=1e-3)
    for chip in ("H200-SXM-141GB", "H100-SXM5-80GB"):
        share = library_system(chip).chip.efficiency.grouped_mm_dram_share
        assert share == pytest.approx(statistics.median(rates) / 4.8e12, abs=1e-4)


def _setup(training: bool, permute: int) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
    if training:
        t = s.workload.llm_training
        t.model.hf_model = "Qwen3-30B-A3B"
        t.global_batch, t.micro_batch, t.seq_len = 1, 1, TOKENS
        t.moe_permute = permute
    else:
        i = s.workload.llm_inference
        i.model.hf_model = "Qwen3-30B-A3B"
        i.phase, i.batch, i.input_len = setup_pb2.PREFILL, 1, TOKENS
        i.moe_permute = permute
    return s


def _layer(s: setup_pb2.Setup) -> KernelGraph:
    w = build_workload(s, Path("setup.txt"), 1)
    return next(p.graph for p in w.phases if any(k.name == "combine" for k in p.graph.kernels))


DEFAULT, FUSED, SCATTER = (
    setup_pb2.MOE_PERMUTE_DEFAULT,
    setup_pb2.MOE_PERMUTE_FUSED,
    setup_pb2.MOE_PERMUTE_SCATTER_ADD,
)


@pytest.mark.parametrize(
    ("training", "permute", "atomic"),
    [
        (True, DEFAULT, {"combine", "dispatch_bwd"}),  # Megatron-core: no permute fusion
        (True, SCATTER, {"combine", "dispatch_bwd"}),
        (True, FUSED, set()),
        (False, DEFAULT, set()),  # engines: fused kernels
        (False, SCATTER, {"combine"}),
    ],
)
def test_scatter_adds_carry_every_routed_copys_hidden_elements(training, permute, atomic):
    layer = _layer(_setup(training, permute))
    adds = {k.name: k.atomic_adds for k in layer.kernels if k.atomic_adds}
    assert set(adds) == atomic
    assert set(adds.values()) <= {COPIES * HIDDEN}  # 33,554,432 each
    # the probabilities scale the copies in a pass of their own only when unfused, broadcast
    # over hidden: PyTorch's non-vectorized elementwise path each way
    scale = {k.name: k.strided for k in layer.kernels if k.name.startswith("routed_scale")}
    assert bool(scale) == bool(atomic) and all(scale.values())
    assert ("routed_scale_bwd" in scale) == (training and bool(atomic))


def test_a_combine_takes_its_atomic_adds_at_the_chips_rate():
    """2,048 x 8 x 2,048 = 33,554,432 adds at 126.5 G/s = 265.25 us, against 134 MB of
    copies and tokens moved at the DRAM rate (~31 us)."""
    kernel = _layer(_setup(False, SCATTER)).kernel("combine")
    system = library_system("H200-SXM-141GB")
    (option,) = one_kernel_options(kernel, system)
    assert option.compute_s == pytest.approx(COPIES * HIDDEN / 126.5e9, rel=1e-9)
    assert option.time_source == ATOMIC_SOURCE


def _decode_layer(permute: int) -> KernelGraph:
    """One decode step of one sequence (batch 1 at 4,096 tokens of context) with
    torch._grouped_mm experts: the launch-bound case."""
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
    i = s.workload.llm_inference
    i.model.hf_model = "Qwen3-30B-A3B"
    i.phase, i.batch, i.input_len, i.output_len = setup_pb2.DECODE, 1, 4096, 1
    i.moe_permute, i.moe_gemm = permute, setup_pb2.MOE_GEMM_TORCH_GROUPED
    return _layer(s)


# launches of PyTorch's unfused routing, counted in benchmarks/gpu_moe.moe_ffn's ops:
# topk = float(), softmax, topk (select + sort), sum, divide; dispatch = argsort, // k,
# index_select, ones_like, zeros, scatter_add_, cumsum (2), .to(int32); routed_scale =
# probs[order], .to(bf16), multiply; combine = zeros_like, index_add_; each
# torch._grouped_mm = its argument kernel + the GEMM
EAGER = {"topk": 6, "dispatch": 9, "routed_scale": 3, "combine": 2}
GROUPED = {"expert_gate_up": 2, "expert_down": 2}


@pytest.mark.parametrize("permute", [SCATTER, FUSED])
def test_pytorch_routing_pays_a_kernel_overhead_per_launch(permute):
    """Unfused, each routing kernel stands for its PyTorch ops' launches and its menu
    carries that many of the H200's 2.0 us kernel overheads (topk: 12 us); fused (an
    engine's routing kernels), one each. torch._grouped_mm's GEMMs: two launches either
    way; every other kernel one."""
    layer = _decode_layer(permute)
    expected = {**(EAGER if permute == SCATTER else {}), **GROUPED}
    launches = {k.name: k.launches for k in layer.kernels if k.launches != 1}
    assert launches == expected
    system = library_system("H200-SXM-141GB")
    for name, count in {**expected, "router": 1}.items():
        menu = one_kernel_menu(layer.kernel(name), system)
        assert menu.overhead_s == pytest.approx(count * 2.0e-6, rel=1e-12)


def _expert_gate_up(tokens: int, moe_gemm: int):
    s = _setup(False, DEFAULT)
    s.workload.llm_inference.input_len = tokens
    s.workload.llm_inference.moe_gemm = moe_gemm
    return _layer(s).kernel("expert_gate_up")


def test_torch_grouped_mm_streams_its_operands_at_the_chips_share():
    """2,048 tokens x top-8 over 128 experts: 128 tokens each, its small-tile kernel. Every
    expert's gate/up weights 128 x 2,048 x 1,536 x 2 B, the copies in 16,384 x 2,048 x 2 B
    and out 16,384 x 1,536 x 2 B: 922,746,880 B at 0.6267 x 4.8 TB/s = 306.7 us (the FIT
    profile of this layer, M-H200-S003's, times the kernel at 355.7 us)."""
    kernel = _expert_gate_up(TOKENS, setup_pb2.MOE_GEMM_TORCH_GROUPED)
    assert kernel.torch_grouped and kernel.fused_experts
    system = library_system("H200-SXM-141GB")
    (option,) = one_kernel_options(kernel, system)
    assert option.compute_s == pytest.approx(922_746_880 / (0.6267 * 4.8e12), rel=1e-9)
    assert option.time_source == TORCH_GROUPED_SOURCE


def test_an_engines_grouped_kernel_and_the_large_tile_are_not_floored():
    """MOE_GEMM_GROUPED keeps the fitted model; 4,096 tokens make 256 per expert, where
    torch._grouped_mm takes its 128 x 256 tile kernel, priced as any grouped GEMM."""
    system = library_system("H200-SXM-141GB")
    engine = _expert_gate_up(TOKENS, setup_pb2.MOE_GEMM_GROUPED)
    large = _expert_gate_up(2 * TOKENS, setup_pb2.MOE_GEMM_TORCH_GROUPED)
    assert not engine.torch_grouped and large.torch_grouped
    for kernel in (engine, large):
        assert all(
            o.time_source != TORCH_GROUPED_SOURCE for o in one_kernel_options(kernel, system)
        )


def test_a_random_family_of_moe_layers_prices_both_pytorch_mechanisms():
    """Inline MoE layers of random shape (experts, top-k, hidden, expert FFN, prompt tokens)
    prefilled on H200 with PyTorch's ops and torch._grouped_mm: the combine carries tokens x
    k x hidden atomic adds and takes them at 126.5 G/s when that is the longer; the expert
    GEMMs stream at 0.6267 x 4.8 TB/s exactly when the kernel runs its small tile, at an
    average of 128 tokens per expert or fewer (ceil(tokens x k / experts))."""
    rng = random.Random(2026)
    system = library_system("H200-SXM-141GB")
    small = large = 0
    for _ in range(12):
        experts = rng.choice((8, 16, 32, 64))
        k, hidden = rng.choice((1, 2, 4, 8)), 64 * rng.randint(4, 48)
        ffn, tokens = 64 * rng.randint(2, 40), 16 * rng.randint(1, 256)
        s = setup_pb2.Setup()
        s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
        i = s.workload.llm_inference
        text = (
            f'name: "moe" architecture: "mixtral" hidden_size: {hidden} num_layers: 1 '
            f"num_heads: 4 num_kv_heads: 4 head_dim: 64 intermediate_size: {ffn} "
            f"vocab_size: 1000 ffn: SWIGLU norm: RMSNORM num_experts: {experts} "
            f"experts_per_token: {k} moe_intermediate_size: {ffn}"
        )
        text_format.Parse(text, i.model.inline)
        i.phase, i.batch, i.input_len = setup_pb2.PREFILL, 1, tokens
        i.moe_gemm, i.moe_permute = setup_pb2.MOE_GEMM_TORCH_GROUPED, SCATTER
        layer = _layer(s)
        combine = layer.kernel("combine")
        assert combine.atomic_adds == tokens * k * hidden
        (option,) = one_kernel_options(combine, system)
        assert option.compute_s >= tokens * k * hidden / 126.5e9 * (1 - 1e-9)
        # whatever the shape, each routing kernel and grouped GEMM carries its launches'
        # kernel overheads (2.0 us each on H200; the dispatch's argsort 11 past 4,096
        # ids), every other kernel one
        launches = {**EAGER, **GROUPED, "dispatch": ops_moe.dispatch_launches(tokens * k)}
        for kernel in layer.kernels:
            count = launches.get(kernel.name, 1)
            menu = one_kernel_menu(kernel, system)
            assert menu.overhead_s == pytest.approx(count * 2.0e-6, rel=1e-12), kernel.name
        per_expert = -(-tokens * k // experts)
        for name in ("expert_gate_up", "expert_down"):
            options = one_kernel_options(layer.kernel(name), system)
            streamed = {o.time_source == TORCH_GROUPED_SOURCE for o in options}
            if per_expert > 128:
                assert streamed == {False}
                large += 1
                continue
            small += 1
            for o in options:  # at least the bytes at the share; exactly, where they bind
                floor = sum(b for _, b in o.sizes) / (0.6267 * 4.8e12)
                assert o.compute_s >= floor * (1 - 1e-9)
                assert (o.time_source == TORCH_GROUPED_SOURCE) == (o.compute_s == floor)
    assert small and large  # the family covers both kernels


DECODE_PROFILE = PROFILE.with_name("decode_mixtral_8x7b_layer_b64_kv4096.json")
RADIX = ("DeviceRadixSortOnesweepKernel", "DeviceRadixSortHistogramKernel")
RADIX += ("DeviceRadixSortExclusiveSumKernel", "fill_reverse_indices_kernel")


def _kernel_names(profile: Path, *parts: str) -> list[str]:
    events = json.loads(profile.read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "kernel"]
    return [n for n in names if any(part in n for part in parts)]


def test_an_argsort_past_the_small_sort_launches_cubs_radix_passes():
    """The FIT profiles: the prefill's argsort of 2,048 x 8 = 16,384 int64 expert ids runs
    CUB's radix sort, eleven launches (index fill, histogram, exclusive sum, eight 8-bit
    onesweep passes); a decode step's 64 x 2 = 128 ids one in-place sort. The unfused
    dispatch counts them: 9 launches up to 4,096 ids, 19 beyond."""
    prefill = _kernel_names(PROFILE, *RADIX)
    assert len(prefill) == ops_moe.RADIX_ARGSORT_LAUNCHES == 11
    assert sum("Onesweep" in n for n in prefill) == 64 // 8
    assert not _kernel_names(PROFILE, "radixSortKVInPlace")
    assert not _kernel_names(DECODE_PROFILE, *RADIX)  # top-k's bitonic sort aside:
    assert len(_kernel_names(DECODE_PROFILE, "radixSortKVInPlace<-2, -1, 32, 4, long")) == 1
    assert ops_moe.dispatch_launches(4096) == EAGER["dispatch"] == 9
    assert ops_moe.dispatch_launches(4097) == 9 + 10
    assert _layer(_setup(False, SCATTER)).kernel("dispatch").launches == 19  # 16,384 ids
    assert _decode_layer(SCATTER).kernel("dispatch").launches == 9  # 8 ids
