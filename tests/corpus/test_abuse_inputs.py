"""Abuse corpus, the inputs around a setup (issue #36 classes 3, 4 and 5): seeded random
families, each case asserting no traceback, a one-line `error:` naming the file or field
(exit 2) or a clean run (exit 0), and no silent accept of a value that cannot be right.

3. Tracebacks: enum numbers at the int32/int64 edges (setup and sweep axes); compare over
   truncated, corrupt and wrong-typed summary.json and configs.csv.
4. Silent accepts: chip tables (repeated columns, extra cells, NaN/inf/negative/text cells),
   validation CSVs (measured values that are no measurement, missing columns), plan.txt
   edits (configurations out of order, repeated pins, unknown kernels, numbers out of
   range), config.json sizes (negative, NaN, non-integer; `head_dim: 0` derives the width).
(Class 5, terminal safety, is in test_abuse_terminal.py.)
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from hardware.chip_table import TABLE_COLUMNS, load_chip_table
from mapshard.cli import EXIT_BAD_INPUT, main
from mapshard.sweeps import expand_points, load_sweep
from schema.errors import SetupError

ROOT = Path(__file__).resolve().parents[2]
H100 = 'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
GEMM = "workload { gemm { M: 64 K: 64 N: 64 } }\n" + H100
CHAIN = """dataflow_graph {
  kernels { name: "a" id: 1 gemm_input1_weight { M: 256 K: 256 N: 256 } }
  kernels { name: "b" id: 2 gemm_input1_weight { M: 256 K: 256 N: 256 } }
  kernels { name: "c" id: 3 gemm_input1_weight { M: 256 K: 256 N: 256 } }
  connections { startIdx: 1 endIdx: 2 }
  connections { startIdx: 2 endIdx: 3 }
}
system { chip: "H100-SXM5-80GB" num_chip: 1 }
execution { execution_style: DATAFLOW num_config: 3 }
"""
EDGES = [2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    return code, stdout, stderr


def assert_refused(code: int, stderr: str, names: str, lines: int | None = 1) -> None:
    """Exit 2, `lines` error lines (None: any number), the first naming `names`."""
    assert code == EXIT_BAD_INPUT, (code, stderr)
    got = stderr.splitlines()
    assert got and all(line.startswith("error: ") for line in got), stderr
    if lines is not None:
        assert len(got) == lines, stderr
    assert names in got[0], (names, stderr)


def scenario(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    return folder


# ---------------------------------------------------------------------------------------
# 3. tracebacks: enum numbers at the integer edges
# ---------------------------------------------------------------------------------------

ENUM_SETUPS = {
    "execution_style": GEMM + "execution { execution_style: %d }\n",
    "overlap": GEMM + "execution { overlap: %d }\n",
    "phase": 'workload { llm_inference { model { hf_model: "Llama-3.1-8B" } phase: %d '
    "batch: 1 context_len: 64 } }\n" + H100,
    "topology_kind": GEMM.replace(
        "num_chip: 1 }", "num_chip: 2 topology { kind: %d degree: 2 link_bw_GBps: 50 } }"
    ),  # fmt: skip
    "kernel_type": CHAIN.replace('name: "a" id: 1', 'name: "a" id: 1 type: %d'),
}


def _enum_cases() -> list[Any]:
    rng = random.Random("enum-edges")
    return [
        pytest.param(field, number, id=f"{field}-{number}")
        for field in ENUM_SETUPS
        for number in rng.sample(EDGES, 4)
    ]


@pytest.mark.parametrize("field, number", _enum_cases())
def test_an_enum_number_at_an_integer_edge_is_one_line(
    field: str, number: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = scenario(tmp_path / "sc", ENUM_SETUPS[field] % number)
    code, _, stderr = run_cli(["run", str(folder), "--out", str(tmp_path / "o"), "--quiet"],
                              capsys)  # fmt: skip
    assert_refused(code, stderr, "setup.txt")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("number", EDGES[:6])
def test_an_enum_number_on_a_sweep_axis_is_reported(number: int, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.txt"
    sweep.write_text(
        "inline { " + GEMM + " }\n"
        f'axis {{ field: "execution.execution_style" values: ["{number}", "DATAFLOW"] }}\n',
        encoding="utf-8",
    )
    try:
        points, _ = expand_points(load_sweep(sweep))
    except SetupError as exc:
        assert all(str(sweep) in p and "\n" not in p for p in exc.problems), exc.problems
        return
    bad = [p for p in points if p.row is not None]
    assert len(bad) == 1 and bad[0].row is not None and bad[0].row["status"] == "failed"


# ---------------------------------------------------------------------------------------
# 3. tracebacks: compare over broken result folders
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("result")
    assert main(["run", str(scenario(root / "sc", GEMM)), "--out", str(root / "r"),
                 "--quiet", "--no-sensitivity"]) == 0  # fmt: skip
    return root / "r"


WRONG_VALUES = [[], {}, "x", True, None, [1, [2]], {"a": {"b": 1}}, -1, 0, 1.5]
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", str(10**400)]
SUMMARY_KEYS = ["latency_s", "ttft_s", "tokens_per_s", "system_cost", "system_power_W",
                "energy_J", "memory_per_chip_bytes", "num_chips", "workload_flop",
                "flops_utilization", "status", "scenario", "parallelism"]  # fmt: skip


def _broken_summary(rng: random.Random, text: str) -> tuple[str, bool]:
    """A damaged summary.json, and whether it must be refused (a value nothing could have
    written: wrong JSON, a wrong type, a non-finite number)."""
    kind = rng.randrange(4)
    if kind == 0:
        return text[: rng.randrange(len(text))], True
    if kind == 1:
        return json.dumps(rng.choice([[1, 2], "summary", 3.5, None, [{"latency_s": 1}]])), True
    key = rng.choice(SUMMARY_KEYS)
    if kind == 2:
        number = rng.choice(NON_FINITE)
        return re.sub(rf'"{key}": [^,\n}}]*', f'"{key}": {number}', text, count=1), (
            f'"{key}"' in text and key not in ("status", "scenario", "parallelism")
        )
    value = rng.choice(WRONG_VALUES)
    data = json.loads(text)
    if key == "parallelism":
        value = rng.choice([{"tp": "8"}, {"tp": 1.5}, [1, 2], {"tp": {"x": 1}}, {"tp": True}])
    data[key] = value
    strings = key in ("status", "scenario")
    wrong = (
        value is not None
        and (isinstance(value, bool) or not isinstance(value, str if strings else (int, float)))
        or key == "parallelism"
    )
    return json.dumps(data, indent=2), wrong


@pytest.mark.parametrize("seed", range(16))
def test_compare_over_a_broken_summary_json(
    seed: int, result: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"summary-{seed}")
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in ("summary.json", "configs.csv"):
        (broken / f).write_bytes((result / f).read_bytes())
    text, refuse = _broken_summary(rng, (result / "summary.json").read_text(encoding="utf-8"))
    (broken / "summary.json").write_text(text, encoding="utf-8")
    args = ["compare", str(result), str(broken), "--out", str(tmp_path / "cmp")]
    code, _, stderr = run_cli(args, capsys)
    if refuse:
        assert_refused(code, stderr, str(broken / "summary.json"))
    else:
        assert code in (0, EXIT_BAD_INPUT), stderr
        if code:
            assert_refused(code, stderr, str(broken / "summary.json"))


def _broken_configs(rng: random.Random, text: str) -> str:
    header, *rows = text.splitlines(keepends=True)
    kind = rng.randrange(6)
    if kind == 0:
        return text[: rng.randrange(1, len(header))]  # a cut header: no bound column
    if kind == 1:
        return header.replace("per_step_s", "per_step").replace("total_s", "total")
    if kind == 2:
        cells = header.rstrip("\n").split(",")
        value = rng.choice(["fast", "nan", "inf", "-1", "", "1e400x"])
        row = rows[0].rstrip("\n").split(",")
        row[cells.index("per_step_s")] = value
        return header + ",".join(row) + "\n"
    if kind == 3:
        return header + rows[0].rstrip("\n") + ",extra,cells\n"
    if kind == 4:
        return header + ",".join(rows[0].split(",")[:3]) + "\n"  # a row cut short
    return "\ufeff\x00garbage\xff\n" + "\x01" * rng.randint(1, 100)


@pytest.mark.parametrize("seed", range(12))
def test_compare_over_a_broken_configs_csv(
    seed: int, result: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"configs-{seed}")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_bytes((result / "summary.json").read_bytes())
    text = _broken_configs(rng, (result / "configs.csv").read_text(encoding="utf-8"))
    (broken / "configs.csv").write_text(text, encoding="utf-8")
    args = ["compare", str(result), str(broken), "--out", str(tmp_path / "cmp")]
    code, _, stderr = run_cli(args, capsys)
    assert_refused(code, stderr, str(broken / "configs.csv"))
    assert not (tmp_path / "cmp").exists()


# ---------------------------------------------------------------------------------------
# 4. silent accepts: chip tables
# ---------------------------------------------------------------------------------------

NUMERIC = list(TABLE_COLUMNS)
BAD_CELLS = ["nan", "NaN", "inf", "-inf", "-1", "-0.5", "fast", "1e400", "0x10", "1,2,3"]


@pytest.mark.parametrize("seed", range(20))
def test_a_chip_table_with_a_bad_column_or_cell_is_refused(seed: int, tmp_path: Path) -> None:
    """Every damage is one problem naming FILE:ROW (no silent accept: a repeated column, a
    cell beyond the header, a cell that is no number >= 0)."""
    rng = random.Random(f"chip-table-{seed}")
    columns = ["name", *rng.sample(NUMERIC, 4)]
    good = ["X1", *(str(rng.randint(1, 100)) if TABLE_COLUMNS[c][2] else
                     f"{rng.uniform(1, 100):.3g}" for c in columns[1:])]  # fmt: skip
    kind = rng.randrange(3)
    rows = [columns, good]
    if kind == 0:  # a repeated column
        again = rng.choice(columns[1:])
        rows = [columns + [again.upper()], good + ["7"]]
        want = f"column {again} appears twice"
    elif kind == 1:  # extra cells
        rows = [columns, good + ["5"] * rng.randint(1, 3)]
        want = "beyond the header"
    else:  # a bad number
        at = rng.randrange(1, len(columns))
        good[at] = rng.choice(BAD_CELLS)
        want = f"column {columns[at]} must be"
    path = tmp_path / "chips.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator=rng.choice(["\n", "\r\n"])).writerows(rows)
    path.write_text(("\ufeff" if rng.random() < 0.3 else "") + buf.getvalue(), encoding="utf-8")
    with pytest.raises(SetupError) as refused:
        load_chip_table(path)
    problems = refused.value.problems
    assert len(problems) == 1 and problems[0].startswith(f"{path}:"), problems
    assert want in problems[0] and "\n" not in problems[0], problems


def test_a_chip_table_row_shorter_than_its_header_leaves_the_rest_unset(tmp_path: Path) -> None:
    """Spreadsheets drop trailing empty cells: the missing ones are not given, as if empty."""
    path = tmp_path / "chips.csv"
    path.write_text("name,bf16_tflops,memory_gb\nX1,500\n", encoding="utf-8")
    spec = load_chip_table(path)["X1"]
    assert spec.accelerator.bf16_tflops == 500 and spec.memory.dram_cap == 0


# ---------------------------------------------------------------------------------------
# 4. silent accepts: validation CSVs
# ---------------------------------------------------------------------------------------

DEV = ROOT / "tests" / "data" / "validation" / "validation_dev_structured.csv"
REQUIRED = ["id", "kind", "usable", "chip", "num_chips", "chips_per_node", "precision",
            "metric", "value", "flop_convention", "extra_params"]  # fmt: skip


def _dev_rows() -> list[list[str]]:
    with open(DEV, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("seed", range(12))
def test_a_validation_csv_without_a_measurement_is_refused(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"validation-{seed}")
    header, *rows = _dev_rows()
    row = list(rng.choice(rows))
    if rng.random() < 0.6:
        bad = rng.choice(["-1", "0", "-0", "nan", "inf", "-inf", "fast", "1e400", "1,5"])
        row[header.index("value")] = bad
        want = "is not a measurement"
    else:
        drop = header.index(rng.choice(REQUIRED))
        header = header[:drop] + header[drop + 1 :]
        row = row[:drop] + row[drop + 1 :]
        want = "missing column"
    path = tmp_path / "cases.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, row])
    path.write_text(buf.getvalue(), encoding="utf-8")
    out = tmp_path / "out"
    code, _, stderr = run_cli(["validate", str(path), "--out", str(out), "--quiet"], capsys)
    assert_refused(code, stderr, str(path))
    assert want in stderr and not out.exists()


# ---------------------------------------------------------------------------------------
# 4. silent accepts: plan.txt edits
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plan_txt(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("plan")
    assert main(["run", str(scenario(root / "sc", CHAIN)), "--out", str(root / "r"),
                 "--quiet", "--no-sensitivity"]) == 0  # fmt: skip
    return (root / "r" / "plan.txt").read_text(encoding="utf-8")


def _pins(text: str) -> list[tuple[str, int]]:
    """(kernel, configuration) of each graph kernel plan.txt pins, in order."""
    found = re.findall(r'name: "(\w+)"\n\s*id: \d+\n\s*config: (-?\d+)', text)
    return [(k, int(c)) for k, c in found]


def _set_config(text: str, kernel: str, number: int) -> str:
    return re.sub(rf'(name: "{kernel}"\n\s*id: \d+\n\s*config: )-?\d+', rf"\g<1>{number}", text)


def _edit_plan(rng: random.Random, text: str) -> tuple[str, bool]:
    """An edited plan.txt and whether the edit leaves a valid plan: the pinned
    configurations (-1 = searched) still follow the chain a -> b -> c (one left empty
    between used ones is renumbered, not refused)."""
    kind = rng.randrange(5)
    if kind == 0:  # move one kernel to another configuration
        kernel, new = rng.choice("abc"), rng.randrange(-1, 3)
        pinned = [c for _, c in _pins(_set_config(text, kernel, new)) if c >= 0]
        return _set_config(text, kernel, new), pinned == sorted(pinned)
    if kind == 1:  # a kernel given twice
        block = re.search(r"  kernels \{\n(?:    .*\n)+?  \}\n", text)
        assert block is not None
        return text.replace(block.group(0), block.group(0) * 2, 1), False
    if kind == 2:  # a connection to no kernel
        return text.replace("endIdx: 3", f"endIdx: {rng.choice([0, 9, -1, 2**31])}", 1), False
    if kind == 3:  # a configuration number out of range
        number = rng.choice([-2, 3, 99, 2**31, 2**32 + 1, -(2**31) - 1])
        return _set_config(text, rng.choice("abc"), number), False
    tm = rng.choice(["0", "-4", "x", ""])  # a tile that is none
    return re.sub(r"Tm=\d+", f"Tm={tm}", text, count=1), False


@pytest.mark.parametrize("seed", range(12))
def test_an_edited_plan_txt_is_run_or_refused(
    seed: int, plan_txt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sorted(k for k, _ in _pins(plan_txt)) == ["a", "b", "c"], plan_txt
    rng = random.Random(f"plan-{seed}")
    text, valid = _edit_plan(rng, plan_txt)
    path = tmp_path / "plan.txt"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    code, _, stderr = run_cli(["run", str(path), "--out", str(out), "--quiet"], capsys)
    if valid:
        assert code == 0, stderr
    else:
        assert_refused(code, stderr, "plan.txt", lines=None)
        assert not out.exists()


# ---------------------------------------------------------------------------------------
# 4. silent accepts: config.json sizes
# ---------------------------------------------------------------------------------------

TINY_LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
              "vocab_size": 1000}  # fmt: skip
SIZE_KEYS = [*(k for k in TINY_LLAMA if k != "model_type"), "head_dim"]
BAD_SIZES = ["-1", "-256", "2.5", "64.0001", "NaN", "Infinity", "-Infinity", '"256"', "[256]",
             "{}", "true", "1e30", str(10**30), "1e400"]  # fmt: skip
MODEL_SETUP = """workload {{ llm_inference {{ model {{ hf_model: "{model}" }} phase: DECODE
  batch: 1 context_len: 64 }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 1 }}
"""


@pytest.mark.parametrize("seed", range(14))
def test_a_config_json_size_that_is_no_size_is_refused(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"config-{seed}")
    key, value = rng.choice(SIZE_KEYS), rng.choice(BAD_SIZES)
    text = json.dumps(TINY_LLAMA | {key: "@"}).replace('"@"', value)
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    folder = scenario(tmp_path, MODEL_SETUP.format(model="config.json"))
    code, _, stderr = run_cli(["run", str(folder), "--out", str(tmp_path / "o"), "--quiet",
                               "--no-sensitivity"], capsys)  # fmt: skip
    assert_refused(code, stderr, "config.json")
    assert f"'{key}'" in stderr, stderr


def test_head_dim_zero_derives_the_width_like_hugging_face(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`head_dim: 0` (or null) means hidden_size / num_attention_heads = 256 / 4 = 64: the
    KV cache per token per layer is then 2 x kv_heads x 64 = 256 elements, as without it."""
    sizes = []
    for head_dim in ("0", "null", None):
        config = TINY_LLAMA if head_dim is None else TINY_LLAMA | {"head_dim": "@"}
        folder = tmp_path / f"m{len(sizes)}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config).replace('"@"', head_dim or ""))
        scenario(folder, MODEL_SETUP.format(model="config.json"))
        code, _, stderr = run_cli(["generate", str(folder), "--out", str(folder / "g")], capsys)
        assert code == 0, stderr
        summary = json.loads((folder / "g" / "summary.json").read_text())
        sizes.append(summary["num_params"])
    assert sizes[0] == sizes[1] == sizes[2]
