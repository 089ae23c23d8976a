"""A user's own validation CSV (found by fuzzing users' edits of shipped rows): every typed
cell is checked when the file is read, with the line it starts on; a malformed number is
never a silent default; a metric is one its kind's prediction has; a row's model columns
may not contradict the config it names."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mapshard import pipeline
from mapshard.fidelity.cases import Unmodelable, read_cases
from mapshard.fidelity.predict import predict
from mapshard.fidelity.scenarios import load_case_scenario
from schema.errors import SetupError

DATA = Path(__file__).parents[1] / "data" / "validation"
FILES = [DATA / f"validation_{n}.csv" for n in ("dev_structured", "public_fit", "public_check")]


def _row(row_id: str) -> tuple[list[str], dict[str, str]]:
    for path in FILES:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            for row in reader:
                if row["id"] == row_id:
                    return list(reader.fieldnames or []), row
    raise KeyError(row_id)


def user_csv(tmp_path: Path, row_id: str, **edits: str) -> Path:
    """A one-row CSV: shipped row `row_id` with `edits` (extra_params: `+key=value` appends)."""
    header, row = _row(row_id)
    for name, value in edits.items():
        if name == "extra_params" and value.startswith("+"):
            value = row["extra_params"] + ";" + value[1:]
        row[name] = value
    path = tmp_path / "mine.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        writer.writerow(row)
    return path


def _problem(path: Path) -> str:
    with pytest.raises(SetupError) as info:
        read_cases(path)
    (problem,) = info.value.problems
    assert "\n" not in problem
    return problem


@pytest.mark.parametrize(
    ("column", "cell", "says"),
    [
        ("m", "abc", "m 'abc' is not a whole number from 0 to 9007199254740992"),
        ("m", "4,096", "m '4,096' is not a whole number"),
        ("m", "-4096", "m '-4096' is not a whole number"),
        ("m", "1e20", "m '1e20' is not a whole number"),
        ("num_chips", "inf", "num_chips 'inf' is not a whole number"),
        ("usable", "yes", "usable 'yes' is not 0 or 1"),
        ("usable", "", "usable '' is not 0 or 1"),
        ("sequence_parallel", "2", "sequence_parallel '2' is not 0 or 1 (or leave it empty)"),
    ],
)
def test_a_typed_cell_that_is_not_its_type_is_one_line(tmp_path, column, cell, says):
    """They were read as other numbers (usable=yes as 0, sequence_parallel=2 as 0) or
    stopped one row with an unnamed "could not convert string to float"."""
    problem = _problem(user_csv(tmp_path, "K01", **{column: cell}))
    assert problem.startswith(f"{tmp_path / 'mine.csv'}: line 2: K01: {says}")


def test_a_problem_names_the_line_its_record_starts_on(tmp_path):
    """Blank lines and a quoted cell over three lines: the file line, not the record count."""
    header, row = _row("K01")
    path = tmp_path / "mine.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        f.write("\n\n")  # lines 2 and 3
        writer.writerow({**row, "notes": "one\ntwo\nthree"})  # lines 4-6
        writer.writerow({**row, "id": "K01b", "value": "abc"})  # line 7
    assert ": line 7: value 'abc' of K01b is not a measurement" in _problem(path)


@pytest.mark.parametrize("value", ["abc", "nan", "-1", "1e400"])
def test_a_malformed_number_in_extra_params_is_never_a_silent_default(tmp_path, value):
    """hbm_bw_Bps=abc predicted what the row predicts without the key."""
    (case,) = read_cases(user_csv(tmp_path, "K01", extra_params=f"+hbm_bw_Bps={value}"))
    with pytest.raises(Unmodelable, match=f"hbm_bw_Bps={value} is not a finite number >= 0"):
        case.extra_float("hbm_bw_Bps")


@pytest.mark.parametrize(("metric", "kind"), [("tokens_per_s", "gemm"), ("ttft_s", "gemm")])
def test_a_metric_the_kind_has_no_prediction_for_is_not_modelled(tmp_path, metric, kind):
    """A GEMM's tokens_per_s was 1 / its time, its ttft_s its time."""
    (case,) = read_cases(user_csv(tmp_path, "K01", metric=metric))
    with pytest.raises(Unmodelable, match=f"metric '{metric}' is not modelled for kind {kind}"):
        predict(case, tmp_path)


def test_the_ttft_of_a_static_batch_row_is_its_plans_ttft(tmp_path):
    """It was the whole request's latency (3.2 s against the plan's TTFT of 1.4 s)."""
    (case,) = read_cases(user_csv(tmp_path, "P-TRT07", metric="ttft_s", value="0.5"))
    plan = pipeline.plan(load_case_scenario(case, tmp_path))
    assert plan.ttft_s is not None and plan.ttft_s < plan.latency_s / 2
    assert predict(case, tmp_path).value == plan.ttft_s


def test_no_generated_token_is_no_throughput(tmp_path):
    """output_len 0 predicted 0 tokens/s (error -100%)."""
    (case,) = read_cases(user_csv(tmp_path, "P-TRT07", output_len="0"))
    with pytest.raises(Unmodelable, match="no generated tokens to count"):
        predict(case, tmp_path)


def test_a_model_column_contradicting_the_named_config_is_not_modelled(tmp_path):
    """kv_heads 5 of Llama-2-7B (32 heads, MHA) was ignored: the row predicted the shipped
    config unchanged."""
    (case,) = read_cases(user_csv(tmp_path, "P-TRT07", kv_heads="5"))
    with pytest.raises(Unmodelable, match="kv_heads 5 but Llama-2-7b-hf's config has 32"):
        load_case_scenario(case, tmp_path)
