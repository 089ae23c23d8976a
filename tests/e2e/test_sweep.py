"""Sweeps: parsing axes, combine modes and filters; setting fields; the results store; a
small sweep in two local worker processes equals the same points solved one by one here.

Helpers (`write_sweep`, `TINY_LLM`, `GEMM`, `comparable`) are shared by the other
test_sweep_* files.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard.cli import main
from mapshard.sweeps import expand_points, load_sweep, run_sweep
from mapshard.sweeps.backends import LocalBackend
from mapshard.sweeps.cli import cluster_warning
from mapshard.sweeps.front_svg import render_front
from mapshard.sweeps.metrics import TIMING_COLUMNS
from mapshard.sweeps.pareto import PLOTS, pareto_mask
from mapshard.sweeps.store import ResultsStore, csv_line, read_rows
from mapshard.sweeps.worker import Job, solve_point
from schema import setup_pb2
from schema.errors import SetupError

SMALL_CHIP = """
    accelerator { core: 4 systolic_width: 16 systolic_height: 16 sram_cap: 1048576 freq: 1.0 }
    memory { dram_bw: 100 dram_cap: 1e9 }"""
GEMM = f"""inline {{
  workload {{ gemm {{ M: 256 K: 256 N: 256 }} }}
  system {{ num_chip: 1 {SMALL_CHIP} }}
  cost {{ accelerator_price: 1000 accelerator_power: 50 dram_unit_price: 1 }}
}}
"""
TINY_LLM = f"""inline {{
  name: "tiny"
  workload {{ llm_inference {{
    model {{ inline {{ name: "tiny" architecture: "llama" hidden_size: 256 num_layers: 2
      num_heads: 4 num_kv_heads: 2 intermediate_size: 512 vocab_size: 1024 ffn: SWIGLU
      norm: RMSNORM }} }}
    phase: REQUEST batch: 4 input_len: 64 output_len: 16 }} }}
  system {{ num_chip: 2 {SMALL_CHIP}
    topology {{ kind: SWITCH degree: 2 link_bw_GBps: 50 }} }}
  cost {{ accelerator_price: 1000 accelerator_power: 50 dram_unit_price: 1 }}
}}
"""


def write_sweep(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sweep.txt"
    path.write_text(text, encoding="utf-8")
    return path


def comparable(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    """Rows by point_id without the wall-clock columns."""
    return {r["point_id"]: {k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows}


# ---------------------------------------------------------------------------------------
# (a) parsing: axes, combine, filters, invalid paths
# ---------------------------------------------------------------------------------------


def test_axes_values_and_ranges(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path,
        GEMM
        + """
axis { field: "workload.gemm.M" values: ["128", "1e3"] name: "M" }
axis { field: "system.memory.dram_bw" range { start: 50 stop: 400 factor: 2 } }
axis { field: "workload.gemm.N" range { start: 64 stop: 256 step: 64 } }
axis { field: "execution.execution_style" values: ["dataflow"] }
""",
    )
    spec = load_sweep(path)
    assert [a.values for a in spec.axes] == [
        (128, 1000),
        (50.0, 100.0, 200.0, 400.0),
        (64, 128, 192, 256),
        (setup_pb2.DATAFLOW,),
    ]
    assert spec.axis_names[1] == "system.memory.dram_bw"
    assert spec.num_points == 2 * 4 * 4
    points, repeats = expand_points(spec)
    assert len(points) == 32 and repeats == 0
    assert points[0].labels == ("128", "50", "64", "DATAFLOW")
    assert points[-1].labels == ("1000", "400", "256", "DATAFLOW")
    assert len({p.point_id for p in points}) == 32
    # same setup -> same id, in any run
    assert [p.point_id for p in expand_points(load_sweep(path))[0]] == [p.point_id for p in points]
    # workload key: hardware axes share a workload, workload axes do not
    by_key: dict[str, set[str]] = {}
    for p in points:
        by_key.setdefault(p.workload_key, set()).add(p.labels[1])
    assert len(by_key) == 2 * 4 and all(len(v) == 4 for v in by_key.values())


def test_zip_needs_equal_lengths(tmp_path: Path) -> None:
    ok = write_sweep(
        tmp_path / "ok",
        GEMM
        + """combine: ZIP
axis { field: "workload.gemm.M" values: ["128", "256"] }
axis { field: "workload.gemm.N" values: ["64", "32"] }
""",
    )
    spec = load_sweep(ok)
    assert spec.num_points == 2
    assert [p.labels for p in expand_points(spec)[0]] == [("128", "64"), ("256", "32")]
    bad = write_sweep(
        tmp_path / "bad",
        GEMM
        + """combine: ZIP
axis { field: "workload.gemm.M" values: ["128", "256"] }
axis { field: "workload.gemm.N" values: ["64"] }
""",
    )
    with pytest.raises(SetupError, match="ZIP needs axes of equal length"):
        load_sweep(bad)


def test_invalid_paths_are_rejected_with_the_nearest_valid_path(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path,
        GEMM
        + """
axis { field: "workload.gemm.M" values: ["128"] }
axis { field: "system.memory.dram_bww" values: ["1"] }
axis { field: "sytem.chip" values: ["H100-SXM5-80GB"] }
axis { field: "system.chip" values: ["H100-SXM5", "H10O-SXM5-80GB"] }
axis { field: "workload.gemm.K" values: ["many"] }
filter { metric: "system_cots" max: 5 }
""",
    )
    with pytest.raises(SetupError) as err:
        load_sweep(path)
    problems = err.value.problems
    assert len(problems) == 5, problems
    assert all(p.startswith(f"{path}: ") for p in problems)
    assert (
        'axis[1]: unknown field path "system.memory.dram_bww"; did you mean '
        '"system.memory.dram_bw"?' in problems[0]
    )
    assert "axis[2]" in problems[1] and 'did you mean "system"' in problems[1]
    assert (
        "axis[3]" in problems[2]
        and '"H10O-SXM5-80GB" is not in the hardware library' in problems[2]
        and "H100-SXM5-80GB" in problems[2]
    )
    assert "axis[4]" in problems[3] and '"many" is not an integer' in problems[3]
    assert 'filter[0]: metric "system_cots"' in problems[4] and '"system_cost"' in problems[4]
    assert main(["sweep", str(path), "--quiet"]) == 2


def test_invalid_points_fail_and_pre_solve_filters_skip(tmp_path: Path) -> None:
    """A point invalid only beside some value of another axis is a failed row; a value
    that fails every point it is in is the sweep file's mistake (tests/malformed_sweep)."""
    level = "{kind: SWITCH degree: %d link_bw_GBps: 50}"
    path = write_sweep(
        tmp_path,
        GEMM
        + f"""
axis {{ field: "system.num_chip" values: ["1", "2"] }}
axis {{ field: "system.topology" name: "level" values: ["{level % 1}", "{level % 2}"] }}
filter {{ metric: "system_cost" max: 1200 }}
""",
    )
    points, _ = expand_points(load_sweep(path))
    ok, failed_1, failed_2, filtered = points
    assert ok.row is None  # to be solved
    for failed in (failed_1, failed_2):
        assert failed.row is not None and failed.row["status"] == "failed"
        assert "system.num_chip" in failed.row["reason"]
    # price 1000 + DRAM 100 GB/s x $1 per chip: 2 x 1100
    assert filtered.row is not None and filtered.row["status"] == "filtered"
    assert filtered.row["reason"] == "system_cost 2200 > max 1200"
    assert float(filtered.row["system_cost"]) == 2200.0
    bad = write_sweep(
        tmp_path / "bad",
        GEMM + 'axis { field: "system.memory.dram_bw" values: ["-5", "100", "400"] }\n',
    )
    with pytest.raises(SetupError, match='value "-5" fails every point it is in'):
        expand_points(load_sweep(bad))


def test_a_cost_filter_cannot_judge_an_unpriced_chip(tmp_path: Path) -> None:
    """No price in the library or the setup: the System Cost is unknown, so a pre-solve
    filter on it keeps the point (as a solved point's filter does) and the cell stays
    empty, never $0. It filtered the point as "system_cost 0 < min 100" (found by
    fuzzing)."""
    unpriced = GEMM.replace("accelerator_price: 1000 ", "").replace("dram_unit_price: 1", "")
    path = write_sweep(tmp_path, unpriced + 'filter { metric: "system_cost" min: 100 }\n')
    (point,), _ = expand_points(load_sweep(path))
    assert point.row is None  # to be solved, not filtered
    outcome = run_sweep(path, out=tmp_path / "out", workers=1, quiet=True)
    (row,) = read_rows(outcome.out / "results.csv")
    assert row["status"] == "optimal" and row["system_cost"] == ""
    assert row["cost_basis"] == "not priced"


def test_a_message_an_axis_creates_is_blamed_on_the_axis(tmp_path: Path) -> None:
    """An axis on the link bandwidth of a base without a topology creates a level with no
    kind: every point fails, and the message blamed the base, which runs alone (found by
    fuzzing)."""
    path = write_sweep(
        tmp_path, GEMM + 'axis { field: "system.topology.link_bw_GBps" values: ["100", "200"] }\n'
    )
    with pytest.raises(SetupError) as err:
        expand_points(load_sweep(path))
    (line,) = err.value.problems
    assert "every point fails, though the inline base alone is valid" in line
    assert "system.topology[0].kind is missing" in line
    assert "set by the axis system.topology.link_bw_GBps" in line


def test_a_bad_new_sweep_stops_the_workers_it_started(tmp_path: Path) -> None:
    """A new sweep starts its workers before its points expand; a sweep file refused then
    leaves no worker behind (children of earlier tests in this process, still exiting on a
    loaded machine, are not this sweep's)."""
    earlier = set(multiprocessing.active_children())
    bad = write_sweep(
        tmp_path, GEMM + 'axis { field: "system.memory.dram_bw" values: ["-5", "100"] }\n'
    )
    with pytest.raises(SetupError, match="fails every point it is in"):
        run_sweep(load_sweep(bad), out=tmp_path / "out", workers=2, quiet=True)
    # each started worker is joined by the sweep's cleanup (SIGTERM, then SIGKILL after
    # TERM_GRACE_S); a straggler is given the time a loaded machine may take to reap it
    # (once seen beside two busy loops), never more: a worker left running fails
    left = set(multiprocessing.active_children()) - earlier
    waited = time.monotonic() + 30.0
    while left and time.monotonic() < waited:
        time.sleep(0.1)
        left = set(multiprocessing.active_children()) - earlier
    assert left == set()


def test_workers_started_early_are_no_more_than_the_points() -> None:
    """A new sweep of fewer points than workers starts one worker per point, as the pool
    would on its first batches."""
    before = len(multiprocessing.active_children())
    backend = LocalBackend(4)
    try:
        backend.start(2)
        assert len(multiprocessing.active_children()) - before == 2
    finally:
        backend.close()
    assert len(multiprocessing.active_children()) == before


def test_store_drops_a_partial_last_line_and_rejects_other_sweeps(tmp_path: Path) -> None:
    cols = ("point_id", "index", "status")
    path = tmp_path / "results.csv"
    store = ResultsStore(path, cols)
    assert store.open() == {}
    store.append({"point_id": "a", "index": "0", "status": "optimal"})
    store.append({"point_id": "b", "index": "1", "status": "failed"})
    store.close()
    with open(path, "ab") as f:
        f.write(b"c,2,opt")  # a row cut by a kill
    again = ResultsStore(path, cols)
    rows = again.open()
    assert list(rows) == ["a", "b"]
    assert path.read_text() == csv_line(cols) + "a,0,optimal\nb,1,failed\n"
    with pytest.raises(SetupError, match="another `mapshard sweep` is writing"):
        ResultsStore(path, cols).open()  # one driver per results file
    again.close()
    with pytest.raises(SetupError, match="not this sweep's"):
        ResultsStore(path, ("point_id", "index", "other")).open()


@pytest.mark.parametrize(
    "bad, why",
    [
        ("a,0,optimal\n", "stored already"),  # a duplicate of a stored point
        ("c,2,optimal,extra\n", "4 cells"),  # extra cells
        ("d,3\n", "2 cells"),  # missing cells
        ("e,4,garbage\n", "status 'garbage'"),  # not a status
        ("f,x,optimal\n", "non-numeric index"),
    ],
)
def test_resume_removes_rows_that_are_not_finished_points(
    tmp_path: Path, bad: str, why: str
) -> None:
    """Every class of damaged row is reported and removed from the file, never kept or
    read back twice; the good rows stay."""
    cols = ("point_id", "index", "status")
    path = tmp_path / "results.csv"
    path.write_text(csv_line(cols) + "a,0,optimal\n" + bad + "b,1,failed\n")
    store = ResultsStore(path, cols)
    rows = store.open()
    store.close()
    assert list(rows) == ["a", "b"]
    assert len(store.dropped) == 1 and why in store.dropped[0] and "line 3" in store.dropped[0]
    assert path.read_text() == csv_line(cols) + "a,0,optimal\nb,1,failed\n"
    again = ResultsStore(path, cols)
    assert list(again.open()) == ["a", "b"] and again.dropped == []
    again.close()


def test_two_axes_on_one_field_are_refused(tmp_path: Path) -> None:
    sweep = write_sweep(
        tmp_path,
        GEMM
        + 'axis { field: "workload.gemm.M" values: ["64", "128"] }\n'
        + 'axis { field: "workload.gemm.M" name: "m2" values: ["256"] }\n',
    )
    with pytest.raises(SetupError, match=r"axis\[1\]: sets workload.gemm.M, which axis\[0\]"):
        load_sweep(sweep)


def test_a_plain_tcp_cluster_off_this_machine_is_warned_about() -> None:
    for quiet in (
        "tcp://127.0.0.1:8786",
        "tcp://localhost:8786",
        "tcp://[::1]:1",
        "tls://10.1.2.3:8786",
    ):
        assert cluster_warning(quiet) == "", quiet
    for loud in ("tcp://10.1.2.3:8786", "scheduler.example:8786"):
        assert "tls://" in cluster_warning(loud), loud


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("garbage", "missing port number"),
        ("tcp://127.0.0.1", "missing port number"),
        ("http://h:1", "unknown address scheme 'http'"),
        ("tls://127.0.0.1:1", "ssl_context"),  # TLS without Dask's TLS configuration
    ],
)
def test_a_cluster_address_that_is_no_address_is_one_line(
    address: str, said: str, tmp_path: Path, capsys
) -> None:
    """These raised a traceback from distributed.Client (found by fuzzing)."""
    pytest.importorskip("distributed")
    sweep = write_sweep(tmp_path, GEMM + 'axis { field: "workload.gemm.M" values: ["256"] }\n')
    code = main(["sweep", str(sweep), "--cluster", address, "--out", str(tmp_path / "o")])
    lines = capsys.readouterr().err.strip().splitlines()
    err = [line for line in lines if not line.startswith("warning: ")]  # plain TCP: said
    assert code == 2 and len(err) == 1 and "Traceback" not in str(lines), lines
    assert f"--cluster {address}: not a usable Dask scheduler address" in err[0]
    assert said in err[0]


def test_pareto_mask() -> None:
    xs = [1.0, 2.0, 3.0, 2.0, 1.0]
    ys = [5.0, 3.0, 1.0, 4.0, 5.0]
    assert pareto_mask(xs, ys) == [True, True, True, False, True]
    assert pareto_mask([1.0, 2.0], [1.0, 2.0], max_y=True) == [True, True]


# ---------------------------------------------------------------------------------------
# (b) two local workers give the rows of a serial run
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_local_workers_equal_serial(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path,
        TINY_LLM
        + """
axis { field: "workload.llm_inference.batch" values: ["1", "4", "16"] }
axis { field: "system.memory.dram_bw" name: "dram" values: ["50", "200"] }
""",
    )
    spec = load_sweep(path)
    out = run_sweep(spec, out=tmp_path / "out", workers=2, quiet=True)
    assert not out.interrupted and out.ran == 6 and out.counts == {"optimal": 6}
    rows = read_rows(tmp_path / "out" / "results.csv")
    assert len(rows) == 6
    assert list(rows[0]) == list(spec.columns)
    # in point order, whichever worker finished first (two runs' files differed in order)
    assert [r["index"] for r in rows] == [str(i) for i in range(6)]
    # a chip described in the setup, with no efficiency block: flagged on every row
    assert {r["chip_calibration"] for r in rows} == {"uncalibrated"}
    serial = [
        solve_point(
            Job(p.point_id, p.cells(spec.axis_names), p.text, p.workload_key),
            spec.base_path,
            spec.filters,
        )
        for p in out.points
    ]
    assert comparable(rows) == comparable(serial)
    for name in (
        "pareto_latency_vs_cost.svg",
        "pareto_tokens_per_usd.svg",
        "sweep_report.html",
        "best_latency_s/setup.txt",
        "best_latency_s/README.md",
        "best_tokens_per_s_per_usd/setup.txt",
    ):
        assert (tmp_path / "out" / name).is_file(), name
    best = setup_pb2.Setup()
    text_format.Parse((tmp_path / "out" / "best_latency_s" / "setup.txt").read_text(), best)
    assert best.workload.llm_inference.batch == 1
    assert "<svg" in (tmp_path / "out" / "sweep_report.html").read_text()
    # the workers drew the plots: the very files drawn here
    for plot in PLOTS:
        drawn = render_front((out.rows, plot, spec.axis_names))
        assert drawn is not None
        assert (tmp_path / "out" / f"{plot.name}.svg").read_text(encoding="utf-8") == drawn
    # a second run finds every point done
    again = run_sweep(spec, out=tmp_path / "out", workers=2, quiet=True)
    assert again.ran == 0 and len(again.rows) == 6
    assert len(read_rows(tmp_path / "out" / "results.csv")) == 6


def test_example_sweep_expands_to_valid_points() -> None:
    root = Path(__file__).resolve().parents[2]
    spec = load_sweep(root / "scenarios" / "sweep_llama70b" / "sweep.txt")
    points, _ = expand_points(spec)
    assert len(points) == 48
    statuses = [p.row["status"] if p.row else "to solve" for p in points]
    assert statuses.count("failed") == 0, [p.row for p in points if p.row]
    # the filter (System Power <= 15 kW) drops every B200 point: 8 x 1000 W TDP + 8 x 8000
    # GB/s x 0.16248 W per GB/s of DRAM = 18.4 kW before links; the others stay below 14.1 kW
    assert statuses.count("filtered") == 12
    assert {p.cells(spec.axis_names)["chip"] for p in points if p.row} == {"B200"}


def test_another_sweep_never_appends_to_a_results_file(tmp_path: Path) -> None:
    """Same columns, other points: refused (a sweep extended by new points resumes)."""
    axis = 'axis {{ field: "workload.llm_inference.batch" values: [{}] }}\n'
    first = load_sweep(write_sweep(tmp_path / "a", TINY_LLM + axis.format('"1"')))
    run_sweep(first, out=tmp_path / "out", workers=1, quiet=True)
    extended = load_sweep(write_sweep(tmp_path / "b", TINY_LLM + axis.format('"1", "2"')))
    assert run_sweep(extended, out=tmp_path / "out", workers=1, quiet=True).ran == 1
    other = load_sweep(write_sweep(tmp_path / "c", TINY_LLM + axis.format('"4"')))
    with pytest.raises(SetupError, match="not in this sweep"):
        run_sweep(other, out=tmp_path / "out", workers=1, quiet=True)
    assert len(read_rows(tmp_path / "out" / "results.csv")) == 2


def test_an_infeasible_point_still_says_what_its_chip_rests_on(tmp_path: Path) -> None:
    """The chip is resolved before the solve, so a point that does not fit (1e4 B of DRAM)
    carries the chip's calibration status like a solved one."""
    path = write_sweep(
        tmp_path,
        TINY_LLM
        + 'axis { field: "system.memory.dram_cap" name: "dram_cap" values: ["1e9", "1e4"] }\n',
    )
    out = run_sweep(load_sweep(path), out=tmp_path / "out", workers=1, quiet=True)
    status = {r["dram_cap"]: (r["status"], r["chip_calibration"]) for r in out.rows}
    assert status == {
        "1000000000": ("optimal", "uncalibrated"),
        "10000": ("infeasible", "uncalibrated"),
    }
