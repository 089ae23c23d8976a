"""A dependency chain far deeper than Python's recursion limit is read, checked for cycles
and solved (it used to die with RecursionError at ~990 kernels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapshard.cli import EXIT_BAD_INPUT, main


def _chain_setup(n: int, cycle: bool = False, style: str = "KERNEL_BY_KERNEL") -> str:
    kernels = "".join(
        f'kernels {{ name: "k{i}" id: {i} elementwise_input1 {{ outer: 1 M: 64 N: 64 }} }}\n'
        for i in range(1, n + 1)
    )
    links = [(i, i + 1) for i in range(1, n)] + ([(n, 1)] if cycle else [])
    conns = "".join(
        f"connections {{ startIdx: {a} endIdx: {b} id: {i} }}\n" for i, (a, b) in enumerate(links)
    )
    return (
        f"dataflow_graph {{\n{kernels}{conns}}}\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
        f"execution {{ execution_style: {style} num_config: 4 }}\n"
    )


@pytest.mark.slow
def test_a_3000_kernel_chain_solves(tmp_path: Path) -> None:
    (tmp_path / "setup.txt").write_text(_chain_setup(3000))
    out = tmp_path / "r"
    assert main(["run", str(tmp_path), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_kernels"] == 3000 and summary["status"] == "optimal"


def test_a_cycle_through_a_3000_kernel_chain_is_named(tmp_path: Path, capsys) -> None:
    (tmp_path / "setup.txt").write_text(_chain_setup(3000, cycle=True))
    assert main(["run", str(tmp_path), "--out", str(tmp_path / "r"), "--quiet"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "form a cycle: k1 -> k2 -> " in err and "k3000 -> k1" in err


@pytest.mark.slow
def test_a_4000_kernel_dataflow_chain_gets_the_fewest_configurations(tmp_path: Path) -> None:
    """Beyond the exact search's size the chain is cut into the fewest configurations that
    fit the SRAM (here one: every kernel streams rows of 64 elements), said in a warning."""
    (tmp_path / "setup.txt").write_text(_chain_setup(4000, style="DATAFLOW"))
    out = tmp_path / "r"
    assert main(["run", str(tmp_path), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_kernels"] == 4000 and summary["num_configs"] == 1
