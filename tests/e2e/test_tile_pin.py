"""A tile pinned in the input (plan.txt writes every kernel's chosen tile) is honoured:
re-running plan.txt reproduces the plan, an edited tile is used and priced by DESIGN.md's
formula, a garbage tile is a setup error naming the field, a tile larger than the kernel is
infeasible with the reason."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import mapshard
from schema.errors import InfeasibleError, SetupError

M = K = N = 1024
BYTES = 2  # BF16 default
SETUP = (
    f"workload {{ gemm {{ M: {M} K: {K} N: {N} }} }} "
    'system { chip: "H100-SXM5-80GB" num_chip: 1 }'
)


def _plan_text(tmp_path: Path) -> tuple[str, mapshard.Result]:
    result = mapshard.solve(SETUP)
    result.write(tmp_path / "r")
    return (tmp_path / "r" / "plan.txt").read_text(), result


def _with_tile(plan: str, tile: str) -> str:
    return re.sub(r'tile: "[^"]*"', f'tile: "{tile}"', plan)


def test_plan_txt_reproduces_its_plan(tmp_path: Path) -> None:
    plan, first = _plan_text(tmp_path)
    again = mapshard.solve(plan)
    assert again.summary["latency_s"] == first.summary["latency_s"]
    assert list(again.kernels["tile"]) == list(first.kernels["tile"])


def test_an_edited_tile_is_used_and_priced_by_the_formula(tmp_path: Path) -> None:
    plan, first = _plan_text(tmp_path)
    tm = tn = 64
    pinned = mapshard.solve(_with_tile(plan, f"output_stationary:Tm={tm},Tn={tn}"))
    row = pinned.kernels.iloc[0]
    assert row["tile"] == "output_stationary:Tm=64,Tn=64"
    # output-stationary: Q = MN + MK*ceil(N/Tn) + KN*ceil(M/Tm) elements
    elements = M * N + M * K * math.ceil(N / tn) + K * N * math.ceil(M / tm)
    assert row["dram_bytes"] == elements * BYTES  # 1024^2 * (1 + 16 + 16) * 2 = 69,206,016
    assert elements * BYTES == 69_206_016
    assert pinned.summary["latency_s"] >= first.summary["latency_s"]


def test_a_garbage_tile_names_the_field(tmp_path: Path) -> None:
    plan, _ = _plan_text(tmp_path)
    with pytest.raises(SetupError) as err:
        mapshard.solve(_with_tile(plan, "big please"))
    assert "execution.pin[0].tile is not a tile" in str(err.value)
    assert "output_stationary:Tm=" in str(err.value)


def test_a_tile_larger_than_the_kernel_is_infeasible_with_its_reason(tmp_path: Path) -> None:
    plan, _ = _plan_text(tmp_path)
    with pytest.raises(InfeasibleError) as err:
        mapshard.solve(_with_tile(plan, f"output_stationary:Tm={2 * M},Tn=8"))
    assert err.value.resource == "tile pin" and "kernel gemm pins tile" in str(err.value)
